"""The sacct reader (slurmkit/accounting/sacct.py) on recorded real `sacct --duplicates --allocations -P` output.

tests/data/accounting/sacct-kinds.txt holds jobs of every kind from the devcluster (Slurm 22.05.8): a job requeued
twice (119), 2-node (124), a 3-task array (125), failed (126), cancelled running (127) and pending (128), an
array cancelled before any task started (129), timed out (130), a heterogeneous job (131), alice's job (133).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from slurmkit import record
from slurmkit.accounting import hooks, sacct
from slurmkit.config import when
from slurmkit.errors import BackendError, InputError
from slurmkit.slurm import fields, scontrol
from slurmkit.slurm import sacct as sacct_cmd

DATA = Path(__file__).parent / "data" / "accounting"


@pytest.fixture(autouse=True)
def _utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")  # the recording machine's zone: ISO times in the recordings are UTC
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def rows(name: str = "sacct-kinds.txt") -> list[dict[str, str]]:
    return sacct_cmd.parse((DATA / name).read_text(), delimiter="|")  # recorded with sacct's default delimiter


def as_sacct(lines: list[str]) -> str:
    """Recorded lines as sacct writes them for slurmkit's own query (its per-process delimiter)."""
    n = len(sacct_cmd.FIELDS)
    return "".join(sacct_cmd.DELIMITER.join(line.split("|", n - 1)) + "\n" for line in lines)


def records(name: str = "sacct-kinds.txt") -> dict[tuple[int, int], dict]:
    return {(r["job_id"], r["run"]): r for r in sacct.number_runs(rows(name), "reconcile")}


def test_parse_reads_every_recorded_row():
    got = rows()
    assert len(got) == 15
    assert {r["JobIDRaw"] for r in got} == {"119", "124", "125", "126", "127", "128", "129", "130", "131", "132",
                                             "133", "134", "135"}


def test_requeued_job_has_one_record_per_run_numbered_by_dbindex():
    recs = records()
    assert [(recs[(119, k)]["state"], recs[(119, k)]["start_time"]) for k in range(3)] == [
        ("REQUEUED", 1796283703), ("REQUEUED", 1796283733), ("COMPLETED", 1796283740)]
    assert (119, 3) not in recs


def test_two_node_job_gpus_and_types_from_alloctres():
    r = records()[(124, 0)]
    assert (r["gpus"], r["gpu_types"], r["node_count"], r["nodes"], r["cpus"]) == (4, "a100", 2, "gpu[01-02]", 16)
    assert r["tres"] == "billing=16,cpu=16,gres/gpu:a100=4,gres/gpu=4,mem=32G,node=2"
    assert (r["elapsed_s"], r["state"], r["source"]) == (3, "COMPLETED", "reconcile")


def test_array_tasks_keep_their_own_job_id_and_the_array_ids():
    recs = records()
    assert {(recs[(j, 0)]["array_job_id"], recs[(j, 0)]["array_task_id"]) for j in (134, 135, 125)} == {
        (125, 0), (125, 1), (125, 2)}


def test_array_that_never_started_is_one_record_without_allocation():
    r = records()[(129, 0)]  # JobID 129_[0-4]
    assert (r["array_job_id"], r["array_task_id"], r["state"]) == (129, None, "CANCELLED")
    # sacct 22.05 prints the request (NNodes 1, AllocCPUS 1) for a job that never ran
    assert (r["start_time"], r["nodes"], r["node_count"], r["cpus"], r["gpus"], r["tres"]) == (
        None, None, 0, 0, 0, None)


def test_failed_cancelled_timeout_het_and_other_user():
    recs = records()
    assert (recs[(126, 0)]["state"], recs[(126, 0)]["exit_code"]) == ("FAILED", 3)
    assert (recs[(127, 0)]["state"], recs[(127, 0)]["gpus"]) == ("CANCELLED", 3)  # "CANCELLED by 0"
    assert (recs[(128, 0)]["state"], recs[(128, 0)]["gpus"], recs[(128, 0)]["start_time"]) == ("CANCELLED", 0, None)
    assert (recs[(130, 0)]["state"], recs[(130, 0)]["elapsed_s"]) == ("TIMEOUT", 86)
    assert [(recs[(j, 0)]["het_job_id"], recs[(j, 0)]["het_job_offset"], recs[(j, 0)]["gpus"]) for j in (131, 132)] == [
        (131, 0, 1), (131, 1, 2)]
    assert (recs[(133, 0)]["user_name"], recs[(133, 0)]["uid"], recs[(133, 0)]["account"]) == ("alice", 1001, "physics")


def test_iso_times_read_like_epoch_times():
    iso = records("sacct-kinds-isotime.txt")
    epoch = records()
    for key in ((119, 0), (119, 2), (134, 0), (129, 0)):
        assert {c: iso[key][c] for c in ("submit_time", "start_time", "end_time")} == {
            c: epoch[key][c] for c in ("submit_time", "start_time", "end_time")}


def test_typed_gpu_entries_count_when_the_untyped_total_is_absent():
    assert fields.parse_gpu_tres("cpu=8,gres/gpu:a100=4,gres/gpu:v100=2") == (6, ["a100", "v100"])
    assert fields.parse_gpu_tres("cpu=8,gres/gpu=4,gres/gpu:a100=4") == (4, ["a100"])
    assert fields.parse_gpu_tres("") == (0, [])


def test_job_name_with_pipes_newlines_and_a_forged_row_stays_one_whole_name():
    """A user names their job; nothing in the name can split it or add a row (the delimiter is per process)."""
    first, second = (DATA / "sacct-kinds.txt").read_text().splitlines()[:2]
    forged = "x|with|pipes\n" + second  # and then a whole row, as sacct -P would print it
    head = first.rsplit("|", 1)[0]
    text = as_sacct([f"{head}|{forged}", second])
    got = sacct_cmd.parse(text)
    assert [r["JobName"] for r in got] == [forged, second.rsplit("|", 1)[1]]
    assert got[0]["JobIDRaw"] == first.split("|")[1] and got[1]["JobIDRaw"] == second.split("|")[1]


def test_output_that_does_not_make_whole_rows_is_an_error_that_shows_it():
    with pytest.raises(BackendError, match=r"unexpected sacct output: 2 field delimiters do not make rows of 20"):
        sacct_cmd.parse(sacct_cmd.DELIMITER.join(["1", "2", "3"]) + "\n")
    broken = as_sacct((DATA / "sacct-kinds.txt").read_text().splitlines()[:2]).replace("\n", " ", 1)
    with pytest.raises(BackendError, match=r"row 1 .* is not one line"):
        sacct_cmd.parse(broken)


def test_window_command_asks_for_runs_that_ended_in_it():
    cmd = sacct_cmd.sacct_command(since=1796283710, until=1796283750, states=sacct_cmd.ENDED, cluster="devcluster")
    assert cmd[:6] == ["sacct", "--duplicates", "--allocations", "-P", f"--delimiter={sacct_cmd.DELIMITER}", "-n"]
    assert cmd[cmd.index("-S") + 1] == "2026-12-03T07:41:50" and cmd[cmd.index("-E") + 1] == "2026-12-03T07:42:30"
    assert "REQUEUED" in cmd[cmd.index("-s") + 1].split(",") and "-a" in cmd and cmd[-2:] == ["-M", "devcluster"]
    with pytest.raises(ValueError, match="-E"):
        sacct_cmd.sacct_command(since=1796283710, states=sacct_cmd.ENDED)
    assert sacct_cmd.sacct_command(job_ids=[119, 124], users=["alice"])[-4:] == ["-j", "119,124", "-u", "alice"]


def test_fetch_numbers_runs_that_the_window_hides():
    # Window 07:41:50-07:42:30 lists only runs 1 and 2 of job 119 (recorded); run 0 ended before it.
    calls = []

    def run(cmd: list[str]) -> str:
        calls.append(cmd)
        if "-S" in cmd:
            return as_sacct((DATA / "sacct-window-119.txt").read_text().splitlines())
        assert cmd[cmd.index("-j") + 1] == "119"  # only the job whose first listed run was submitted earlier
        return as_sacct([line for line in (DATA / "sacct-kinds.txt").read_text().splitlines()
                         if line.startswith("119|")])

    recs = sacct.fetch_records(1796283710, 1796283750, run=run, source="sacct-import")
    assert [(r["job_id"], r["run"], r["state"], r["source"]) for r in recs] == [
        (119, 1, "REQUEUED", "sacct-import"), (119, 2, "COMPLETED", "sacct-import")]
    assert len(calls) == 2


def test_fetch_asks_once_when_no_run_can_be_hidden():
    calls = []

    def run(cmd: list[str]) -> str:
        calls.append(cmd)
        return as_sacct([line for line in (DATA / "sacct-kinds.txt").read_text().splitlines()
                         if line.startswith(("124|", "125_"))])

    recs = sacct.fetch_records(1796283800, 1796283900, run=run)
    assert [r["job_id"] for r in recs] == [124, 125, 134, 135] and len(calls) == 1


def test_times():
    now = 1796284000
    assert sacct.to_epoch("2d", now=now) == now - 2 * 86400
    assert sacct.to_epoch("90m", now=now) == now - 5400
    assert sacct.to_epoch("2026-12-03T07:41:50", now=now) == 1796283710
    assert sacct.to_epoch("1796283710", now=now) == 1796283710
    # one syntax with the reports: named days are local midnights
    assert sacct.to_epoch("yesterday", now=now) == 1796284000 - 1796284000 % 86400 - 86400  # this machine: UTC
    with pytest.raises(InputError) as err:
        sacct.to_epoch("next tuesday", what="--since")
    assert "--since: cannot read 'next tuesday' as a time" in err.value.format()
    assert when.span_seconds("1w") == 604800 and when.span_seconds("2026-01-01") is None
    assert when.span_seconds("1.5h") == 5400 and sacct.to_epoch("1.5h", now=now) == now - 5400


def test_hook_and_sacct_describe_a_requeued_job_the_same_way():
    """The jobcomp hook (recorded scontrol + 22.05 variables) and sacct agree on every run of job 151."""
    base = {"CLUSTER": "devcluster", "JOBID": "151", "ARRAYJOBID": "0", "ARRAYTASKID": "4294967294",
            "NODES": "gpu01", "NODECNT": "1", "PROCS": "8", "EXITCODE": "0:0", "ACCOUNT": "root", "QOS": "normal",
            "PARTITION": "gpu", "USERNAME": "root", "UID": "0", "JOBNAME": "acctrec-requeue"}
    def show(name: str) -> dict[str, str]:
        return scontrol.parse_show_job((DATA / name).read_text())

    hook = [hooks.jobcomp_record({**base, "JOBSTATE": "PENDING", "SUBMIT": "1796284232", "START": "1796284233",
                                  "END": "1796284233"}, show("scontrol-show-job-requeued-pending.txt")),
            hooks.jobcomp_record({**base, "JOBSTATE": "COMPLETED", "SUBMIT": "1796284233", "START": "1796284237",
                                  "END": "1796284237"}, show("scontrol-show-job-requeued-completed.txt"))]
    from_sacct = sacct.number_runs(rows("sacct-requeued.txt"), "reconcile")
    cols = ("job_id", "run", "state", "gpus", "gpu_types", "start_time", "end_time", "submit_time", "node_count",
            "nodes", "cpus", "exit_code", "elapsed_s", "array_job_id", "array_task_id")
    assert [{c: r[c] for c in cols} for r in hook] == [{c: r[c] for c in cols} for r in from_sacct]


@pytest.mark.parametrize(("text", "why"), [("999999d", "out of range"), ("99999999999999999999", "out of range"),
                                           ("9999-12-31", "more than a year ahead"), ("1969-12-31", "before 1970")])
def test_times_out_of_range_are_one_line_errors(text, why):
    with pytest.raises(InputError) as err:
        sacct.to_epoch(text, what="--since")
    assert err.value.format().startswith(f"error: --since: {text!r} is {why}")


def test_sacct_output_that_is_not_utf8_is_read_and_the_record_keeps_the_bytes_as_xNN(tmp_path, monkeypatch):
    """The bytes sacct prints (a stand-in sacct on PATH: a job name holding \\xff) decode without an error; the
    record writes them as \\xNN, so the store takes it and the window goes on."""
    first = (DATA / "sacct-kinds.txt").read_text().splitlines()[0]
    out = tmp_path / "out"
    out.write_bytes(as_sacct([first.rsplit("|", 1)[0] + "|x"]).encode().replace(b"|x\n", b"|caf\xc3\xa9\xff\n"))
    (tmp_path / "sacct").write_text(f"#!/bin/sh\ncat {out}\n")
    (tmp_path / "sacct").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    [row] = sacct_cmd.parse(sacct_cmd.run_sacct(sacct_cmd.sacct_command(job_ids=[119])))
    assert row["JobName"] == "café\udcff"
    rec = sacct.to_record(row, 0, "reconcile")
    assert rec["job_name"] == "café\\xff" and record.validate(rec) is None
