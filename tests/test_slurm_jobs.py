"""The cli backend's readers of squeue / scontrol / sacct and Slurm's error words, on recorded real output
(tests/data/slurm/README.md: 22.05.8 and 25.11.7 recordings)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmkit.errors import BackendUnavailable, InputError, JobNotFound
from slurmkit.job import JobInfo, state_counts, stuck, task_count, wait_exit
from slurmkit.slurm import errors, fields
from slurmkit.slurm.jobs import SEP, parse_sacct, parse_show_jobs, parse_squeue

DATA = Path(__file__).parent / "data" / "slurm"


def read(name: str) -> str:
    return (DATA / name).read_text()


def by_id(jobs: list[JobInfo]) -> dict[str, JobInfo]:
    return {j.job_id: j for j in jobs}


def test_squeue_listing_has_queued_running_ended_and_the_collapsed_pending_array():
    parsed = parse_squeue(read("2511-squeue-states-all.txt"))
    assert parsed.unreadable == 0
    jobs = by_id(parsed.jobs)
    assert set(jobs) == {"2511351_0", "2511351_1", "2511351_2", "2511351_3", "2511352", "2511353",
                         "2511363_[0-4]"}
    failed = jobs["2511351_1"]
    assert (failed.state, failed.reason, failed.array_job_id, failed.array_task, failed.unit) == \
        ("FAILED", "NonZeroExitCode", "2511351", "1", "2511351")
    assert failed.time_left == ""  # squeue prints 1:57 for an ended job: meaningless, dropped
    held = jobs["2511352"]
    assert (held.state, held.reason, held.gpus, held.array_job_id, held.nodes) == \
        ("PENDING", "JobHeldUser", 4, None, "")  # 2 nodes x gres/gpu:a100:2
    assert (held.time_limit, held.time_left, held.start_time) == ("1:00", "1:00", None)
    pending = jobs["2511363_[0-4]"]
    assert (pending.array_job_id, pending.array_task, pending.tasks) == ("2511363", "0-4", 5)
    assert jobs["2511353"].comment is None and jobs["2511351_0"].comment == "sk:bdrec1"


def test_a_line_whose_name_holds_the_separator_is_counted_not_misread():
    line = read("2511-squeue-states-all.txt").splitlines()[0]
    broken = line.replace("bd-arr", f"bd{SEP}arr")
    parsed = parse_squeue(broken + "\n" + line + "\n")
    assert parsed.unreadable == 1 and [j.name for j in parsed.jobs] == ["bd-arr"]


def test_scontrol_records_of_an_array_with_a_failed_task():
    jobs = by_id(parse_show_jobs(read("2511-scontrol-array-failed-task.txt")))
    assert sorted(jobs) == ["2511351_0", "2511351_1", "2511351_2", "2511351_3"]
    t1 = jobs["2511351_1"]
    assert (t1.state, t1.exit_code, t1.gpus, t1.stdout, t1.stderr) == \
        ("FAILED", "1:0", 1, "/tmp/bd/bd-arr-2511351_1.out", "/tmp/bd/bd-arr-2511351_1.out")
    assert state_counts(jobs.values()) == {"COMPLETED": 3, "FAILED": 1}
    assert wait_exit(jobs.values()) == 3


def test_scontrol_pending_array_record_has_no_log_path_of_its_own():
    [rec] = parse_show_jobs(read("2511-scontrol-array-pending.txt"))
    assert (rec.job_id, rec.state, rec.reason, rec.tasks) == ("2511363_[0-4]", "PENDING", "JobHeldUser", 5)
    assert rec.stdout is None and rec.stderr is None  # scontrol shows .../parr-2511363_4294967294.out


@pytest.mark.parametrize(("name", "expect"), [
    ("2511-scontrol-held-2node.txt", ("2511352", "PENDING", 4, "/tmp/bd/held-2511352.out")),
    ("2511-scontrol-completed.txt", ("2511353", "COMPLETED", 1, "/tmp/bd/run-2511353.out")),
    ("scontrol-show-job-array-task.txt", ("10_0", "COMPLETED", None, "/tmp/sk/probe-11.out")),  # 22.05, no GPU
    ("scontrol-show-job-running.txt", ("12", "PENDING", None, "/tmp/sk/slurm-12.out")),
])
def test_scontrol_single_records_on_both_releases(name, expect):
    [j] = parse_show_jobs(read(name))
    assert (j.job_id, j.state, j.gpus, j.stdout) == expect
    assert j.stderr == j.stdout  # 22.05 repeats the path, 25.11 prints StdErr= empty: both mean "same file"


def test_scontrol_22_05_gpu_records_from_the_accounting_recordings():
    running = parse_show_jobs((DATA.parent / "accounting" / "scontrol-show-job-2node-running.txt").read_text())
    assert [(j.state, j.gpus, j.nodes) for j in running] == [("RUNNING", 4, "gpu[01-02]")]  # TRES=...gres/gpu=4
    [pending] = parse_show_jobs((DATA.parent / "accounting" / "scontrol-show-job-pending.txt").read_text())
    assert (pending.state, pending.reason, pending.gpus) == ("PENDING", "BeginTime", 2)  # TresPerNode


def test_sacct_rows():
    parsed = parse_sacct(read("2511-sacct-jobs.txt"))
    assert parsed.unreadable == 0
    jobs = by_id(parsed.jobs)
    assert (jobs["2511351_1"].state, jobs["2511351_1"].exit_code, jobs["2511351_1"].gpus) == ("FAILED", "1:0", 1)
    assert jobs["2511352"].nodes == "" and jobs["2511352"].gpus == 4  # "None assigned"; ReqTRES while pending
    assert jobs["2511363_[0-4]"].tasks == 5 and jobs["2511353"].end_time == "2026-12-04T13:30:39"


def test_task_count_and_wait_exit():
    assert [task_count(s) for s in ("4", "5-9%2", "1,3,7-8", "0-9:2", "[0-4]")] == [1, 5, 4, 5, 5]
    job = JobInfo("1", "n", "u", "COMPLETED")
    assert wait_exit([job]) == 0
    assert wait_exit([job, JobInfo("2", "n", "u", "CANCELLED"), JobInfo("3", "n", "u", "FAILED")]) == 3
    assert wait_exit([JobInfo("1", "n", "u", "PREEMPTED")]) == 8


@pytest.mark.parametrize(("tres", "per", "gpus"), [
    ("cpu=1,mem=1000M,node=1,billing=1,gres/gpu=2,gres/gpu:a100=2", 1, 2), ("gres:gpu:a100:2", 2, 4),
    ("gres/gpu:a100:1", 1, 1), ("gres/gpu:a100=2", 1, 2), ("gres:gpu:1", 1, 1), ("gres/gpu", 1, 1),
    ("gpu:2", 1, 2), ("billing=2,cpu=2,gres/gpu:a100=4,gres/gpu=4,mem=200M,node=2", 1, 4),
    ("cpu=1,mem=1G", 1, None), (None, 1, None),
])
def test_gpu_count_in_every_tres_form_slurm_prints(tres, per, gpus):
    assert fields.gpu_count(tres, per) == gpus


@pytest.mark.parametrize(("message", "kind"), [
    ("slurm_load_jobs error: Invalid job id specified", "not-found"),
    ("scancel: error: Kill job error on job id 5: Job/step already completing or completed", "already-ended"),
    ("scancel: error: Kill job error on job id 5: Access/permission denied", "refused"),
    ("sacct: error: Slurm accounting storage is disabled", "accounting-off"),
    ("sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified",
     "user"),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
     "unreachable"),
    ("sbatch: error: something new", "other"),
])
def test_one_classifier_for_slurms_words(message, kind):
    assert errors.classify(message) == kind


def test_classified_messages_become_slurmkit_errors():
    assert isinstance(errors.error("sbatch: error: Unable to contact slurm controller"), BackendUnavailable)
    bad = errors.error("sbatch: error: Batch job submission failed: Invalid account or account/partition")
    assert isinstance(bad, InputError) and bad.problems[0].key == "account"
    assert isinstance(errors.error("Invalid job id specified", "job 7"), JobNotFound)


def test_stuck_only_when_every_live_task_waits_for_something_that_cannot_come():
    held = parse_show_jobs(read("2511-scontrol-array-pending.txt"))  # Reason=JobHeldUser
    assert stuck(held) and "held" in stuck(held)
    never = JobInfo("1", "n", "u", "PENDING", reason="DependencyNeverSatisfied")
    assert "can never be satisfied" in stuck([never])
    assert stuck([never, JobInfo("2", "n", "u", "RUNNING")]) is None
    assert stuck([JobInfo("3", "n", "u", "PENDING", reason="Priority")]) is None
    assert stuck([JobInfo("4", "n", "u", "COMPLETED")]) is None


def test_cli_backend_reads_a_job_name_with_a_non_utf8_byte():
    """squeue prints other users' job names as bytes; one 0xff must not stop status or find_by_tag for everyone."""
    from slurmkit.backends.cli import CliBackend

    proc = CliBackend()._run(["printf", "1|a\\377b|alice"])
    assert proc.returncode == 0 and proc.stdout == "1|a\\xffb|alice"


def test_cancel_says_cancelled_only_for_a_job_it_could_stop():
    from slurmkit.backends.base import cancel_each

    jobs = {"1": [JobInfo("1", "a", "alice", "RUNNING")], "2": [JobInfo("2", "b", "alice", "COMPLETING")],
            "3": [JobInfo("3", "c", "alice", "CANCELLED")]}
    sent: list[str] = []
    out = cancel_each(["1", "2", "3", "4"], lambda j: jobs.get(j, []), lambda j: sent.append(j))
    assert [(r.job_id, r.outcome) for r in out] == [("1", "cancelled"), ("2", "already-ended"),
                                                    ("3", "already-ended"), ("4", "not-found")]
    assert sent == ["1"] and "COMPLETING" in out[1].message
