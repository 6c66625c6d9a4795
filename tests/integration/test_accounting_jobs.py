"""Real jobs of every kind on the devcluster end up as records with the GPUs Slurm allocated.

One batch of jobs (submitted together, so the module takes as long as its slowest job, the time-out, ~1.5 min):
2-node, 3-task array, failed, cancelled while running, timed out, requeued (by itself, once; the devcluster's
cred_expire=30 holds its next run back 30 s, where Slurm's default is 2 min). Slurm's jobcomp
hook (contrib/slurm/sk-hook, as installed by contrib/devcluster/up) spools them, `sk admin ingest` stores them;
every run must match what sacct reports for it, and reconcile/import-sacct must agree with the hook.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.integration import accounting as acct

pytestmark = pytest.mark.integration


def _cancel_when_running(job_id: int) -> None:
    out = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T"], capture_output=True, text=True).stdout
    if out.strip() == "RUNNING":
        subprocess.run(["scancel", str(job_id)], check=True)


@pytest.fixture(scope="module")
def kinds(devcluster):
    name = acct.tag("kinds")
    t = ["-t", "2"]
    ids = {
        "2node": acct.sbatch("-N2", "--gpus-per-node=a100:2", *t, "--wrap", "sleep 1", name=f"{name}-2node"),
        "array": acct.sbatch("--array=0-2", "--gpus=a100:1", *t, "--wrap", "true", name=f"{name}-array"),
        "failed": acct.sbatch("--gpus=1", *t, "--wrap", "exit 3", name=f"{name}-failed"),
        "cancelled": acct.sbatch("--gpus=a100:3", *t, "--wrap", "sleep 300", name=f"{name}-cancelled"),
        "timeout": acct.sbatch("--gpus=a100:1", "-t", "1", "--wrap", "sleep 300", name=f"{name}-timeout"),
        "requeued": acct.sbatch("--gpus=a100:2", "--requeue", *t, "--wrap",
                                'if [ "${SLURM_RESTART_COUNT:-0}" -lt 1 ]; then scontrol requeue $SLURM_JOB_ID; '
                                'sleep 30; fi; true', name=f"{name}-requeued"),
    }

    def tick() -> None:
        _cancel_when_running(ids["cancelled"])

    try:
        final = acct.wait_final(list(ids.values()), timeout=300, tick=tick)
    finally:
        subprocess.run(["scancel", *map(str, ids.values())], capture_output=True)
    runs = acct.sacct_runs(sorted(final))
    return ids, runs, acct.hook_rows(runs)


def by_name(kinds, which: str) -> list[dict]:
    ids, _, rows = kinds
    if which == "array":
        return [r for r in rows if r["array_job_id"] == ids["array"]]
    return [r for r in rows if r["job_id"] == ids[which]]


def test_every_run_is_one_hook_record_that_matches_sacct(kinds):
    _, runs, rows = kinds
    assert len(rows) == len(runs) == 9  # 2-node, 3 array tasks, failed, cancelled, timeout, 2 runs of requeued
    stored = {(r["job_id"], r["run"]): r for r in rows}
    for run in runs:
        row = stored[(run["job_id"], run["run"])]
        assert (row["source"], row["flags"]) == ("jobcomp", None)
        assert {c: row[c] for c in acct.COMPARED} == {c: run[c] for c in acct.COMPARED}, run["job_id"]


def test_two_node_job(kinds):
    [r] = by_name(kinds, "2node")
    assert (r["gpus"], r["gpu_types"], r["node_count"], r["nodes"], r["state"]) == (4, "a100", 2, "gpu[01-02]",
                                                                                     "COMPLETED")


def test_array_tasks_are_one_record_each(kinds):
    ids, _, _ = kinds
    rows = by_name(kinds, "array")
    assert sorted(r["array_task_id"] for r in rows) == [0, 1, 2]
    assert {(r["gpus"], r["gpu_types"], r["state"], r["array_job_id"]) for r in rows} == {
        (1, "a100", "COMPLETED", ids["array"])}
    assert len({r["job_id"] for r in rows}) == 3


def test_failed_cancelled_and_timed_out(kinds):
    [failed], [cancelled], [timeout] = by_name(kinds, "failed"), by_name(kinds, "cancelled"), by_name(kinds, "timeout")
    assert (failed["state"], failed["exit_code"], failed["gpus"]) == ("FAILED", 3, 1)
    assert (cancelled["state"], cancelled["gpus"], cancelled["gpu_types"]) == ("CANCELLED", 3, "a100")
    assert (timeout["state"], timeout["gpus"]) == ("TIMEOUT", 1)
    assert timeout["elapsed_s"] >= 60


def test_requeued_job_has_one_record_per_run(kinds):
    rows = by_name(kinds, "requeued")
    assert [(r["run"], r["state"], r["gpus"]) for r in rows] == [(0, "REQUEUED", 2), (1, "COMPLETED", 2)]
    assert rows[0]["end_time"] <= rows[1]["start_time"]


def test_reconcile_finds_nothing_to_change_in_the_hook_records(kinds, tmp_path):
    _, runs, rows = kinds
    acct.put(tmp_path / "spool", rows)
    store = str(tmp_path / "store.db")
    acct.sk("admin", "ingest", "--spool", str(tmp_path / "spool"), "--store", store)
    since = str(min(r["submit_time"] for r in runs) - 60)
    res = acct.sk_json("admin", "reconcile", "--since", since, "--store", store, "--spool", str(tmp_path / "none"),
                       "-q")
    mine = {r["job_id"] for r in runs}
    assert [c for c in res["changes"] if c["job_id"] in mine] == []
    assert [c for c in res["conflicts"] if any(f"job {j} " in c for j in mine)] == []
    assert res["unchanged"] >= len(runs)
    def strip(rs: list[dict]) -> list[dict]:
        return [{k: v for k, v in r.items() if k != "ingested_at"} for r in rs]

    assert strip(acct.private_rows(tmp_path / "store.db", sorted(mine))) == strip(rows)  # not a value changed


def test_import_sacct_takes_gpus_and_types_from_alloctres(kinds, tmp_path):
    _, runs, rows = kinds
    store = tmp_path / "store.db"
    since = str(min(r["submit_time"] for r in runs) - 60)
    res = acct.sk_json("admin", "import-sacct", "--since", since, "--store", str(store), "--spool",
                       str(tmp_path / "none"), "-q")
    mine = sorted({r["job_id"] for r in runs})
    imported = acct.private_rows(store, mine)
    assert {(r["job_id"], r["run"]) for r in imported} == {(r["job_id"], r["run"]) for r in rows}
    assert {r["source"] for r in imported} == {"sacct-import"}
    hook = {(r["job_id"], r["run"]): r for r in rows}
    for r in imported:
        assert {c: r[c] for c in acct.COMPARED} == {c: hook[(r["job_id"], r["run"])][c] for c in acct.COMPARED}
    assert res["counts"]["insert"] >= len(rows)
    again = acct.sk_json("admin", "import-sacct", "--since", since, "--store", str(store), "--spool",
                         str(tmp_path / "none"), "-q")
    assert [c for c in again["changes"] if c["job_id"] in mine] == []
