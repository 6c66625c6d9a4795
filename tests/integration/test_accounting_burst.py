"""200 jobs finishing together on the devcluster give 200 records and no duplicates.

A 200-task array of `true` (each task is a job of its own, with its own jobcomp run), at most 40 running at once:
more concurrent launches than that overload the two slurmd of this 2-core machine (launches time out and Slurm
requeues the task held). slurmctld queues the 200 jobcomp runs and runs them one at a time; ~30 s in all here.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.integration import accounting as acct

pytestmark = pytest.mark.integration


def test_200_jobs_finishing_together_give_200_records_and_no_duplicates(devcluster):
    array = acct.sbatch("--array=0-199%40", "-c1", "--mem=20M", "-t", "2", "--wrap", "true", name=acct.tag("burst"))

    def release_held() -> None:  # a launch that timed out anyway is requeued held: let it run again
        subprocess.run(["scontrol", "release", str(array)], capture_output=True)

    try:
        final = acct.wait_final([array], timeout=240, tick=release_held)
    finally:
        subprocess.run(["scancel", str(array)], capture_output=True)
    deadline = time.monotonic() + 60
    while True:  # slurmdbd records array tasks asynchronously: wait until it knows all 200
        runs = acct.sacct_runs(sorted(final))
        if len({r["array_task_id"] for r in runs}) == 200 or time.monotonic() > deadline:
            break
        time.sleep(1)
    rows = acct.hook_rows(runs, timeout=120)
    assert sorted(r["array_task_id"] for r in runs if r["state"] == "COMPLETED") == list(range(200))
    # one record per run (200, plus one per run a launch failure requeued), none twice
    assert len(rows) == len(runs) >= 200
    assert len({(r["job_id"], r["run"]) for r in rows}) == len(rows)
    assert {r["source"] for r in rows} == {"jobcomp"} and {r["array_job_id"] for r in rows} == {array}
    assert sorted(r["array_task_id"] for r in rows if r["state"] == "COMPLETED") == list(range(200))
    spooled = subprocess.run(["grep", "-l", f'"array_job_id":{array},', "-r", str(acct.DC_DIR / "spool")],
                             capture_output=True, text=True).stdout.split()
    assert spooled == []  # all ingested, none quarantined
