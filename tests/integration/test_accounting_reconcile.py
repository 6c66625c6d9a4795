"""`sk admin reconcile` on the devcluster: real jobs, real sacct, the installed hook wrapper, private stores.

A job whose hook record was deleted comes back from sacct; a record the hook wrote without scontrol (the
wrapper run as Slurm runs it, on a PATH without scontrol) is completed with the allocation Slurm reported; node
GPU summaries kept in a job's AdminComment reach job_gpus.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time

import pytest

from slurmkit.accounting import admin_comment
from slurmkit.slurm import sacct as sacct_cmd
from slurmkit.slurm import scontrol
from tests.integration import accounting as acct

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def job(devcluster):
    job_id = acct.sbatch("--gpus=a100:2", "-t", "2", "--wrap", "sleep 1", name=acct.tag("reconcile"))
    acct.wait_final([job_id], timeout=120)
    [run] = acct.sacct_runs([job_id])
    [row] = acct.hook_rows([run])
    return run, row


def reconcile(store, since: int, *extra: str) -> dict:
    return acct.sk_json("admin", "reconcile", "--since", str(since - 60), "--store", str(store), "--spool",
                        "/nonexistent-spool", "-q", *extra)


def test_reconcile_restores_a_job_whose_hook_record_was_deleted(job, tmp_path):
    run, row = job
    store = tmp_path / "store.db"
    acct.put(tmp_path / "spool", [row])
    acct.sk("admin", "ingest", "--spool", str(tmp_path / "spool"), "--store", str(store))
    with sqlite3.connect(store) as conn:
        assert conn.execute("DELETE FROM jobs WHERE job_id = ?", (row["job_id"],)).rowcount == 1
    res = reconcile(store, run["submit_time"])
    assert [(c["action"], c["run"]) for c in res["changes"] if c["job_id"] == row["job_id"]] == [("insert", 0)]
    [back] = acct.private_rows(store, [row["job_id"]])
    assert (back["source"], back["gpus"], back["gpu_types"]) == ("reconcile", 2, "a100")
    assert {c: back[c] for c in acct.COMPARED} == {c: row[c] for c in acct.COMPARED}
    again = reconcile(store, run["submit_time"])
    assert [c for c in again["changes"] if c["job_id"] == row["job_id"]] == []


def test_the_installed_wrapper_writes_the_record_slurm_would_get(job, tmp_path):
    run, row = job
    res = acct.run_jobcomp_wrapper(acct.jobcomp_env(run), SK_SPOOL=str(tmp_path / "spool"),
                                   SK_HOOK_LOG=str(tmp_path / "hooks.log"))
    assert res.returncode == 0 and res.stdout == res.stderr == ""
    [path] = (tmp_path / "spool").glob(f"job-devcluster-{row['job_id']}-0-*.json")
    rec = json.loads(path.read_text())
    assert {c: rec[c] for c in (*acct.COMPARED, "tres", "flags")} == {c: row[c] for c in (*acct.COMPARED, "tres",
                                                                                          "flags")}


def test_reconcile_completes_a_record_written_without_scontrol(job, tmp_path):
    run, row = job
    log = tmp_path / "hooks.log"
    res = acct.run_jobcomp_wrapper(acct.jobcomp_env(run), SK_SPOOL=str(tmp_path / "spool"), SK_HOOK_LOG=str(log),
                                   PATH=str(tmp_path))  # no scontrol on this PATH
    assert res.returncode == 0
    assert f"scontrol show job {row['job_id']} failed" in log.read_text()
    [path] = (tmp_path / "spool").glob(f"job-devcluster-{row['job_id']}-0-*.json")
    assert (json.loads(path.read_text())["flags"], json.loads(path.read_text())["gpus"]) == ("no-scontrol", 0)
    store = tmp_path / "store.db"
    acct.sk("admin", "ingest", "--spool", str(tmp_path / "spool"), "--store", str(store))
    res = reconcile(store, run["submit_time"])
    [change] = [c for c in res["changes"] if c["job_id"] == row["job_id"]]
    assert change["action"] == "complete" and "no-scontrol" in change["detail"]
    [done] = acct.private_rows(store, [row["job_id"]])
    assert (done["gpus"], done["gpu_types"], done["flags"], done["source"]) == (2, "a100", "reconciled", "jobcomp")


def test_dry_run_shows_the_change_and_makes_none(job, tmp_path):
    run, row = job
    store = tmp_path / "store.db"
    res = acct.sk("admin", "reconcile", "--since", str(run["submit_time"] - 60), "--store", str(store),
                  "--spool", "/nonexistent-spool", "--dry-run")
    assert f"insert           devcluster job {row['job_id']} run 0: COMPLETED, 2 x a100" in res.stdout
    assert "would be:" in res.stdout and "dry run: the store was not changed" in res.stdout
    assert "reconcile: " in res.stderr  # progress
    assert acct.private_rows(store, [row["job_id"]]) == []


def test_reconcile_adds_node_gpu_summaries_kept_in_the_admin_comment(devcluster, tmp_path):
    """A site without a shared spool: node epilogs leave their GPU summaries in the job's AdminComment, slurmdbd
    keeps it, and reconcile --admin-comment turns them into job_gpus rows (once)."""
    job_id = acct.sbatch("--gpus=a100:2", "-t", "2", "--wrap", "sleep 1", name=acct.tag("admincomment"))
    acct.wait_final([job_id], timeout=120)  # a node's epilog runs once the job has finished
    show = subprocess.run(["scontrol", "show", "job", "-o", str(job_id)], capture_output=True, text=True).stdout
    node, gpus = scontrol.parse_show_job(show)["NodeList"], "0,1"
    env = {**os.environ, "SK_TRANSPORT": "admin_comment", "SK_STATE_DIR": str(tmp_path / "state"),
           "SK_SPOOL": str(tmp_path / "spool"), "SLURM_JOB_ID": str(job_id), "SLURM_CLUSTER_NAME": "devcluster",
           "SLURMD_NODENAME": node, "SLURM_JOB_GPUS": gpus}
    subprocess.run([acct.SK, "hook", "epilog"], env=env, check=True, timeout=90)  # as the node's epilog would
    [run] = acct.sacct_runs([job_id])
    for _ in range(30):  # slurmdbd stores the comment asynchronously
        if admin_comment.PREFIX in sacct_cmd.admin_comments([job_id]).get(job_id, ""):
            break
        time.sleep(1)
    store = tmp_path / "store.db"
    res = reconcile(store, run["submit_time"], "--admin-comment")
    [change] = [c for c in res["changes"] if c["job_id"] == job_id and c["action"] == "gpus"]
    assert change["detail"].startswith(f"node {node}: 2 GPU summaries")
    with sqlite3.connect(store) as conn:
        got = conn.execute("SELECT node, gpu_index, flags FROM job_gpus WHERE job_id = ? ORDER BY gpu_index",
                           (job_id,)).fetchall()
    assert got == [(node, 0, "no-sampler"), (node, 1, "no-sampler")]  # no sampler ran for this hand-run epilog
    again = reconcile(store, run["submit_time"], "--admin-comment")
    assert [c for c in again["changes"] if c["job_id"] == job_id] == []


def test_a_hostile_job_name_is_one_whole_name_and_stops_no_window(devcluster, tmp_path):
    """A job named with pipes, a newline followed by a whole forged sacct row, a terminal escape and a byte that
    is not UTF-8 (Slurm takes them all): the jobcomp hook's record is ingested, reconcile, import-sacct and
    `sk report --from-sacct` read the window, the name is stored whole, and no forged record appears."""
    other = acct.sbatch("-t", "1", "--wrap", "true", name=acct.tag("victim"))
    acct.wait_final([other], timeout=120)
    [victim] = acct.sacct_runs([other])
    forged = "|".join(["999999", "999999", "1", "devcluster", "root", "0", "root", "debug", "normal", "COMPLETED",
                       "0:0", "1", "1", "2", "1", "gpu01", "1", "1", "billing=1,cpu=1,gres/gpu=8,node=1", "forged"])
    name = f"{acct.tag('hostile')}|a|b\n{forged}\x1b]0;owned\x07".encode() + b"\xff"
    out = subprocess.run([b"sbatch", b"--parsable", b"-J", name, b"-o", b"/dev/null", b"--chdir", b"/tmp", b"-t",
                          b"1", b"--wrap", b"true"], check=True, capture_output=True).stdout
    job_id = int(out.strip().split(b";")[0])
    acct.wait_final([job_id], timeout=120)
    [run] = acct.sacct_runs([job_id])
    # The byte as \xff where it reaches us raw; 25.11's slurmdbd stores it as '?' while its jobcomp hook still
    # sees the raw byte, so the two sources may spell that one byte differently, but each keeps the name whole.
    whole = {name[:-1].decode() + "\\xff", name[:-1].decode() + "?"}
    assert run["job_name"] in whole
    [hook] = acct.hook_rows([run])
    assert hook["job_name"] in whole
    store = tmp_path / "store.db"
    res = reconcile(store, min(run["submit_time"], victim["submit_time"]))
    assert {c["job_id"] for c in res["changes"] if c["action"] == "insert"} >= {job_id, other}
    names = dict(sqlite3.connect(store).execute("SELECT job_id, job_name FROM jobs").fetchall())
    assert names[job_id] in whole and 999999 not in names
    imported = tmp_path / "imported.db"
    acct.sk("admin", "import-sacct", "--since", str(run["submit_time"] - 60), "--store", str(imported), "--spool",
            str(tmp_path / "none"), "-q")
    names = dict(sqlite3.connect(imported).execute("SELECT job_id, job_name FROM jobs").fetchall())
    assert names[job_id] in whole and 999999 not in names
    rep = acct.sk("report", "usage", "--from-sacct", "--since", str(run["submit_time"] - 60), "--by", "user")
    assert "\x1b" not in rep.stdout and "\x07" not in rep.stdout
