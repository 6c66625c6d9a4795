"""`sk report usage --from-sacct` against the real devcluster's Slurm accounting: real GPU jobs (root's and
alice's, a 2-node job, an array) charged to an account of their own, then the report's GPU-hours compared with
what `sacct -j <ids>` itself says (ElapsedRaw x the GPU count in AllocTRES), computed here independently.

The account `sk-report-it` (associations for root and alice) is created idempotently by the test: it keeps the
test's jobs apart from other tests' jobs in the same window. A file lock serializes concurrent runs of this test
(e.g. CI and a developer) on the shared cluster, since both would charge that account.
"""

from __future__ import annotations

import fcntl
import json
import re
import subprocess
import time
from datetime import datetime, timezone

import pytest

from tests.integration.jobs import DEVSITE, SK, TERMINAL

pytestmark = pytest.mark.integration

ACCOUNT = "sk-report-it"
USERS = ("root", "alice")


def _sacctmgr(*args: str) -> str:
    out = subprocess.run(["sacctmgr", "-i", "-n", "-P", *args], capture_output=True, text=True)
    return out.stdout + out.stderr


@pytest.fixture(scope="module")
def account():
    """The test's own account, with associations for root and alice (idempotent), held under a lock."""
    with open("/tmp/sk-report-it.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = set(_sacctmgr("show", "assoc", f"account={ACCOUNT}", "format=user").split())
        if not have:
            _sacctmgr("add", "account", ACCOUNT, "description=slurmkit report tests", "organization=slurmkit")
        missing = [u for u in USERS if u not in have]
        if missing:
            _sacctmgr("add", "user", ",".join(missing), f"account={ACCOUNT}")
        yield ACCOUNT


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sbatch(args: list[str], user: str = "root") -> int:
    cmd = ["sbatch", "--parsable", "-A", ACCOUNT, "-c", "1", "--mem=100M", "-t", "2", "-o", "/dev/null", *args]
    if user != "root":
        cmd = ["runuser", "-u", user, "--", *cmd]
    # a fresh association reaches slurmctld from slurmdbd asynchronously: retry the first submissions briefly
    for _ in range(20):
        out = subprocess.run(cmd, capture_output=True, text=True, cwd="/tmp")
        if out.returncode == 0:
            return int(out.stdout.strip().split(";")[0])
        if "Invalid account" not in out.stderr:
            break
        time.sleep(0.5)
    raise AssertionError(f"sbatch failed: {out.stderr}")


def _wait_all(ids: list[int], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "State", "-j", ",".join(map(str, ids))],
                             capture_output=True, text=True).stdout.split("\n")
        states = [s.split()[0] for s in out if s.strip()]
        if states and all(s in TERMINAL for s in states):
            return
        time.sleep(1)
    raise TimeoutError(f"jobs {ids} not finished after {timeout}s")


def _expected(ids: list[int]) -> dict[str, tuple[int, float]]:
    """(allocations, GPU-hours) per user straight from sacct: ElapsedRaw x gres/gpu of AllocTRES."""
    out = subprocess.run(["sacct", "--duplicates", "--allocations", "-n", "-P", "-o", "User,ElapsedRaw,AllocTRES",
                          "-j", ",".join(map(str, ids))], capture_output=True, text=True, check=True).stdout
    per_user: dict[str, tuple[int, float]] = {}
    for line in out.splitlines():
        user, elapsed, tres = line.split("|")
        m = re.search(r"(?:^|,)gres/gpu=(\d+)", tres)
        if m:
            n, h = per_user.get(user, (0, 0.0))
            per_user[user] = (n + 1, h + int(elapsed) * int(m.group(1)) / 3600)
    return per_user


def _report(user: str, since: int, until: int, *extra: str) -> dict:
    cmd = [SK, "report", "usage", "--from-sacct", "--site", DEVSITE, "--since", _iso(since), "--until", _iso(until),
           "--by", "account,user", "--format", "json", *extra]
    if user != "root":
        cmd = ["runuser", "-u", user, "--", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd="/tmp")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def finished_jobs(account):
    since = int(time.time()) - 1
    ids = [
        _sbatch(["-J", "skrep-2gpu", "--gpus=a100:2", "--wrap", "sleep 3"]),
        _sbatch(["-J", "skrep-2node", "-N", "2", "--gpus-per-node=a100:1", "--wrap", "sleep 2"]),
        _sbatch(["-J", "skrep-array", "--array=0-1", "--gpus=a100:1", "--wrap", "sleep 2"]),
        _sbatch(["-J", "skrep-alice", "--gpus=a100:3", "--wrap", "sleep 2"], user="alice"),
    ]
    _wait_all(ids)
    time.sleep(1)  # slurmdbd has the end records once sacct shows the states; one more second for the last write
    return ids, since, int(time.time()) + 1


def test_gpu_hours_equal_sacct_alloc_tres_times_elapsed(finished_jobs):
    ids, since, until = finished_jobs
    expected = _expected(ids)
    assert set(expected) == set(USERS) and expected["root"][0] == 4  # 2 jobs + 2 array tasks
    data = _report("root", since, until)
    rows = {r["user"]: r for r in data["rows"] if r["account"] == ACCOUNT}
    assert set(rows) == set(USERS)
    for user, (n, hours) in expected.items():
        assert rows[user]["jobs"] == n
        assert rows[user]["gpu_hours"] == pytest.approx(hours, abs=1e-9)
    assert data["data_source"] == "slurm-accounting (allocation only)" and data["user_scope"] == "all"
    assert any("no GPU metrics" in n for n in data["notes"])
    assert "mean_util_pct" not in rows["root"]  # unknown, so not reported at all - never 0 %


def test_alice_sees_only_her_own_jobs(finished_jobs):
    # PrivateData is not set on the devcluster: sacct itself would show alice everyone's jobs.
    cfg = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    assert re.search(r"^PrivateData\s*=\s*none", cfg, re.M)
    ids, since, until = finished_jobs
    data = _report("alice", since, until)
    assert {r["user"] for r in data["rows"]} == {"alice"} and data["user_scope"] == "alice"
    mine = [r for r in data["rows"] if r["account"] == ACCOUNT]
    assert len(mine) == 1 and mine[0]["gpu_hours"] == pytest.approx(_expected(ids)["alice"][1], abs=1e-9)
    assert any("only your own jobs" in n for n in data["notes"])


def test_html_page_says_allocation_only(finished_jobs, tmp_path):
    _ids, since, until = finished_jobs
    page = tmp_path / "sacct.html"
    out = subprocess.run([SK, "report", "usage", "--from-sacct", "--since", _iso(since), "--until", _iso(until),
                          "--format", "html", "-o", str(page)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    text = page.read_text()
    assert "Slurm accounting" in text and "no GPU metrics" in text and "0.0 %" not in text
