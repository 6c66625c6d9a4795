"""Reconcile / import-sacct (slurmkit/accounting/reconcile.py) on recorded real data, into real stores.

sacct's side is the recorded `sacct --duplicates --allocations -P` output of tests/data/accounting/sacct-kinds.txt;
the store's side is what the devcluster's jobcomp hook really wrote for the same jobs before the requeue fix
(store-rows-jobcomp.json: job 119's first run under run 1 with state PENDING, its second run lost; the jobs
cancelled while pending with their *requested* GPU). Records reach the store through the real spool and ingest.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmkit.accounting import hooks, reconcile, sacct, spool
from slurmkit.accounting.ingest import ingest
from slurmkit.record import JOB_COLUMNS
from slurmkit.slurm import sacct as sacct_cmd
from slurmkit.store.db import open_store

DATA = Path(__file__).parent / "data" / "accounting"
SK = str(Path(sys.executable).parent / "sk")
SINCE, UNTIL = 1796283600, 1796284300  # the window of the recordings (2026-12-03 07:40 - 07:51 UTC)


def sacct_records(source: str) -> list[dict]:
    return sacct.number_runs(sacct_cmd.parse((DATA / "sacct-kinds.txt").read_text(), delimiter="|"), source)


def fetch(since: int, until: int | None, *, cluster: str | None = None, source: str = "reconcile") -> list[dict]:
    """sacct.fetch_records over the recorded output (the same filter: runs that ended in the window)."""
    return [r for r in sacct_records(source) if sacct.ended(r) and since <= r["end_time"] < (until or 2 ** 40)]


def hook_rows(*job_ids: int) -> list[dict]:
    rows = json.loads((DATA / "store-rows-jobcomp.json").read_text())
    return [r for r in rows if r["job_id"] in job_ids]


def put(store, tmp_path: Path, recs: list[dict]) -> None:
    """Into the store the way records really get there: spool files, then ingest."""
    d = tmp_path / "put-spool"
    for i, rec in enumerate(recs):
        spool.write(d, f"job-{rec['cluster']}-{rec['job_id']}-{rec['run']}-{i}", {"version": 1, "kind": "job", **rec})
    assert ingest(store, d).ingested == len(recs)


def rows(store, job_id: int) -> list[dict]:
    cur = store.execute(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs WHERE job_id = ? ORDER BY run", (job_id,))
    return [dict(zip(JOB_COLUMNS, r, strict=True)) for r in cur.fetchall()]


def run(store, **kw) -> reconcile.Result:
    return reconcile.reconcile(store, SINCE, UNTIL, fetch=fetch, chunk_s=UNTIL - SINCE, **kw)


@pytest.fixture
def store(tmp_path):
    with open_store(str(tmp_path / "accounting.db")) as s:
        yield s


def test_missing_runs_are_inserted_and_a_second_run_changes_nothing(store):
    first = run(store)
    assert first.counts() == {"insert": 15} and first.runs == 15 and first.conflicts == []
    r = rows(store, 124)[0]
    assert (r["source"], r["gpus"], r["gpu_types"], r["node_count"]) == ("reconcile", 4, "a100", 2)
    again = run(store)
    assert again.changes == [] and again.unchanged == 15


def test_old_hook_rows_of_a_requeued_job_are_renumbered_and_the_lost_run_added(store, tmp_path):
    put(store, tmp_path, hook_rows(119))
    assert [(r["run"], r["state"], r["start_time"]) for r in rows(store, 119)] == [
        (1, "PENDING", 1796283703), (2, "COMPLETED", 1796283740)]
    res = run(store)
    assert {(c.action, c.job_id, c.run, c.from_run) for c in res.changes if c.job_id == 119} == {
        ("renumber", 119, 0, 1), ("fill", 119, 0, None), ("insert", 119, 1, None)}
    assert [(r["run"], r["state"], r["start_time"], r["source"]) for r in rows(store, 119)] == [
        (0, "REQUEUED", 1796283703, "jobcomp"), (1, "REQUEUED", 1796283733, "reconcile"),
        (2, "COMPLETED", 1796283740, "jobcomp")]
    assert run(store).changes == []


def test_hook_rows_keep_their_values(store, tmp_path):
    put(store, tmp_path, hook_rows(124, 130, 133))
    run(store)
    for job in (124, 130, 133):
        [r] = rows(store, job)
        [h] = hook_rows(job)
        # (the hook writes no node_type: nor does a reconcile without the site's partition map)
        assert {c: r[c] for c in JOB_COLUMNS if c != "ingested_at"} == {c: h.get(c) for c in JOB_COLUMNS
                                                                       if c != "ingested_at"}
    # the hook's TRES (scontrol's order) is not replaced by sacct's differently ordered one
    assert rows(store, 124)[0]["tres"] == "cpu=16,mem=32G,node=2,billing=16,gres/gpu=4,gres/gpu:a100=4"


def test_never_started_jobs_lose_the_requested_gpu_the_old_hook_recorded(store, tmp_path):
    put(store, tmp_path, hook_rows(128, 129))
    assert [r["gpus"] for r in rows(store, 128) + rows(store, 129)] == [1, 1]
    res = run(store)
    assert {(c.action, c.job_id) for c in res.changes if c.job_id in (128, 129)} == {("complete", 128),
                                                                                      ("complete", 129)}
    for job in (128, 129):
        [r] = rows(store, job)
        assert (r["gpus"], r["gpu_types"], r["start_time"], r["source"]) == (0, None, None, "jobcomp")


def test_no_scontrol_record_is_completed_and_keeps_what_the_hook_knew(store, tmp_path):
    env = {"CLUSTER": "devcluster", "JOBID": "124", "JOBSTATE": "COMPLETED", "SUBMIT": "1796283806",
           "START": "1796283807", "END": "1796283810", "NODES": "gpu[01-02]", "NODECNT": "2", "PROCS": "16",
           "JOBNAME": "name the hook saw", "ARRAYTASKID": "4294967294", "ARRAYJOBID": "0"}
    rec = hooks.jobcomp_record(env, None)
    assert (rec["flags"], rec["gpus"]) == ("no-scontrol", 0)
    put(store, tmp_path, [rec])
    res = run(store)
    [change] = [c for c in res.changes if c.job_id == 124]
    assert change.action == "complete" and "no-scontrol" in change.detail
    [r] = rows(store, 124)
    assert (r["gpus"], r["gpu_types"], r["flags"], r["source"], r["job_name"]) == (
        4, "a100", "reconciled", "jobcomp", "name the hook saw")


def test_two_rows_of_one_run_become_one(store, tmp_path):
    [final] = [r for r in hook_rows(119) if r["state"] == "COMPLETED"]
    stray = {**final, "run": 7, "flags": "run-uncertain"}
    put(store, tmp_path, [final, stray])
    res = run(store)
    assert ("remove-duplicate", 7) in {(c.action, c.run) for c in res.changes}
    assert [r["run"] for r in rows(store, 119) if r["start_time"] == 1796283740] == [2]


def test_a_row_of_another_run_under_the_same_number_is_left_alone_and_reported(store, tmp_path):
    [final] = [r for r in hook_rows(119) if r["state"] == "COMPLETED"]
    odd = {**final, "run": 1, "start_time": 1000, "end_time": 1001}  # not a run sacct knows
    put(store, tmp_path, [odd])
    res = run(store)
    assert any("job 119 run 1" in c and "left alone" in c for c in res.conflicts)
    assert next(r for r in rows(store, 119) if r["run"] == 1)["start_time"] == 1000


def test_import_only_inserts_and_never_counts_a_run_twice(store, tmp_path):
    put(store, tmp_path, hook_rows(119, 128))
    res = reconcile.reconcile(store, SINCE, UNTIL, mode="import", fetch=fetch, chunk_s=UNTIL - SINCE)
    assert {c.action for c in res.changes} == {"insert"} and 124 in {c.job_id for c in res.changes}
    assert rows(store, 124)[0]["source"] == "sacct-import"
    # Job 119: run 0 is described by the old hook row under run 1, so it is not inserted again; the lost run 1
    # cannot go under run 1 while that row sits there: reported, left for reconcile (which renumbers).
    assert [(r["run"], r["state"]) for r in rows(store, 119)] == [(1, "PENDING"), (2, "COMPLETED")]
    assert [c for c in res.conflicts if "job 119 run 1" in c and "sk admin reconcile renumbers it" in c]
    assert rows(store, 128)[0]["gpus"] == 1  # not corrected: import never changes a row


def test_dry_run_changes_nothing(store, tmp_path):
    put(store, tmp_path, hook_rows(119))
    res = run(store, dry_run=True)
    assert res.counts() == {"insert": 13, "renumber": 1, "fill": 1}
    assert [r["run"] for r in rows(store, 119)] == [1, 2]
    assert run(store).counts() == res.counts()


def test_jobs_with_a_record_in_the_spool_are_skipped(store, tmp_path):
    spool_dir = tmp_path / "spool"
    spool.write(spool_dir, "job-devcluster-124-0-1", {"version": 1})
    spool.write(spool_dir, "gpus-devcluster-126-0-gpu01-1", {"version": 1})  # a node record: no reason to wait
    res = run(store, spool_dir=spool_dir)
    assert res.spooled == 1 and 124 not in {c.job_id for c in res.changes} and 126 in {c.job_id for c in res.changes}


def test_windows_are_read_in_slices():
    assert reconcile.slices(0, 250, 100) == [(0, 100), (100, 200), (200, 250)]
    assert reconcile.slices(0, 3630, 1800) == [(0, 1800), (1800, 3630)]  # a 30 s tail is not a slice of its own


@pytest.mark.postgres
def test_requeue_repair_on_postgresql(pg_schema_url, tmp_path):
    with open_store(pg_schema_url()) as store:
        put(store, tmp_path, hook_rows(119, 128))
        res = run(store)
        assert {(c.action, c.job_id) for c in res.changes if c.job_id in (119, 128)} == {
            ("renumber", 119), ("fill", 119), ("insert", 119), ("complete", 128)}
        assert [(r["run"], r["state"], r["source"]) for r in rows(store, 119)] == [
            (0, "REQUEUED", "jobcomp"), (1, "REQUEUED", "reconcile"), (2, "COMPLETED", "jobcomp")]
        assert run(store).changes == []


@pytest.mark.parametrize(("args", "message"), [
    (["--since", "someday"], "--since: cannot read 'someday' as a time"),
    (["--since", "3650000d"], "--since: '3650000d' is out of range"),
    (["--since", "1h", "--until", "2h"], "--since '1h' is not before --until"),
    (["--since", "1d", "--chunk", "10s"], "--chunk '10s' is not a length of at least a minute"),
])
def test_bad_options_are_usage_errors(tmp_path, args, message):
    for cmd in ("reconcile", "import-sacct"):
        res = subprocess.run([SK, "admin", cmd, *args, "--store", str(tmp_path / "s.db"), "--spool",
                              str(tmp_path / "spool")], capture_output=True, text=True)
        assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr


def test_window_is_checked_before_anything_runs(tmp_path):
    res = subprocess.run([SK, "admin", "reconcile", "--since", str(int(time.time()) + 3600), "--store",
                          str(tmp_path / "s.db"), "--spool", str(tmp_path / "spool")], capture_output=True, text=True)
    assert res.returncode == 2 and "is not before now" in res.stderr
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("flag", ["no-scontrol", "run-uncertain"])
def test_ingest_never_replaces_a_complete_row_with_an_incomplete_record(store, tmp_path, flag):
    [complete] = hook_rows(124)
    put(store, tmp_path, [complete])
    put(store, tmp_path, [{**complete, "gpus": 0, "gpu_types": None, "tres": None, "flags": flag}])
    [r] = rows(store, 124)
    assert (r["gpus"], r["flags"]) == (4, None)
    put(store, tmp_path, [{**complete, "job_name": "newer complete record"}])  # a complete one still replaces
    assert rows(store, 124)[0]["job_name"] == "newer complete record"


def test_node_summaries_in_the_admin_comment_are_added_once(store):
    from slurmkit.accounting import admin_comment, gpusummary

    seg = gpusummary.node_record(cluster="devcluster", job_id=124, run=0, node="gpu01", source="simulated",
                                 interval_s=1.0, gpus=[{"index": 0, "samples": 5, "util_mean": 50.0},
                                                       {"index": 1, "samples": 5, "util_mean": 0.0}], flags=[])
    other_job = {**seg, "job_id": 999}  # not a run of the window: ignored
    text = "JS1:abc," + admin_comment.encode(seg) + "," + admin_comment.encode(other_job)
    asked = []

    def comments(job_ids, *, cluster=None):
        asked.extend(job_ids)
        return {124: text, 126: "SK1:not-base64!"}

    res = run(store, admin_comment=True, comments=comments)
    assert 124 in asked and 128 not in asked  # only runs with GPUs are asked about
    [change] = [c for c in res.changes if c.action == "gpus"]
    assert (change.job_id, change.run) == (124, 0) and change.detail.startswith("node gpu01: 2 GPU summaries")
    assert [c for c in res.conflicts if c.startswith("job 126: AdminComment segment")]
    got = store.execute("SELECT job_id, node, gpu_index, util_mean FROM job_gpus ORDER BY gpu_index").fetchall()
    assert [tuple(r) for r in got] == [(124, "gpu01", 0, 50.0), (124, "gpu01", 1, 0.0)]
    assert [c for c in run(store, admin_comment=True, comments=comments).changes if c.action == "gpus"] == []


def test_a_renumber_onto_a_number_held_by_another_run_changes_nothing_in_that_job(store, tmp_path):
    first = next(r for r in hook_rows(119) if r["state"] == "PENDING")  # run 0's record, stored under run 1
    squatter = {**first, "run": 0, "start_time": 999, "end_time": 1000, "state": "COMPLETED"}
    put(store, tmp_path, [first, squatter])
    before = rows(store, 119)
    res = run(store)
    assert [c for c in res.changes if c.job_id == 119] == []
    assert any("job 119: sacct's run(s) [0]" in c and "left where they are" in c for c in res.conflicts)
    assert rows(store, 119) == before


def test_runs_that_started_in_the_same_second_keep_their_own_rows():
    # Seen on the devcluster: a job requeued at once starts its next run in the same second (sacct: 09:31:38 for
    # both), so start times tie; each hook row must stay with the run whose number it has.
    recs = [r for r in fetch(SINCE, UNTIL) if r["job_id"] == 119]
    assert len(recs) == 3
    recs[1]["start_time"] = recs[0]["start_time"]
    hook = [{**r, "source": "jobcomp", "flags": None} for r in recs]
    changes, conflicts, unchanged = reconcile.plan_job(hook, recs, "reconcile")
    assert (changes, conflicts, unchanged) == ([], [], 3)
