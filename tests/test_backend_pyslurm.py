"""The pyslurm backend against a FAKE `pyslurm` module (pyslurm 25.11 needs Slurm 25.11, which cannot be installed
on these machines; Debian 12 has 22.05).

The fake implements exactly the documented interface the backend uses, nothing more, and records what it was
given; it is not Slurm, and no number it produces means anything about a real cluster:
- `JobSubmitDescription(**kwargs)`: only the documented attributes (an unknown one raises AttributeError, as
  setting an undeclared attribute on pyslurm's cdef class does); `.submit() -> int`, with the documented client-side
  validation (script must start with "#!", cpus_per_task/cpus_per_gpu exclusive, one memory option).
- `Job(job_id)`, `Job.load(job_id)` (staticmethod, RPCError for an unknown id), `.cancel()`;
  `Jobs.load(preload_passwd_info=False, frozen=False)` -> a mapping whose `.values()` are Jobs.
- `RPCError(msg=...)`; `__version__` "25.11.2" (pyslurm's "<Slurm major>.<minor>.<patch>" scheme).
Sources: https://pyslurm.github.io/24.11/reference/jobsubmitdescription, https://pyslurm.github.io/24.11/reference/job,
pyslurm/core/job/submission.pxd and job.pyx in https://github.com/PySlurm/pyslurm.
"""

from __future__ import annotations

import importlib.util
import types

import pytest

from slurmkit.backends import get_backend
from slurmkit.backends.base import JobQuery
from slurmkit.backends.cli import CliBackend
from slurmkit.backends.pyslurm import PyslurmBackend, description_kwargs, detect
from slurmkit.errors import BackendUnavailable, InputError
from slurmkit.request import SubmitRequest
from slurmkit.submission import submit

# pyslurm 25.11's JobSubmitDescription attributes (submission.pxd, `cdef public`).
_ATTRIBUTES = """name account user_id group_id priority site_factor wckey array batch_constraints begin_time
clusters cluster_constraints comment admin_comment requires_contiguous_nodes cores_reserved_for_system
threads_reserved_for_system working_directory cpu_frequency nodes deadline delay_boot_time dependencies
excluded_nodes required_nodes constraints kill_on_node_fail licenses mail_user mail_types mcs_label memory_per_cpu
memory_per_node memory_per_gpu network nice log_files_open_mode overcommit partitions profile_types
accounting_gather_frequency qos requires_node_reboot is_requeueable reservations script script_args environment
resource_sharing distribution time_limit time_limit_min container container_id cpus_per_task cpus_per_gpu
sockets_per_node cores_per_socket threads_per_core gpus gpus_per_socket gpus_per_task gres_per_node gpu_binding
ntasks ntasks_per_node ntasks_per_socket ntasks_per_core ntasks_per_gpu switches signal standard_in standard_output
standard_error kill_on_invalid_dependency spreads_over_nodes use_min_nodes gres_binding gres_tasks_per_sharing
temporary_disk_per_node get_user_environment min_cpus_per_node wait_all_nodes selinux_context segment_size
reserved_ports extra"""
DOCUMENTED = set(_ATTRIBUTES.split())


def fake_pyslurm(version: str = "25.11.2") -> types.ModuleType:
    """A FAKE pyslurm (see the module docstring): an in-memory job table behind the documented calls."""
    mod = types.ModuleType("pyslurm")
    mod.__version__ = version
    table: dict[int, dict] = {}
    mod.submitted = []  # the descriptions submit() received, for assertions
    mod.refuse = None  # a message to raise as RPCError from the next submit, like slurmctld refusing a job

    class RPCError(Exception):
        def __init__(self, errno=1, msg="RPC error"):
            super().__init__(msg)
            self.errno = errno

    class JobSubmitDescription:
        def __init__(self, **kwargs):
            for k in DOCUMENTED:
                object.__setattr__(self, k, None)
            for k, v in kwargs.items():
                setattr(self, k, v)

        def __setattr__(self, key, value):
            if key not in DOCUMENTED:
                raise AttributeError(f"'pyslurm.core.job.submission.JobSubmitDescription' object has no "
                                     f"attribute '{key}'")
            object.__setattr__(self, key, value)

        def submit(self):
            if not self.script or not str(self.script).startswith("#!"):
                raise ValueError("Not a valid Batch script. First line must start with '#!'")
            if self.cpus_per_gpu and self.cpus_per_task:
                raise ValueError("cpus_per_task and cpus_per_gpu are mutually exclusive.")
            if sum(bool(x) for x in (self.memory_per_cpu, self.memory_per_node, self.memory_per_gpu)) > 1:
                raise ValueError("Only one of memory_per_cpu, memory_per_node or memory_per_gpu can be set.")
            if mod.refuse:
                msg, mod.refuse = mod.refuse, None
                raise RPCError(msg=msg)
            job_id = 1000 + len(table)
            table[job_id] = {"name": self.name, "comment": self.comment, "state": "PENDING"}
            mod.submitted.append(self)
            return job_id

    class Job:
        def __init__(self, job_id):
            self.id = job_id

        @staticmethod
        def load(job_id):
            if job_id not in table:
                raise RPCError(msg="Invalid job id specified")
            job = Job(job_id)
            for attr, value in {"name": table[job_id]["name"], "user_name": "alice",
                                "state": table[job_id]["state"], "state_reason": "None", "exit_code": 0,
                                "exit_code_signal": 0, "partition": "gpu", "allocated_nodes": None, "run_time": 0,
                                "standard_output": None, "standard_error": None,
                                "comment": table[job_id]["comment"], "array_id": None,
                                "array_task_id": None}.items():
                setattr(job, attr, value)
            return job

        def cancel(self):
            if self.id not in table:
                raise RPCError(msg="Invalid job id specified")
            table[self.id]["state"] = "CANCELLED"

    class Jobs(dict):
        @staticmethod
        def load(preload_passwd_info=False, frozen=False):
            return Jobs({i: Job.load(i) for i in table})

    mod.RPCError, mod.JobSubmitDescription, mod.Job, mod.Jobs = RPCError, JobSubmitDescription, Job, Jobs
    return mod


def request(**options) -> SubmitRequest:
    base = {"job-name": "be-py", "partition": "gpu", "nodes": "2", "ntasks-per-node": "8",
            "gpus-per-node": "a100:8", "cpus-per-task": "4", "mem-per-gpu": "8G", "time": "00:10:00",
            "output": "%x-%j.out", "signal": "B:USR1@120", "requeue": None, "open-mode": "append"}
    return SubmitRequest(name="be-py", script="#!/bin/bash\nsrun true\n", options={**base, **options},
                         tag="tag123", workdir="/w")


def test_options_map_to_documented_attributes_only():
    kwargs = description_kwargs(request(exclusive=None, constraint="a100", exclude="gpu02"))
    assert set(kwargs) <= DOCUMENTED
    assert kwargs["gres_per_node"] == "gpu:a100:8"  # pyslurm's documented way to ask --gpus-per-node
    assert (kwargs["partitions"], kwargs["nodes"], kwargs["ntasks_per_node"], kwargs["cpus_per_task"]) == \
        ("gpu", "2", 8, 4)
    assert kwargs["signal"] == "B:USR1@120" and kwargs["is_requeueable"] is True
    assert kwargs["log_files_open_mode"] == "append" and kwargs["resource_sharing"] == "exclusive"
    assert kwargs["comment"] == "sk:tag123" and kwargs["working_directory"] == "/w"
    assert "environment" not in kwargs  # pyslurm's default is "ALL", like sbatch


def test_every_mapped_attribute_is_documented():
    from slurmkit.backends.pyslurm import _OPTIONS

    assert {attr for attr, _ in _OPTIONS.values()} - DOCUMENTED == set()


def test_extra_environment_keeps_the_submitting_shell():
    req = request()
    req.environment = {"EXTRA": "1"}
    env = description_kwargs(req, {"PATH": "/bin", "SLURM_JWT": "x"})["environment"]
    assert env == {"PATH": "/bin", "EXTRA": "1"}


def test_an_option_without_an_attribute_is_a_located_error():
    with pytest.raises(InputError) as exc:
        description_kwargs(request(**{"resv-ports": "2"}))
    assert exc.value.problems[0].key == "sbatch_extra.resv-ports"


def test_submit_find_status_cancel_through_the_documented_calls():
    ps = fake_pyslurm()
    be = PyslurmBackend(ps)
    result = be.submit(request())
    assert result.backend == "pyslurm" and result.job_id == 1000
    assert ps.submitted[0].comment == "sk:tag123" and ps.submitted[0].script.startswith("#!")
    assert be.find_by_tag("tag123") == 1000 and be.find_by_tag("other") is None
    [info] = be.job("1000")
    assert (info.job_id, info.name, info.state, info.comment) == ("1000", "be-py", "PENDING", "sk:tag123")
    assert [j.job_id for j in be.jobs(JobQuery(user="alice"))] == ["1000"]  # the fake says user_name alice
    assert be.jobs(JobQuery(user="bob")) == [] and be.jobs(JobQuery(name="other", user="*")) == []
    assert [(r.job_id, r.outcome) for r in be.cancel(["1000"])] == [("1000", "cancelled")]
    assert be.job("1000")[0].state == "CANCELLED"
    # Truthful: a second cancel of the ended job, and an id Slurm does not know, are never "cancelled".
    assert [(r.outcome, r.ok) for r in be.cancel(["1000", "4242"])] == [("already-ended", False),
                                                                        ("not-found", False)]
    assert be.job("4242") == []


def test_slurms_refusal_maps_like_the_cli_backend():
    ps = fake_pyslurm()
    ps.refuse = "Invalid account or account/partition combination specified"
    with pytest.raises(InputError) as exc:
        PyslurmBackend(ps).submit(request(account="nosuch"))
    assert exc.value.problems[0].key == "account"
    ps.refuse = "Unable to contact slurm controller (connect failure)"
    with pytest.raises(BackendUnavailable):
        PyslurmBackend(ps).submit(request())


def test_pyslurm_validation_errors_are_usage_errors():
    with pytest.raises(InputError, match="mutually exclusive"):
        PyslurmBackend(fake_pyslurm()).submit(request(**{"cpus-per-gpu": "4"}))


def test_retry_after_a_lost_answer_reuses_the_job():
    ps = fake_pyslurm()

    class LostAnswer(PyslurmBackend):
        calls = 0

        def submit(self, req, *, test_only=False):
            self.calls += 1
            result = super().submit(req, test_only=test_only)
            if self.calls == 1:  # the job was created, but the answer never arrived
                raise BackendUnavailable("Socket timed out on send/recv operation")
            return result

    again = submit(LostAnswer(ps), request(), wait_s=0)
    assert again.reused and again.job_id == 1000 and len(ps.submitted) == 1


def test_test_only_is_refused():
    with pytest.raises(InputError, match="test-only"):
        PyslurmBackend(fake_pyslurm()).submit(request(), test_only=True)


# -- auto-detection -------------------------------------------------------------------------------------------

def _detect(version: str | None, sinfo: str | None, importable: bool = True):
    def find_spec(name):
        return object() if version is not None else None

    def import_module(name):
        if not importable:
            raise ImportError("libslurmfull.so: cannot open shared object file")
        return fake_pyslurm(version or "")

    return detect(find_spec=find_spec, import_module=import_module, slurm_version=lambda: sinfo)


def test_detect_matching_series():
    d = _detect("25.11.2", "slurm 25.11.0")
    assert d.usable and d.pyslurm_version == "25.11.2"


def test_detect_old_scheme_without_leading_zero():
    assert _detect("24.5.1", "slurm 24.05.3").usable  # pyslurm writes Slurm 24.05 as 24.5


def test_detect_mismatch_says_both_versions():
    d = _detect("25.11.2", "slurm 22.05.8")
    assert not d.usable and "25.11" in d.reason and "22.05.8" in d.reason


def test_detect_not_installed_or_broken_or_no_slurm():
    assert _detect(None, "slurm 25.11.0").reason == "pyslurm is not installed"
    assert "does not import" in _detect("25.11.2", "slurm 25.11.0", importable=False).reason
    assert not _detect("25.11.2", None).usable


no_real_pyslurm = pytest.mark.skipif(importlib.util.find_spec("pyslurm") is not None,
                                     reason="a real pyslurm is installed (optional extra)")


@no_real_pyslurm
def test_auto_is_cli_here_and_pyslurm_when_it_matches(monkeypatch):
    import slurmkit.backends.pyslurm as mod

    assert isinstance(get_backend("auto"), CliBackend)  # no pyslurm on this machine
    monkeypatch.setattr(mod, "detect", lambda: mod.Detection(True, "matches"))
    assert isinstance(get_backend("auto"), PyslurmBackend)
    monkeypatch.setattr(mod, "detect", lambda: mod.Detection(False, "mismatch"))
    assert isinstance(get_backend("auto"), CliBackend)


@no_real_pyslurm
def test_explicit_pyslurm_without_pyslurm_fails_clearly():
    be = get_backend("pyslurm")
    with pytest.raises(BackendUnavailable) as exc:
        be.find_by_tag("x")
    assert "--backend cli" in (exc.value.hint or "")
