"""Per-GPU accounting on the real devcluster: Slurm runs `sk hook prolog/epilog` on gpu01/gpu02 (wrappers that
contrib/devcluster/up installs from hook-settings.in: simulated source), `sk admin ingest` moves the node summaries
into the devcluster's store, and every job has one row per GPU Slurm allocated on each node: no more, no fewer.

Jobs are named sknode-<random> so jobs of parallel test runs are never confused; the spool and store are the
devcluster's own (site_config/devcluster.yaml accounting), shared with other tests: rows are found by job id.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from slurmkit.accounting import admin_comment, sampler
from slurmkit.accounting.metrics.simulated import SimulatedSource
from slurmkit.store import gpus as store_gpus
from slurmkit.store.db import open_store
from tests.integration.jobs import DEVSITE, wait

pytestmark = pytest.mark.integration

SK = str(Path(sys.executable).parent / "sk")
ALLOC = re.compile(r"^ALLOC (\S+) (\S+) (\d+)$", re.M)  # node, SLURM_JOB_GPUS, SLURM_JOB_ID
PRINT = 'echo "ALLOC $SLURMD_NODENAME $SLURM_JOB_GPUS $SLURM_JOB_ID"'


def _name() -> str:
    return f"sknode-{uuid.uuid4().hex[:8]}"


def _sbatch(args: list[str], wrap: str, out: Path) -> int:
    res = subprocess.run(["sbatch", "--parsable", "-J", _name(), "-t", "2", f"--output={out}", *args,
                          "--wrap", wrap], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return int(res.stdout.strip().split(";")[0])


def _allocations(text: str) -> dict[int, set[tuple[str, int]]]:
    """job id -> {(node, Slurm GPU index)} as the job itself saw them."""
    out: dict[int, set[tuple[str, int]]] = {}
    for node, gpus, job in ALLOC.findall(text):
        out.setdefault(int(job), set()).update((node, int(i)) for i in gpus.split(","))
    return out


def _store_path(devcluster: Path) -> str:
    return str(devcluster / "accounting.db")


def _ingest_until(devcluster: Path, expected: dict[int, set[tuple[str, int]]], timeout: float = 90) -> dict:
    """Run the real `sk admin ingest` until every expected job has its job row and GPU rows on every node
    (epilogs finish after sacct already says COMPLETED). Returns job id -> list of GPU row dicts."""
    deadline = time.monotonic() + timeout
    while True:
        res = subprocess.run([SK, "admin", "ingest", "--site", DEVSITE], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        with open_store(_store_path(devcluster), migrate=False) as store:
            got = {}
            for job in expected:
                cur = store.execute("SELECT * FROM job_gpus WHERE cluster = 'devcluster' AND job_id = ? "
                                    "ORDER BY node, gpu_index", (job,))
                cols = [c[0] for c in cur.description]
                got[job] = [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
            jobs = {r[0] for r in store.execute(
                f"SELECT job_id FROM jobs WHERE cluster = 'devcluster' AND job_id IN "
                f"({','.join('?' for _ in expected)})", tuple(expected)).fetchall()}
        nodes_ok = all({r["node"] for r in got[j]} >= {n for n, _ in expected[j]} for j in expected)
        if (nodes_ok and jobs == set(expected)) or time.monotonic() > deadline:
            assert jobs == set(expected), f"job rows missing: {set(expected) - jobs}"
            return got
        time.sleep(1)


def _check_rows(job: int, rows: list[dict], expected: set[tuple[str, int]]) -> None:
    assert {(r["node"], r["gpu_index"]) for r in rows} == expected, (job, rows)
    assert len(rows) == len(expected)  # no duplicates
    for r in rows:
        assert r["source"] == "simulated" and r["uuid"] == f"SIMULATED-{r['node']}-{r['gpu_index']}"
        assert r["flags"] is None and r["samples"] >= 2 and r["interval_s"] == 1.0
        # The simulated source replays the same readings for this job run, node and GPU: the maximum the
        # store holds is the maximum of the readings 0..samples-1.
        sim = SimulatedSource(key=f"devcluster/{job}/0", node=r["node"], interval_s=1.0)
        sim.open([r["gpu_index"]])
        assert r["util_max"] == max(sim.reading(0, k)[0] for k in range(r["samples"]))


@pytest.fixture
def outdir():
    """The jobs' output files (a directory under /tmp the slurmds write into), removed after the test."""
    path = Path(tempfile.mkdtemp(prefix="sknode-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_two_node_job_has_rows_for_exactly_its_gpus_on_each_node(devcluster, outdir):
    out = outdir / "two.out"
    job = _sbatch(["-N2", "--ntasks-per-node=1", "--gpus-per-node=a100:3"], f"srun bash -c '{PRINT}'; sleep 3",
                  out)
    assert wait(job) == "COMPLETED"
    expected = _allocations(out.read_text())
    assert set(expected) == {job} and {n for n, _ in expected[job]} == {"gpu01", "gpu02"}
    assert len(expected[job]) == 6
    rows = _ingest_until(devcluster, expected)
    _check_rows(job, rows[job], expected[job])
    with open_store(_store_path(devcluster), migrate=False) as store:
        gpus, nodes = store.execute("SELECT gpus, nodes FROM jobs WHERE cluster = 'devcluster' AND job_id = ?",
                                    (job,)).fetchone()
    assert (gpus, nodes) == (6, "gpu[01-02]")


def test_array_tasks_each_have_their_own_gpu_rows(devcluster, outdir):
    array = _sbatch(["--array=0-2", "--gpus-per-node=a100:2"], f"{PRINT}; sleep 3", outdir / "arr-%a.out")
    states = {wait(f"{array}_{i}") for i in range(3)}
    assert states == {"COMPLETED"}
    expected: dict[int, set[tuple[str, int]]] = {}
    for i in range(3):
        expected.update(_allocations((outdir / f"arr-{i}.out").read_text()))
    assert len(expected) == 3  # each task is its own job (id) with its own GPUs
    rows = _ingest_until(devcluster, expected)
    for job, exp in expected.items():
        assert len(exp) == 2
        _check_rows(job, rows[job], exp)
    with open_store(_store_path(devcluster), migrate=False) as store:
        tasks = store.execute(
            f"SELECT array_job_id, array_task_id FROM jobs WHERE cluster = 'devcluster' AND job_id IN "
            f"({','.join('?' for _ in expected)})", tuple(expected)).fetchall()
    assert sorted(tuple(t) for t in tasks) == [(array, 0), (array, 1), (array, 2)]


def test_killed_sampler_still_gives_a_flagged_summary(devcluster, outdir):
    out = outdir / "kill.out"
    job = _sbatch(["--gpus-per-node=a100:1"], f"{PRINT}; sleep 10", out)
    state_root = devcluster / "state" / "sk-sampler"
    deadline = time.monotonic() + 60
    d = None
    while time.monotonic() < deadline:
        found = list(state_root.glob(f"*/devcluster-{job}-0"))
        if found and (found[0] / "samples.jsonl").exists() and \
                len((found[0] / "samples.jsonl").read_text().splitlines()) >= 2:
            d = found[0]
            break
        time.sleep(0.2)
    assert d is not None, f"no sampler state for job {job} under {state_root}"
    pid = int((d / "sampler.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]:
        time.sleep(0.05)
    written = len((d / "samples.jsonl").read_text().splitlines())
    assert wait(job) == "COMPLETED"
    expected = _allocations(out.read_text())
    [row] = _ingest_until(devcluster, expected)[job]
    assert (row["node"], row["gpu_index"]) == next(iter(expected[job]))
    assert d.parent.name == row["node"]  # state per node: the devcluster runs two slurmd on one host
    assert row["flags"] == "sampler-died"
    assert row["samples"] == written and row["util_mean"] is not None and row["source"] == "simulated"


def _admin_comment(job: int) -> str:
    return subprocess.run(["sacct", "-n", "-X", "-P", "-j", str(job), "-o", "AdminComment"],
                          capture_output=True, text=True, timeout=30).stdout.strip()


def test_admin_comment_transport_survives_concurrent_node_epilogs(devcluster, tmp_path):
    """Two nodes' epilogs write the AdminComment of a job that has finished (as real epilogs run: slurmctld
    refuses `scontrol update` then) at once; both segments stay in slurmdbd, sacct keeps them for reconcile, and
    they upsert into a store like spool records."""
    res = subprocess.run(["sbatch", "--parsable", "--hold", "-J", _name(), "-t", "1", "--gpus=1", "-o", "/dev/null",
                          "--wrap", "true"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    job = int(res.stdout.strip())
    subprocess.run(["scancel", str(job)], timeout=30, check=True)
    assert wait(job) == "CANCELLED"
    env = {**os.environ, "SK_TRANSPORT": "admin_comment", "SK_STATE_DIR": str(tmp_path / "state"),
           "SK_SPOOL": str(tmp_path / "spool"), "SLURM_JOB_ID": str(job), "SLURM_CLUSTER_NAME": "devcluster"}
    procs = [subprocess.Popen([SK, "hook", "epilog"], env={**env, "SLURMD_NODENAME": node, "SLURM_JOB_GPUS": gpus})
             for node, gpus in (("gpu01", "2,3"), ("gpu02", "5"))]
    assert [p.wait(timeout=90) for p in procs] == [0, 0]
    assert not (tmp_path / "spool").exists()  # nothing fell back to the spool
    text = _admin_comment(job)
    recs = admin_comment.parse_admin_comment(text)
    assert sorted((r["node"], [g["index"] for g in r["gpus"]]) for r in recs) == [("gpu01", [2, 3]), ("gpu02", [5])]
    with open_store(str(tmp_path / "a.db")) as store:
        assert store_gpus.upsert(store, recs) == 3
        flags = {r[0] for r in store.execute("SELECT flags FROM job_gpus WHERE job_id = ?", (job,)).fetchall()}
    assert flags == {"no-sampler"}


def test_admin_comment_of_another_tool_is_never_lower_cased(devcluster, tmp_path):
    """Another tool's AdminComment text (jobstats' base64) is case-sensitive. Where sacctmgr keeps case (23.02
    and later) the epilog adds its segment beside it; where it lower-cases (22.05), the epilog leaves the
    comment alone and the segment goes to the spool, flagged: neither tool loses anything."""
    res = subprocess.run(["sbatch", "--parsable", "--hold", "-J", _name(), "-t", "1", "--gpus=1", "-o", "/dev/null",
                          "--wrap", "true"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    job = int(res.stdout.strip())
    theirs = "JS1:H4sIAbCdEf+/=="
    subprocess.run(["scontrol", "update", f"job={job}", f"AdminComment={theirs}"], timeout=30, check=True)
    subprocess.run(["scancel", str(job)], timeout=30, check=True)
    assert wait(job) == "CANCELLED"
    deadline = time.monotonic() + 30
    while _admin_comment(job) != theirs:  # slurmdbd stores it asynchronously
        assert time.monotonic() < deadline, _admin_comment(job)
        time.sleep(0.5)
    env = {**os.environ, "SK_TRANSPORT": "admin_comment", "SK_STATE_DIR": str(tmp_path / "state"),
           "SK_SPOOL": str(tmp_path / "spool"), "SLURM_JOB_ID": str(job), "SLURM_CLUSTER_NAME": "devcluster",
           "SLURMD_NODENAME": "gpu01", "SLURM_JOB_GPUS": "4"}
    subprocess.run([SK, "hook", "epilog"], env=env, check=True, timeout=90)
    text = _admin_comment(job)
    assert text.split(",")[0] == theirs
    spooled = list((tmp_path / "spool").glob("*.json")) if (tmp_path / "spool").exists() else []
    if admin_comment.lowercases():
        assert text == theirs and len(spooled) == 1
        rec = json.loads(spooled[0].read_text())
        assert rec["job_id"] == job and "admin-comment-failed" in rec["flags"]
    else:
        assert [r["node"] for r in admin_comment.parse_admin_comment(text)] == ["gpu01"] and not spooled


def test_admin_comment_of_an_array_task_reaches_that_task_alone(devcluster, tmp_path):
    """One task of an array has the array's own id (in 25.11 the last, not the first): `sacct -j`/`sacctmgr
    where jobid=` with that id select every task, so its epilog must select it as <array>_<task>."""
    res = subprocess.run(["sbatch", "--parsable", "-a", "0-1", "-J", _name(), "-t", "1", "-o", "/dev/null",
                          "--wrap", "true"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    array = int(res.stdout.strip())
    assert [wait(f"{array}_{i}") for i in (0, 1)] == ["COMPLETED", "COMPLETED"]

    def comments() -> dict[int, str]:  # raw job id -> AdminComment, of every task
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", str(array), "-o", "JobIDRaw,AdminComment"],
                             capture_output=True, text=True, timeout=30).stdout
        return {int(raw): text for raw, _, text in (line.partition("|") for line in out.splitlines())}

    deadline = time.monotonic() + 30
    while len(comments()) < 2:  # slurmdbd stores the tasks asynchronously
        assert time.monotonic() < deadline, comments()
        time.sleep(0.5)
    assert array in comments()
    env = {**os.environ, "SK_TRANSPORT": "admin_comment", "SK_STATE_DIR": str(tmp_path / "state"),
           "SK_SPOOL": str(tmp_path / "spool"), "SLURM_JOB_ID": str(array), "SLURM_CLUSTER_NAME": "devcluster",
           "SLURMD_NODENAME": "gpu01", "SLURM_JOB_GPUS": "0"}
    subprocess.run([SK, "hook", "epilog"], env=env, check=True, timeout=90)
    got = {raw: [r["job_id"] for r in admin_comment.parse_admin_comment(text)] for raw, text in comments().items()}
    assert got == {raw: ([array] if raw == array else []) for raw in got}


def test_samples_of_a_job_that_died_with_its_node_are_delivered_by_the_next_prolog(devcluster, outdir):
    """A node lost power mid-job: its sampler is gone and no epilog came. After the reboot, the first job's real
    Slurm prolog finds the run directory written before the boot and delivers its samples, flagged."""
    state = devcluster / "state" / "sk-sampler"
    res = subprocess.run(["sbatch", "--parsable", "--hold", "-J", _name(), "-t", "1", "-o", "/dev/null", "--wrap",
                          "true"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    dead_job = int(res.stdout.strip())  # a real job (Slurm's record of it ends when its node is declared down)
    subprocess.run(["scancel", str(dead_job)], timeout=30, check=True)
    env = {**os.environ, "SK_STATE_DIR": str(state), "SK_SPOOL": str(outdir / "unused-spool"),
           "SK_METRIC_SOURCE": "simulated", "SK_SAMPLE_INTERVAL": "0.2", "SLURMD_NODENAME": "gpu01",
           "SLURM_CLUSTER_NAME": "devcluster", "SLURM_JOB_ID": str(dead_job), "SLURM_JOB_GPUS": "7"}
    subprocess.run([SK, "hook", "prolog"], env=env, check=True, timeout=60)
    d = state / "gpu01" / f"devcluster-{dead_job}-0"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len((d / "samples.jsonl").read_text().splitlines()
                                              if (d / "samples.jsonl").exists() else []) < 3:
        time.sleep(0.1)
    pid = int((d / "sampler.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)  # the power cut
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]:
        time.sleep(0.05)
    written = len((d / "samples.jsonl").read_text().splitlines())
    btime = sampler.boot_time()
    for p in [*d.iterdir(), d]:  # what a reboot leaves: every write before the boot
        os.utime(p, (btime - 600, btime - 600))

    job = _sbatch(["-w", "gpu01", "--gpus-per-node=a100:1"], PRINT, outdir / "next.out")
    assert wait(job) == "COMPLETED"
    deadline = time.monotonic() + 60
    while True:
        res = subprocess.run([SK, "admin", "ingest", "--site", DEVSITE], capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, res.stderr
        with open_store(_store_path(devcluster), migrate=False) as store:
            rows = store.execute("SELECT node, gpu_index, flags, samples FROM job_gpus WHERE cluster = "
                                 "'devcluster' AND job_id = ?", (dead_job,)).fetchall()
        if rows or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert [tuple(r) for r in rows] == [("gpu01", 7, "node-rebooted", written)] and written >= 3
    assert not d.exists()
