"""`sk hook jobcomp`: the record it writes from Slurm's jobcomp variables plus recorded real `scontrol show job -o`.

The variables are the ones Slurm 22.05's jobcomp/script passes (docs/real-slurm-on-one-machine.md),
with the values of the recorded jobs (tests/data/accounting/sacct-*.txt shows the same jobs as sacct saw them).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmkit.accounting import hooks, spool
from slurmkit.slurm import scontrol

DATA = Path(__file__).parent / "data" / "accounting"
ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    # scontrol printed its times in the recording machine's local time zone, UTC.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def show(name: str) -> dict[str, str]:
    return scontrol.parse_show_job((DATA / name).read_text())


def env(**over: str) -> dict[str, str]:
    base = {"ACCOUNT": "root", "ARRAYJOBID": "0", "ARRAYTASKID": "4294967294", "BATCH": "yes",
            "CLUSTER": "devcluster", "EXITCODE": "0:0", "GID": "0", "GROUPNAME": "root", "JOBNAME": "acctrec-requeue",
            "PARTITION": "gpu", "PROCS": "8", "QOS": "normal", "UID": "0", "USERNAME": "root", "WORK_DIR": "/tmp"}
    return {**base, **over}


# Job 151 of sacct-requeued.txt: run 0 requeued (submit 1796284232, start=end 1796284233), run 1 completed
# (submit 1796284233, start=end 1796284237).
REQUEUED_RUN0 = env(JOBID="151", JOBSTATE="PENDING", SUBMIT="1796284232", START="1796284233", END="1796284233",
                    NODES="gpu01", NODECNT="1")
FINAL_RUN1 = env(JOBID="151", JOBSTATE="COMPLETED", SUBMIT="1796284233", START="1796284237", END="1796284237",
                 NODES="gpu01", NODECNT="1")


def test_two_node_job_gets_the_allocated_gpus_and_types_from_scontrol():
    rec = hooks.jobcomp_record(env(JOBID="1", JOBSTATE="COMPLETED", SUBMIT="1796241306", START="1796241307",
                                   END="1796241310", NODES="gpu[01-02]", NODECNT="2", PROCS="16"),
                               show("scontrol-show-job-2node-running.txt"))
    assert (rec["gpus"], rec["gpu_types"], rec["node_count"], rec["run"]) == (4, "a100", 2, 0)
    assert rec["tres"] == "cpu=16,mem=32G,node=2,billing=16,gres/gpu=4,gres/gpu:a100=4"
    assert rec["elapsed_s"] == 3 and rec["flags"] is None and rec["source"] == "jobcomp"


def test_slurm_25_11_allocation_is_read_from_alloctres():
    # 25.11's scontrol prints ReqTRES= and AllocTRES= (no TRES=): the allocation is AllocTRES.
    rec = hooks.jobcomp_record(env(JOBID="2511004", JOBSTATE="COMPLETED", SUBMIT="1796390278", START="1796390278",
                                   END="1796390282", NODES="gpu[01-02]", NODECNT="2", PROCS="16"),
                               show("scontrol-show-job-2node-running-25.11.txt"))
    assert (rec["gpus"], rec["gpu_types"], rec["node_count"], rec["flags"]) == (4, "a100", 2, None)
    assert rec["tres"] == "cpu=16,mem=32G,node=2,billing=16,gres/gpu=4,gres/gpu:a100=4"


def test_requeued_run_is_recorded_as_requeued_with_the_run_it_was():
    # Slurm passes JOBSTATE=PENDING and scontrol already says Restarts=1 for the run that was requeued.
    rec = hooks.jobcomp_record(REQUEUED_RUN0, show("scontrol-show-job-requeued-pending.txt"))
    assert (rec["state"], rec["run"], rec["flags"]) == ("REQUEUED", 0, None)
    assert (rec["gpus"], rec["start_time"]) == (2, 1796284233)


def test_requeued_run_whose_hook_sees_it_still_completing_is_not_uncertain():
    # Job 350 (scontrol-show-job-requeued-completing.txt): the hook ran while the requeued run was COMPLETING, when
    # scontrol still shows that run's SubmitTime but Restarts=1 already (a CI run flagged it run-uncertain).
    run0 = env(JOBID="350", JOBSTATE="PENDING", SUBMIT="1796297010", START="1796297011", END="1796297011",
               NODES="gpu01", NODECNT="1", PROCS="4")
    completing = show("scontrol-show-job-requeued-completing.txt")
    assert (completing["JobState"], completing["Restarts"]) == ("COMPLETING", "1")
    rec = hooks.jobcomp_record(run0, completing)
    assert (rec["state"], rec["run"], rec["flags"], rec["gpus"]) == ("REQUEUED", 0, None, 1)
    # the same SubmitTime once the job has moved on (not COMPLETING): only the requeue time identifies the run
    late = {**run0, "END": "1796297100"}
    assert hooks.jobcomp_record(late, {**completing, "JobState": "PENDING"})["flags"] == "run-uncertain"
    assert hooks.jobcomp_record(late, completing)["flags"] is None


def test_final_run_after_a_requeue_is_the_next_run_so_the_two_never_share_a_key():
    first = hooks.jobcomp_record(REQUEUED_RUN0, show("scontrol-show-job-requeued-pending.txt"))
    final = hooks.jobcomp_record(FINAL_RUN1, show("scontrol-show-job-requeued-completed.txt"))
    assert (final["state"], final["run"], final["flags"]) == ("COMPLETED", 1, None)
    assert (first["job_id"], first["run"]) != (final["job_id"], final["run"])


def test_run_is_flagged_uncertain_when_the_job_moved_on_before_the_hook_ran():
    # The hook of run 0 runs late: scontrol already shows the completed run 1 (submitted at the requeue).
    rec = hooks.jobcomp_record({**REQUEUED_RUN0, "END": "1796284200"}, show("scontrol-show-job-requeued-completed.txt"))
    assert rec["flags"] == "run-uncertain"


def test_job_cancelled_while_pending_has_no_allocation_although_scontrol_shows_the_request():
    pending = show("scontrol-show-job-pending.txt")
    assert "gres/gpu=2" in pending["TRES"]  # the request
    rec = hooks.jobcomp_record(env(JOBID="143", JOBSTATE="CANCELLED", SUBMIT="1796283955", START="1796283960",
                                   END="1796283960", NODES="", NODECNT="0", PROCS="0"), pending)
    assert (rec["gpus"], rec["gpu_types"], rec["tres"], rec["start_time"]) == (0, None, None, None)
    assert (rec["nodes"], rec["node_count"], rec["elapsed_s"], rec["state"]) == (None, 0, 0, "CANCELLED")


def test_array_ids():
    task = hooks.jobcomp_record(env(JOBID="134", ARRAYJOBID="125", ARRAYTASKID="0", JOBSTATE="COMPLETED",
                                    NODES="gpu01"), None)
    meta = hooks.jobcomp_record(env(JOBID="129", ARRAYJOBID="129", JOBSTATE="CANCELLED", NODES=""), None)
    plain = hooks.jobcomp_record(env(JOBID="124", JOBSTATE="COMPLETED", NODES="gpu01"), None)
    assert (task["array_job_id"], task["array_task_id"]) == (125, 0)
    assert (meta["array_job_id"], meta["array_task_id"]) == (129, None)  # never-started tasks: 129_[0-4]
    assert (plain["array_job_id"], plain["array_task_id"]) == (None, None)


def test_without_scontrol_the_record_is_still_written_and_flagged(tmp_path):
    # The real hook, with a PATH on which scontrol cannot be found.
    res = subprocess.run([SK, "hook", "jobcomp"], capture_output=True, text=True,
                         env={**FINAL_RUN1, "PATH": str(tmp_path), "SK_SPOOL": str(tmp_path / "spool")}, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "scontrol show job 151 failed" in res.stderr
    [path] = (tmp_path / "spool").glob("job-devcluster-151-0-*.json")
    rec = json.loads(path.read_text())
    assert (rec["flags"], rec["gpus"], rec["state"], rec["start_time"]) == ("no-scontrol", 0, "COMPLETED", 1796284237)


def test_unwritable_spool_puts_the_record_in_the_log_and_exits_0(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = subprocess.run([SK, "hook", "jobcomp"], capture_output=True, text=True,
                         env={**FINAL_RUN1, "PATH": str(tmp_path), "SK_SPOOL": str(blocker / "spool")}, cwd=ROOT)
    assert res.returncode == 0
    logged = res.stderr.split("record: ", 1)[1]
    assert json.loads(logged)["job_id"] == 151


def test_hook_path_imports_nothing_heavy():
    code = ("import sys; from slurmkit.accounting import hooks; "
            "print(' '.join(m for m in ('subprocess', 'pathlib', 'typing', 'json', 're', 'click', 'pydantic', 'yaml',"
            " 'pandas')"
            " if m in sys.modules))")
    res = subprocess.run([sys.executable, "-S", "-E", "-c", code], capture_output=True, text=True, cwd=ROOT,
                         check=True)
    assert res.stdout.strip() == ""


def test_scontrol_run_times_out_and_kills(tmp_path):
    t = time.monotonic()
    with pytest.raises(TimeoutError):
        scontrol.run(["sleep", "30"], timeout_s=0.2)
    assert time.monotonic() - t < 5


@pytest.mark.integration
def test_scontrol_failure_names_the_job_and_slurms_message():
    with pytest.raises(RuntimeError, match="scontrol show job 999999 exited 1: slurm_load_jobs error: Invalid job id"):
        scontrol.show_job(999999)


@pytest.mark.parametrize("value", ["plain", 'quote " and back\\slash', "ctl \x00\x01\x1f\x7f \b\f\n\r\t", "é ü ñ 中文",
                                   "emoji \U0001f600 and \U00010000", "lone surrogate \udcff", "", "a" * 5000])
def test_spool_json_is_exactly_what_json_dumps_writes(value):
    rec = {"job_name": value, "job_id": 2 ** 40, "gpus": 0, "exit_code": -1, "flags": None, "ok": True, "no": False,
           "z": value[::-1], "version": 1}
    text = spool.dumps(rec)
    assert text == json.dumps(rec, sort_keys=True, separators=(",", ":"))
    assert json.loads(text) == rec


def test_spool_json_of_a_nested_record_falls_back_to_json():
    rec = {"gpus": [{"index": 0, "util_mean": 12.5}], "job_id": 1}
    assert spool.dumps(rec) == json.dumps(rec, sort_keys=True, separators=(",", ":"))
