"""The JSON each slurmrestd API version speaks: job properties out, job records and answers in.

Two families, one class each (`dialect(version)` picks):

* v0.0.38 (Slurm 22.05's openapi/v0.0.38 plugin). Observed on the devcluster (tests/data/slurmrest/):
  #SBATCH lines in the script are ignored, so every option must be a job property; `nodes` as the documented
  [min, max] array yields a 1-node job while the sbatch string "2" works; `exclusive` accepts "exclusive"/"user"/
  "mcs" but not "true"; `signal` rejects the "B:" prefix ("Invalid SIGNAL specification"), so a preemptible spec
  (the batch shell's trap) is refused with a hint; `environment` is an object; the exit code is the raw wait status.
* v0.0.43 / v0.0.44 (data_parser plugins of Slurm 25.11; field names from src/plugins/data_parser/v0.0.44/
  parsers.c and the daemon's /openapi/v3, which agree; the two versions differ only in fields slurmkit does not
  use, e.g. job_info.submit_line). Numbers with "unset"/"infinite" are {"set", "infinite", "number"} objects;
  GPUs and other GRES are TRES strings ("gres/gpu:a100:2" in tres_per_node, what sbatch sends too), per-GPU
  CPUs and memory are cpus_per_tres/memory_per_tres; `--exclusive` is shared=["none"]; `--signal=B:USR1@60` is
  kill_warning_signal/_delay/_flags=["BATCH_JOB"] (accepted, unlike v0.0.38); `environment` is a list of
  "NAME=value"; `job_state` is a list (base state, then flags), `exit_code` an object. Observed on the 25.11
  devcluster: a submission whose kill_warning_signal slurmrestd cannot parse still creates the job (with an
  `errors` entry "Unknown signal"), so slurmkit checks the signal name itself; a failed cancel answers HTTP 200
  with the reason in `status[].error`; a held job answers 200 with a `warnings` entry.
"""

from __future__ import annotations

import os
import re
import signal as _signal
import time
from collections.abc import Callable
from typing import Any, ClassVar

from slurmkit.config.units import parse_mem_mib, parse_time_minutes
from slurmkit.errors import InputError, Problem
from slurmkit.job import JobInfo
from slurmkit.request import SubmitRequest

Convert = Callable[[str | None], Any]


def _int(v: str | None) -> int:
    return int(str(v))


def _flag(v: str | None) -> bool:
    return True if v is None else str(v).lower() not in ("no", "0", "false")


def _mib(v: str | None) -> int:
    return parse_mem_mib(str(v))


def _minutes(v: str | None) -> int:
    return parse_time_minutes(str(v))


def _str(v: str | None) -> str:
    return str(v)


def _log_path(pattern: str, job: dict[str, Any], task: str | None, array_job_id: str | None) -> str:
    """Expand what slurmkit's templates use in --output (%x %j %A %a %u %%) against the job's working directory,
    like slurmd; v0.0.38 returns the pattern as given ("" for Slurm's default)."""
    if not pattern:
        pattern = "slurm-%A_%a.out" if task is not None else "slurm-%j.out"
    values = {"x": job.get("name", ""), "j": str(job["job_id"]), "u": job.get("user_name", ""),
              "A": array_job_id or str(job["job_id"]), "a": task or "", "%": "%"}
    path = re.sub(r"%([xjuAa%])", lambda m: values[m.group(1)], pattern)
    return path if path.startswith("/") else os.path.join(job.get("current_working_directory") or "", path)


def _elapsed(state: str, start: int, end: int, now: float) -> str:
    if not start or state == "PENDING":
        return "00:00:00"
    secs = int((end if end and end < now else now) - start)
    d, rem = divmod(max(secs, 0), 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    return f"{d}-{h:02d}:{m:02d}:{s:02d}" if d else f"{h:02d}:{m:02d}:{s:02d}"


class Dialect:
    """What one API family sends and reads. Subclasses fill the option table and the record readers."""

    family = ""
    options: ClassVar[dict[str, tuple[str, Convert]]] = {}

    def job_properties(self, request: SubmitRequest, environment: dict[str, str]) -> dict[str, Any]:
        """The `job` object for a request: its sbatch options mapped one by one, the tag in the comment."""
        job: dict[str, Any] = {}
        problems: list[Problem] = []
        for key, value in request.options.items():
            try:
                self.set_option(job, key, value, problems)
            except ValueError as exc:
                problems.append(Problem(f"--{key}={value}: {exc}", key=key))
        if problems:
            raise InputError(problems)
        job["comment"] = f"sk:{request.tag}"  # what find_by_tag and submission.py's idempotent retry look for
        job.setdefault("current_working_directory", request.workdir)
        job["environment"] = self.environment(environment)
        return job

    def set_option(self, job: dict[str, Any], key: str, value: str | None, problems: list[Problem]) -> None:
        if key not in self.options:
            problems.append(Problem(f"--{key} cannot be set through slurmrestd {self.family} (no such job "
                                    "property)", key=f"sbatch_extra.{key}",
                                    hint="use --backend cli, or drop the option"))
            return
        prop, convert = self.options[key]
        job[prop] = convert(value)

    def environment(self, env: dict[str, str]) -> Any:
        return env

    def is_collapsed(self, rec: dict[str, Any]) -> bool:
        """Slurm's one record for an array's not-yet-started tasks (123_[4-9])."""
        return bool(rec.get("array_task_string")) and self.task_id(rec) is None

    # record readers (v0.0.38's plain values; overridden where later versions wrap them)
    def task_id(self, rec: dict[str, Any]) -> int | None:
        return rec.get("array_task_id")

    def array_job_id(self, rec: dict[str, Any]) -> int | None:
        return rec.get("array_job_id") or None

    def state(self, rec: dict[str, Any]) -> str:
        return str(rec.get("job_state", ""))

    def time(self, rec: dict[str, Any], key: str) -> int:
        return int(rec.get(key) or 0)

    def exit_code(self, rec: dict[str, Any]) -> str:
        """v0.0.38 reports the raw wait status; scontrol shows it as exit:signal."""
        raw = rec.get("exit_code")
        return f"{(raw >> 8) & 0xFF}:{raw & 0x7F}" if isinstance(raw, int) else ""

    def log_paths(self, rec: dict[str, Any], task: str | None, array_job_id: str | None) -> tuple[str, str]:
        stdout = _log_path(rec.get("standard_output", ""), rec, task, array_job_id)
        stderr = _log_path(rec["standard_error"], rec, task, array_job_id) if rec.get("standard_error") else stdout
        return stdout, stderr

    def job_info(self, rec: dict[str, Any], now: float | None = None) -> JobInfo:
        """One job record as slurmkit's JobInfo (the fields `sk status` shows), ids as scontrol prints them."""
        jid = str(rec["job_id"])
        array_job_id = task = None
        tid = self.task_id(rec)
        if tid is not None:
            array_job_id, task = str(self.array_job_id(rec)), str(tid)
            jid = f"{array_job_id}_{task}"
        elif rec.get("array_task_string"):  # the not-yet-started tasks of an array, e.g. 860_[1-2%1]
            array_job_id, task = str(self.array_job_id(rec)), str(rec["array_task_string"])
            jid = f"{array_job_id}_[{task}]"
        state = self.state(rec)
        stdout, stderr = self.log_paths(rec, None if task is None or "[" in jid else task, array_job_id)
        elapsed = _elapsed(state, self.time(rec, "start_time"), self.time(rec, "end_time"),
                           time.time() if now is None else now)
        return JobInfo(job_id=jid, name=rec.get("name", ""), user=rec.get("user_name", ""), state=state,
                       reason=rec.get("state_reason", ""), exit_code=self.exit_code(rec),
                       partition=rec.get("partition", ""), nodes=rec.get("nodes", ""), elapsed=elapsed,
                       stdout=stdout, stderr=stderr, comment=rec.get("comment") or None, array_job_id=array_job_id,
                       array_task=task)

    def unit_id(self, rec: dict[str, Any]) -> int:
        """The id a submission created: an array task's array id, else the job id."""
        return int(self.array_job_id(rec) or rec["job_id"])

    def cancel_complaint(self, status: int, doc: dict[str, Any]) -> str | None:
        """Slurm's words when a DELETE did not cancel; None when it did."""
        words = "; ".join(messages(doc))
        return None if status == 200 and not words else words or f"HTTP {status}"

    def submit_notice_is_failure(self, doc: dict[str, Any]) -> str | None:
        """A complaint in a 200 answer that means slurmrestd dropped part of the job (None: nothing dropped)."""
        return None


def messages(doc: dict[str, Any]) -> list[str]:
    """Slurm's words in an answer's `errors`: `error` (slurm_strerror), with v0.0.4x's `description` where it says
    more (a parse error's "Expected integer but got ..."), and the field it concerns (`source` "#/job/...")."""
    out = []
    for e in doc.get("errors") or []:
        if not isinstance(e, dict):
            out.append(str(e))
            continue
        error, desc, source = (str(e.get(k) or "") for k in ("error", "description", "source"))
        if not error or error == "No error":
            text = desc or error or str(e)
        elif desc and desc != error and not desc.startswith("Batch job submission failed") and \
                e.get("error_number", 0) >= 9000:  # data_parser errors: the description names the value
            text = f"{error}: {desc}"
        else:
            text = error
        if source.startswith("#/"):
            text += f" (at {source})"
        out.append(text)
    return out


class V0038(Dialect):
    family = "v0.0.38"
    options: ClassVar[dict[str, tuple[str, Convert]]] = {
        "job-name": ("name", _str), "partition": ("partition", _str), "account": ("account", _str),
        "qos": ("qos", _str), "nodes": ("nodes", _str),  # string, not [min, max]: see the module docstring
        "ntasks": ("tasks", _int), "ntasks-per-node": ("tasks_per_node", _int),
        "cpus-per-task": ("cpus_per_task", _int), "cpus-per-gpu": ("cpus_per_gpu", _str),
        "gpus": ("gpus", _str), "gpus-per-node": ("gpus_per_node", _str), "gpus-per-task": ("gpus_per_task", _str),
        "gpus-per-socket": ("gpus_per_socket", _str), "gres": ("gres", _str),
        "mem": ("memory_per_node", _mib), "mem-per-cpu": ("memory_per_cpu", _mib),
        "mem-per-gpu": ("memory_per_gpu", _mib), "time": ("time_limit", _minutes),
        "time-min": ("time_minimum", _minutes),
        "chdir": ("current_working_directory", _str), "output": ("standard_output", _str),
        "error": ("standard_error", _str), "input": ("standard_input", _str),
        "array": ("array", _str), "dependency": ("dependency", _str),
        "signal": ("signal", _str), "requeue": ("requeue", lambda v: True), "no-requeue": ("requeue", lambda v: False),
        "open-mode": ("open_mode", _str), "mail-user": ("mail_user", _str), "mail-type": ("mail_type", _str),
        "exclusive": ("exclusive", lambda v: "exclusive" if v is None else str(v)),
        "exclusive-user": ("exclusive", lambda v: "user"),
        "constraint": ("constraints", _str), "reservation": ("reservation", _str), "nice": ("nice", _int),
        "deadline": ("deadline", _str), "licenses": ("licenses", _str), "wckey": ("wckey", _str),
        "priority": ("priority", _str), "hold": ("hold", _flag),
        "kill-on-invalid-dep": ("kill_on_invalid_dependency", _flag), "gres-flags": ("gres_flags", _str),
        "acctg-freq": ("account_gather_frequency", _str), "core-spec": ("core_specification", _int),
        "thread-spec": ("thread_specification", _int), "mcs-label": ("mcs_label", _str),
        "get-user-env": ("get_user_environment", _flag), "spread-job": ("spread_job", _flag),
        "use-min-nodes": ("minimum_nodes", _flag), "delay-boot": ("delay_boot", _int), "bb": ("burst_buffer", _str),
        "cluster-constraint": ("cluster_constraint", _str), "prefer": ("prefer", _str),
        "sockets-per-node": ("sockets_per_node", _int), "threads-per-core": ("threads_per_core", _int),
        "cores-per-socket": ("cores_per_socket", _int), "hint": ("cpu_binding_hint", _str),
        "distribution": ("distribution", _str), "ntasks-per-core": ("tasks_per_core", _int),
        "ntasks-per-socket": ("tasks_per_socket", _int), "mincpus": ("minimum_cpus_per_node", _int),
        "oversubscribe": ("oversubscribe", _flag), "gpu-freq": ("gpu_frequency", _str),
        "cpu-freq": ("cpu_frequency", _str), "container": ("container", _str), "mem-bind": ("memory_binding", _str),
        "gpu-bind": ("gpu_binding", _str),
    }

    def job_properties(self, request: SubmitRequest, environment: dict[str, str]) -> dict[str, Any]:
        signal = str(request.options.get("signal") or "")
        if re.match(r"^[A-Za-z]*B[A-Za-z]*:", signal):
            # Slurm 22.05 slurmrestd: "B:USR1@60" -> "Invalid SIGNAL specification" (recorded).
            raise InputError(Problem(f"--signal={signal}: slurmrestd v0.0.38 (Slurm 22.05) rejects the B: prefix, "
                                     "so the batch shell's preemption trap would never be signalled", key="preempt",
                                     hint="submit preemptible jobs with --backend cli, or through a slurmrestd "
                                     "serving v0.0.43+ (Slurm 24.05+)"))
        return super().job_properties(request, environment)


NO_VAL16 = 0xFFFE  # Slurm's "not set" for 16-bit fields (slurm.h)


def _no_val(n: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": n}


def _number(v: Any) -> int | None:
    """A v0.0.4x {"set", "infinite", "number"} as an int (None when unset or infinite); plain ints pass."""
    if isinstance(v, dict):
        return int(v.get("number") or 0) if v.get("set") and not v.get("infinite") else None
    return v if isinstance(v, int) else None


def _gpu_tres(v: str | None) -> str:
    """sbatch's --gpus* value ("a100:2", "2") as the TRES string sbatch itself sends ("gres/gpu:a100:2")."""
    return f"gres/gpu:{v}"


def _gres_list(v: str | None) -> str:
    """--gres=gpu:a100:2,foo:1 -> "gres/gpu:a100:2,gres/foo:1" (what sbatch puts into tres_per_node)."""
    return ",".join(p if p.startswith("gres/") else f"gres/{p}" for p in str(v).split(",") if p)


# sbatch --mail-type names -> v0.0.4x mail_type flags (parse_mail_type in src/common/proc_args.c).
_MAIL = {"BEGIN": ["BEGIN"], "END": ["END"], "FAIL": ["FAIL"], "REQUEUE": ["REQUEUE"],
         "ALL": ["BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT"], "STAGE_OUT": ["STAGE_OUT"],
         "TIME_LIMIT": ["TIME=100%"], "TIME_LIMIT_90": ["TIME=90%"], "TIME_LIMIT_80": ["TIME=80%"],
         "TIME_LIMIT_50": ["TIME=50%"], "ARRAY_TASKS": ["ARRAY_TASKS"], "INVALID_DEPEND": ["INVALID_DEPENDENCY"],
         "NONE": []}


def _mail_type(v: str | None) -> list[str]:
    out: list[str] = []
    for name in str(v).upper().split(","):
        if name not in _MAIL:
            raise ValueError(f"{name!r} is not a mail type ({', '.join(_MAIL)})")
        out += [f for f in _MAIL[name] if f not in out]
    return out


def _signal_number(name: str) -> int:
    """sig_name2num's reading: a number, or a name with or without SIG."""
    if name.isdigit():
        return int(name)
    sig = getattr(_signal, "SIG" + name.upper().removeprefix("SIG"), None)
    if not isinstance(sig, _signal.Signals):
        raise ValueError(f"{name!r} is not a signal name or number")
    return int(sig)


def _kill_warning(v: str | None) -> dict[str, Any]:
    """--signal=[{R|B}:]SIG[@TIME] as get_signal_opts (src/common/proc_args.c) reads it, as v0.0.4x fields."""
    text, flags = str(v), set()
    if m := re.match(r"^([RrBb]{1,2}):", text):
        flags = {{"B": "BATCH_JOB", "R": "RESERVATION_JOB"}[ch] for ch in m.group(1).upper()}
        text = text[m.end():]
    name, _, at = text.partition("@")
    if not 1 <= _signal_number(name) <= 0xFFFF:
        raise ValueError(f"signal {name!r} is out of range")
    if at and not (at.isdigit() and int(at) <= 0xFFFF):
        raise ValueError(f"{at!r} is not a number of seconds (0-65535)")
    out: dict[str, Any] = {"kill_warning_signal": name.upper().removeprefix("SIG") if not name.isdigit() else name,
                           "kill_warning_delay": _no_val(int(at) if at else 60)}  # sbatch's default: 60 s
    if flags:
        out["kill_warning_flags"] = sorted(flags)
    return out


class V004x(Dialect):
    """v0.0.43 and v0.0.44 (Slurm 24.11/25.05/25.11 serve v0.0.43; 25.11 also v0.0.44)."""

    def __init__(self, family: str):
        self.family = family

    options: ClassVar[dict[str, tuple[str, Convert]]] = {
        "job-name": ("name", _str), "partition": ("partition", _str), "account": ("account", _str),
        "qos": ("qos", _str), "nodes": ("nodes", _str), "ntasks": ("tasks", _int),
        "ntasks-per-node": ("tasks_per_node", _int),  # --cpus-per-task, --gpus-per-task: set_option
        "cpus-per-gpu": ("cpus_per_tres", _gpu_tres), "gpus": ("tres_per_job", _gpu_tres),
        "gpus-per-node": ("tres_per_node", _gpu_tres),
        "gpus-per-socket": ("tres_per_socket", _gpu_tres), "gres": ("tres_per_node", _gres_list),
        "ntasks-per-gpu": ("ntasks_per_tres", _int),
        "mem": ("memory_per_node", lambda v: _no_val(_mib(v))),
        "mem-per-cpu": ("memory_per_cpu", lambda v: _no_val(_mib(v))),
        "mem-per-gpu": ("memory_per_tres", lambda v: f"gres/gpu:{_mib(v)}"),
        "time": ("time_limit", lambda v: _no_val(_minutes(v))),
        "time-min": ("time_minimum", lambda v: _no_val(_minutes(v))),
        "chdir": ("current_working_directory", _str), "output": ("standard_output", _str),
        "error": ("standard_error", _str), "input": ("standard_input", _str),
        "array": ("array", _str), "dependency": ("dependency", _str),
        "requeue": ("requeue", lambda v: True), "no-requeue": ("requeue", lambda v: False),
        "open-mode": ("open_mode", lambda v: [{"append": "APPEND", "truncate": "TRUNCATE"}[str(v).lower()]]),
        "mail-user": ("mail_user", _str), "mail-type": ("mail_type", _mail_type),
        # --exclusive[=user|mcs|topo] and --oversubscribe are one field, `shared` (JOB_SHARED_* in parsers.c)
        "exclusive": ("shared", lambda v: ["none" if v is None or v == "exclusive" else str(v)]),
        "exclusive-user": ("shared", lambda v: ["user"]), "oversubscribe": ("shared", lambda v: ["oversubscribe"]),
        "constraint": ("constraints", _str), "reservation": ("reservation", _str), "nice": ("nice", _int),
        "deadline": ("deadline", _str), "licenses": ("licenses", _str), "wckey": ("wckey", _str),
        "priority": ("priority", lambda v: _no_val(_int(v))), "hold": ("hold", _flag),
        "acctg-freq": ("account_gather_frequency", _str), "core-spec": ("core_specification", _int),
        "thread-spec": ("thread_specification", _int), "mcs-label": ("mcs_label", _str),
        "delay-boot": ("delay_boot", _int), "bb": ("burst_buffer", _str),
        "cluster-constraint": ("cluster_constraint", _str), "prefer": ("prefer", _str),
        "sockets-per-node": ("sockets_per_node", _int), "threads-per-core": ("threads_per_core", _int),
        "distribution": ("distribution", _str), "ntasks-per-core": ("tasks_per_core", _int),
        "ntasks-per-socket": ("tasks_per_socket", _int), "mincpus": ("minimum_cpus_per_node", _int),
        "gpu-freq": ("tres_freq", lambda v: f"gpu:{v}"), "gpu-bind": ("tres_bind", lambda v: f"gres/gpu:{v}"),
        "cpu-freq": ("cpu_frequency", _str), "container": ("container", _str),
        "nodelist": ("required_nodes", _str), "exclude": ("excluded_nodes", _str), "network": ("network", _str),
        "tmp": ("temporary_disk_per_node", _mib), "reboot": ("reboot", lambda v: True),
    }
    # Options that are bits of the job's `flags` list (sbatch sets the same bits).
    flag_options: ClassVar[dict[str, Convert]] = {"kill-on-invalid-dep": lambda v: "KILL_INVALID_DEPENDENCY" if _flag(v)
                    else "NO_KILL_INVALID_DEPENDENCY",
                    "spread-job": lambda v: "SPREAD_JOB", "use-min-nodes": lambda v: "PREFER_MINIMUM_NODE_COUNT",
                    "gres-flags": lambda v: {"enforce-binding": "GRES_BINDING_ENFORCED",
                                             "disable-binding": "GRES_BINDING_DISABLED"}[str(v)]}

    def set_option(self, job: dict[str, Any], key: str, value: str | None, problems: list[Problem]) -> None:
        if key == "signal":
            job.update(_kill_warning(value))
        elif key in ("cpus-per-task", "gpus-per-task"):
            # sbatch 23.11+ also sends --cpus-per-task as tres_per_task "cpu=N" (slurm_opt.c), which the job's
            # SLURM_TRES_PER_TASK and its steps inherit; the same here, so both backends make the same job.
            if key == "cpus-per-task":
                job["cpus_per_task"] = _int(value)
            entries = [e for e in str(job.get("tres_per_task", "")).split(",") if e]
            entries.append(f"cpu={_int(value)}" if key == "cpus-per-task" else f"gres/gpu:{value}")
            job["tres_per_task"] = ",".join(sorted(entries, key=lambda e: not e.startswith("cpu=")))
        elif key in self.flag_options:
            try:
                job.setdefault("flags", []).append(self.flag_options[key](value))
            except KeyError:
                raise ValueError("not expressible through slurmrestd (enforce-binding or disable-binding)") from None
        else:
            super().set_option(job, key, value, problems)

    def job_properties(self, request: SubmitRequest, environment: dict[str, str]) -> dict[str, Any]:
        job = super().job_properties(request, environment)
        # slurmrestd's job description starts with oom_kill_step 0, sbatch's with NO_VAL16 (observed on 25.11:
        # `scontrol show job` shows OOMKillStep=0 only for the REST job). 0 overrides the site's
        # TaskPluginParam=OOMKillStep (job_scheduler.c uses the site's only for NO_VAL16), so send NO_VAL16.
        job.setdefault("oom_kill_step", NO_VAL16)
        return job

    def environment(self, env: dict[str, str]) -> Any:
        return [f"{k}={v}" for k, v in env.items()]

    def task_id(self, rec: dict[str, Any]) -> int | None:
        return _number(rec.get("array_task_id"))

    def array_job_id(self, rec: dict[str, Any]) -> int | None:
        return _number(rec.get("array_job_id")) or None

    # job_state_string() (src/common/slurm_protocol_defs.c): these flags are what scontrol shows over the base.
    _SHOWN_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "EXPEDITING", "RESIZING", "REQUEUED", "REQUEUE_FED",
                    "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")

    def state(self, rec: dict[str, Any]) -> str:
        states = rec.get("job_state") or []
        if isinstance(states, str):
            return states
        shown = next((f for f in self._SHOWN_FLAGS if f in states), None)
        return shown or (states[0] if states else "")

    def time(self, rec: dict[str, Any], key: str) -> int:
        return _number(rec.get(key)) or 0

    def exit_code(self, rec: dict[str, Any]) -> str:
        code = rec.get("exit_code")
        if not isinstance(code, dict):
            return ""
        sig = (code.get("signal") or {}).get("id")
        return f"{_number(code.get('return_code')) or 0}:{_number(sig) or 0}"

    def log_paths(self, rec: dict[str, Any], task: str | None, array_job_id: str | None) -> tuple[str, str]:
        # stdout_expanded is slurmctld's own expansion, except for the collapsed pending record of an array
        # (observed: %a becomes 4294967294, NO_VAL-1), where the pattern is expanded here as for v0.0.38.
        if self.is_collapsed(rec) or not rec.get("stdout_expanded"):
            return super().log_paths(rec, task, array_job_id)
        stdout = str(rec["stdout_expanded"])
        return stdout, str(rec.get("stderr_expanded") or stdout)

    def cancel_complaint(self, status: int, doc: dict[str, Any]) -> str | None:
        failed = [str((s.get("error") or {}).get("string") or s) for s in doc.get("status") or []
                  if isinstance(s, dict)]
        words = "; ".join(messages(doc) + failed)
        return None if status == 200 and not words else words or f"HTTP {status}"

    def submit_notice_is_failure(self, doc: dict[str, Any]) -> str | None:
        # errors[] entries in a 200 answer with a source inside the job: a field slurmrestd could not parse and
        # dropped (observed: "Unknown signal" at #/job/kill_warning_signal/ while the job was created anyway).
        bad = [m for m, e in zip(messages(doc), doc.get("errors") or [], strict=True) if isinstance(e, dict)
               and str(e.get("source", "")).startswith("#/job")]
        return "; ".join(bad) or None


DIALECTS: dict[str, Dialect] = {"v0.0.38": V0038(), "v0.0.43": V004x("v0.0.43"), "v0.0.44": V004x("v0.0.44")}
SUPPORTED = tuple(DIALECTS)  # oldest first


def dialect(version: str) -> Dialect:
    return DIALECTS[version]
