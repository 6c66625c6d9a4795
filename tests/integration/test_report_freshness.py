"""Every store report says what the store lacks: on the devcluster, a finished GPU job that Slurm accounting
lists and a store does not have is counted (real sacct, real slurmdbd), and no longer once import-sacct added it."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.integration.jobs import SK, wait

pytestmark = pytest.mark.integration


def test_a_store_behind_slurm_is_reported_with_what_it_lacks_and_the_fix(devcluster, tmp_path):
    since = int(time.time()) - 5
    res = subprocess.run(["sbatch", "--parsable", "-J", "sk-fresh", "-t", "1", "--gpus=1", "-o", "/dev/null",
                          "--wrap", "true"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    job = int(res.stdout.strip().split(";")[0])
    assert wait(job) == "COMPLETED"
    deadline = time.monotonic() + 30
    while str(job) not in subprocess.run(["sacct", "-n", "-X", "-j", str(job), "-o", "JobIDRaw,End"],
                                         capture_output=True, text=True).stdout:
        assert time.monotonic() < deadline  # slurmdbd stores the job asynchronously
        time.sleep(0.5)
    until = int(time.time()) + 1
    store = tmp_path / "behind.db"
    (tmp_path / "none").mkdir()
    made = subprocess.run([SK, "admin", "ingest", "--store", str(store), "--spool", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=60)  # an empty, migrated store
    assert made.returncode == 0, made.stderr

    def report() -> dict:
        out = subprocess.run([SK, "report", "usage", "--since", str(since), "--until", str(until), "--db", str(store),
                              "--format", "json"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    first = report()
    f = first["freshness"]
    assert f["why_not"] is None and f["slurm_gpu_jobs"] >= 1 and f["missing"] == f["slurm_gpu_jobs"]
    [note] = [n for n in first["notes"] if n.startswith("Slurm accounting lists")]
    assert f"sk admin reconcile --since {since} --until {until}" in note
    table = subprocess.run([SK, "report", "usage", "--since", str(since), "--until", str(until), "--db", str(store)],
                           capture_output=True, text=True, timeout=120)
    assert table.stdout.startswith("no GPU jobs between") and note in table.stdout  # empty, and says why
    imp = subprocess.run([SK, "admin", "import-sacct", "--since", str(since), "--until", str(until), "--store",
                          str(store), "--spool", str(tmp_path / "none"), "-q"], capture_output=True, text=True,
                         timeout=120)
    assert imp.returncode == 0, imp.stderr
    second = report()["freshness"]
    assert second["missing"] == 0 and second["slurm_gpu_jobs"] == f["slurm_gpu_jobs"]
    assert second["last_ingest"] is not None
