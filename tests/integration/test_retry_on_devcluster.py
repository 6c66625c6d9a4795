"""Idempotent retry while the controller is unreachable, without touching the shared cluster's slurmctld.

For the rest backend the same trick applies one level up: a private slurmrestd, running as alice on its own
socket, reads such a slurm.conf copy and answers HTTP 500 "Unable to contact slurm controller" until the forwarder
starts.

The client gets a copy of slurm.conf whose SlurmctldPort is a free port: nothing listens there, so sbatch/squeue
fail with "Unable to contact slurm controller (connect failure)" exactly as if slurmctld were down, while other
users of the devcluster are unaffected. "Bringing the controller back" is starting a small TCP forwarder (in this
test) from that port to the real slurmctld port. Forwarding works with Slurm's protocol for sbatch and squeue: the
request and the reply travel on the one client-opened connection, and the munge credential does not bind the
client's address (checked by hand: a forwarded `sbatch --wrap` returns a job id).

The copy also sets MessageTimeout=2: sbatch retries the connection for MessageTimeout seconds (measured: 9.0 s
with the default 10, 1.0 s with 2), which would hide sk's own retry behind sbatch's.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.jobs import DEVSITE, MIN_PATH, SK, SLURM_SBIN, SPEC

pytestmark = pytest.mark.integration

CTLD = ("127.0.0.1", 16817)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Forwarder:
    """TCP forwarder port -> slurmctld. drop_replies=N: swallow the controller's reply on the first N connections
    (the request is delivered and acted on; the client sees the connection close with nothing: a lost answer)."""

    def __init__(self, port: int, drop_replies: int = 0):
        self.port, self.drop_replies, self.connections = port, drop_replies, 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(CTLD)
            drop = self.connections <= self.drop_replies
            threading.Thread(target=_pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, client, drop), daemon=True).start()

    def close(self) -> None:
        self.sock.close()


def _pump(src: socket.socket, dst: socket.socket, drop: bool) -> None:
    try:
        while data := src.recv(65536):
            if not drop:
                dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def unreachable(tmp_path) -> tuple[dict[str, str], int]:
    """(environment whose slurm.conf points at a port nothing listens on, that port)."""
    port = free_port()
    conf = tmp_path / "slurm.conf"
    write_conf(conf, port)
    return {**os.environ, "SLURM_CONF": str(conf)}, port


def write_conf(conf: Path, port: int) -> None:
    real = Path(os.environ.get("DEVCLUSTER_DIR", "/run/slurmkit-devcluster")) / "etc" / "slurm.conf"
    text, n = re.subn(r"(?m)^SlurmctldPort=\d+$", f"SlurmctldPort={port}", real.read_text())
    assert n == 1, "the devcluster's slurm.conf has no SlurmctldPort line"
    conf.write_text(text + "MessageTimeout=2\n")
    conf.chmod(0o644)


def start_submit(tmp_path: Path, env: dict[str, str], name: str) -> subprocess.Popen:
    (tmp_path / "job.yaml").write_text(SPEC.format(name=name, cmd="true"))
    return subprocess.Popen([SK, "submit", "job.yaml", "--site", DEVSITE, "--backend", "cli", "--json"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def jobs_tagged(tag: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-a", "--states=all", "-o", "%i|%k"], capture_output=True,
                         text=True, check=True).stdout
    return [line.split("|")[0] for line in out.splitlines() if line.split("|", 1)[1].strip() == f"sk:{tag}"]


def jobs_named(name: str) -> list[str]:
    out = subprocess.run(["squeue", "-h", "-a", "--states=all", "-n", name, "-o", "%i"], capture_output=True,
                         text=True, check=True).stdout
    return out.split()


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def cancel(ids: list[str]) -> None:
    if ids:
        subprocess.run(["scancel", *ids], check=False)


def test_controller_back_after_3s_submits_exactly_once(tmp_path, unreachable):
    env, port = unreachable
    name = f"be-retry-{uuid.uuid4().hex[:6]}"
    proc = start_submit(tmp_path, env, name)
    time.sleep(3)
    fwd = Forwarder(port)
    try:
        rc, out, err = finish(proc)
    finally:
        fwd.close()
    [item] = json.loads(out) if rc == 0 else [None]
    ids = jobs_named(name)
    try:
        assert rc == 0, err
        assert "Slurm controller unreachable" in err and "retrying" in err  # the first attempt really failed
        assert jobs_tagged(item["tag"]) == [str(item["job_id"])] == ids  # exactly one job with that tag
        assert not item["reused"]
    finally:
        cancel(ids)


def test_lost_answer_is_not_submitted_twice(tmp_path, unreachable):
    """The controller creates the job but its reply never arrives: the retry must find the job, not add one."""
    env, port = unreachable
    fwd = Forwarder(port, drop_replies=1)
    name = f"be-retry-lost-{uuid.uuid4().hex[:6]}"
    try:
        rc, out, err = finish(start_submit(tmp_path, env, name))
    finally:
        fwd.close()
    ids = jobs_named(name)
    try:
        assert rc == 0, err
        assert "Zero Bytes were transmitted or received" in err  # sbatch's own report of the lost reply
        [item] = json.loads(out)
        assert item["reused"] and jobs_tagged(item["tag"]) == [str(item["job_id"])] == ids
    finally:
        cancel(ids)


def test_unreachable_beyond_the_retry_budget_fails_clearly_and_creates_nothing(tmp_path, unreachable):
    env, _ = unreachable
    name = f"be-retry-down-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    rc, out, err = finish(start_submit(tmp_path, env, name))
    took = time.monotonic() - started
    assert rc == 1 and out == ""
    assert "error: Slurm controller unreachable: Batch job submission failed: Unable to contact slurm controller" \
        in err
    assert "retrying later will not create a duplicate" in err and "Traceback" not in err
    assert err.count("retrying in") == 2 and took >= 4  # three attempts, two waits of 2 s
    assert jobs_named(name) == []


@pytest.fixture
def private_slurmrestd():
    """alice's own slurmrestd whose slurm.conf names an unused SlurmctldPort: (socket URL, that port).

    setpriv execs slurmrestd as alice (as contrib/devcluster/up does), so the Popen pid is the daemon's own.
    """
    alice = pwd.getpwnam("alice")
    work = Path(tempfile.mkdtemp(prefix="be-retry-rest-", dir="/tmp"))
    os.chown(work, alice.pw_uid, alice.pw_gid)
    port = free_port()
    write_conf(work / "slurm.conf", port)
    sock = work / "rest.sock"
    with open(work / "slurmrestd.log", "w") as log:
        daemon = subprocess.Popen(
            ["setpriv", "--reuid=alice", "--regid=alice", "--init-groups", "env", "-i", f"PATH={MIN_PATH}",
             f"SLURM_CONF={work / 'slurm.conf'}", f"{SLURM_SBIN}/slurmrestd", "-a", "rest_auth/local", f"unix:{sock}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 20
    while not sock.exists() and time.monotonic() < deadline and daemon.poll() is None:
        time.sleep(0.1)
    assert sock.exists(), (work / "slurmrestd.log").read_text()
    yield f"unix:{sock}", port, work
    daemon.terminate()
    daemon.wait(timeout=20)
    shutil.rmtree(work, ignore_errors=True)


def test_rest_controller_back_after_3s_submits_exactly_once(private_slurmrestd):
    url, port, work = private_slurmrestd
    name = f"be-retry-rest-{uuid.uuid4().hex[:6]}"
    (work / "job.yaml").write_text(SPEC.format(name=name, cmd="true"))
    env = ["env", "-i", f"PATH={MIN_PATH}", "HOME=/home/alice", "USER=alice", "LANG=C.UTF-8", f"SK_REST_URL={url}"]
    proc = subprocess.Popen(["runuser", "-u", "alice", "--", *env, SK, "submit", "job.yaml", "--site", DEVSITE,
                             "--backend", "rest", "--json"], cwd=work, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    fwd = Forwarder(port)
    try:
        rc, out, err = finish(proc)
    finally:
        fwd.close()
    ids = jobs_named(name)
    try:
        assert rc == 0, err
        # slurmrestd's own answer (HTTP 500, error 1800) was seen and retried.
        assert "Slurm controller unreachable (via slurmrestd)" in err and "retrying" in err
        [item] = json.loads(out)
        assert item["backend"] == "rest" and jobs_tagged(item["tag"]) == [str(item["job_id"])] == ids
        shown = subprocess.run(["scontrol", "show", "job", ids[0]], capture_output=True, text=True).stdout
        assert "UserId=alice(" in shown
    finally:
        cancel(ids)
