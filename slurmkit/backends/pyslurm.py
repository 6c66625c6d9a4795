"""The pyslurm backend: submit, look up, cancel through pyslurm's bindings to libslurm (no fork/exec of sbatch).

pyslurm 25.11 needs a Slurm 25.11 installation (it links against that release's libslurm); pyslurm's version is
"<Slurm major>.<Slurm minor>.<pyslurm patch>" (pyslurm/version.py: "24.5.1" is built for Slurm 24.05), so a
pyslurm only works with the Slurm series it was built for. Tested with the real pyslurm 25.11.2 against the
devcluster's Slurm 25.11.7 (tests/integration/test_pyslurm_on_devcluster.py: same script, same `scontrol show job`
fields and same rank output as the cli backend); on Slurm 22.05 it cannot load and those tests skip.
Auto-detection (`backend: auto`) picks it only when pyslurm imports AND its series matches the running Slurm
(`sinfo -V`); otherwise the cli backend is used, which works with every Slurm.

Where pyslurm 25.11.2 differs from sbatch (each seen on the devcluster), description_kwargs compensates: the
environment is always an explicit dict, --signal is passed in pyslurm's dict form, ntasks is derived from
--nodes x --ntasks-per-node, and array task 0 is read back from pyslurm's "unset" (see _job_info). Left as is:
sbatch also records SubmitLine and TresPerTask=cpu=N, which pyslurm does not send.

The interface used, from pyslurm's documentation and source:
- https://pyslurm.github.io/24.11/reference/jobsubmitdescription  (the 25.11 reference has the same layout:
  https://pyslurm.github.io/25.11/reference/jobsubmitdescription): `JobSubmitDescription(**kwargs)` sets any
  documented attribute (name, account, partitions, qos, nodes, ntasks, ntasks_per_node, cpus_per_task,
  gres_per_node — also for --gpus-per-node —, memory_per_gpu, time_limit, working_directory, standard_output,
  standard_error, array, dependencies, signal "B:USR1@60", is_requeueable, log_files_open_mode, comment,
  script (path or content), environment ...); `.submit() -> int` job id, raising `pyslurm.RPCError`.
- https://pyslurm.github.io/24.11/reference/job: `pyslurm.Job.load(job_id)` (staticmethod, RPCError when
  unknown), `pyslurm.Jobs.load(preload_passwd_info=False, frozen=False)` (a collection; `.values()` are Jobs),
  `Job(job_id).cancel()`; Job attributes id, name, user_name, state, state_reason, exit_code, exit_code_signal,
  partition, allocated_nodes, run_time (s), standard_output, standard_error, comment, array_id, array_task_id.
- https://github.com/PySlurm/pyslurm/blob/main/pyslurm/core/job/submission.pyx (`_set_signal`, `_set_script`,
  `_validate_options`: cpus_per_gpu and cpus_per_task are mutually exclusive, a script must start with "#!").
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slurmkit.backends.base import Backend, CancelResult, JobQuery, cancel_each
from slurmkit.errors import BackendUnavailable, InputError, Problem
from slurmkit.job import JobInfo
from slurmkit.request import SubmitRequest, SubmitResult
from slurmkit.slurm import errors as slurm_errors
from slurmkit.slurm.jobs import me as slurm_me


def _flag(v: str | None) -> bool:
    return True if v is None else str(v).lower() not in ("no", "0", "false")


def _same(v: str | None) -> str | None:
    return v


def signal_dict(v: str | None) -> dict[str, Any]:
    """sbatch's --signal=[{R|B}:]SIG[@TIME] as pyslurm's dict form. pyslurm 25.11.2 parses the string form with
    signal.Signals["USR1"], which only knows "SIGUSR1", so "B:USR1@60" is refused ("Invalid Signal: USR1")."""
    import signal as _signal

    text = str(v or "")
    flags, _, rest = text.rpartition(":") if ":" in text else ("", "", text)
    sig, _, secs = rest.partition("@")
    num = int(sig) if sig.isdigit() else _signal.Signals[sig if sig.startswith("SIG") else f"SIG{sig}"].value
    out: dict[str, Any] = {"signal": num, "time": int(secs) if secs else 60}
    if "B" in flags.upper():
        out["batch_only"] = True
    if "R" in flags.upper():
        out["allow_reservation_overlap"] = True
    return out


# sbatch long option -> (JobSubmitDescription attribute, converter).
_OPTIONS: dict[str, tuple[str, Callable[[str | None], Any]]] = {
    "job-name": ("name", _same), "partition": ("partitions", _same), "account": ("account", _same),
    "qos": ("qos", _same), "nodes": ("nodes", _same), "ntasks": ("ntasks", int),
    "ntasks-per-node": ("ntasks_per_node", int), "cpus-per-task": ("cpus_per_task", int),
    "cpus-per-gpu": ("cpus_per_gpu", int), "gpus": ("gpus", _same),
    # pyslurm has no gpus_per_node: its docs say to use gres_per_node ("gpu:a100:8") for --gpus-per-node.
    "gpus-per-node": ("gres_per_node", lambda v: f"gpu:{v}"), "gres": ("gres_per_node", _same),
    "gpus-per-task": ("gpus_per_task", _same), "gpus-per-socket": ("gpus_per_socket", _same),
    "ntasks-per-gpu": ("ntasks_per_gpu", int), "mem": ("memory_per_node", _same),
    "mem-per-cpu": ("memory_per_cpu", _same), "mem-per-gpu": ("memory_per_gpu", _same),
    "time": ("time_limit", _same), "time-min": ("time_limit_min", _same),
    "chdir": ("working_directory", _same), "output": ("standard_output", _same),
    "error": ("standard_error", _same), "input": ("standard_in", _same), "array": ("array", _same),
    "dependency": ("dependencies", _same), "signal": ("signal", signal_dict),
    "requeue": ("is_requeueable", lambda v: True), "no-requeue": ("is_requeueable", lambda v: False),
    "open-mode": ("log_files_open_mode", _same), "mail-user": ("mail_user", _same),
    "mail-type": ("mail_types", _same),
    "exclusive": ("resource_sharing", lambda v: "exclusive" if v is None else str(v)),
    "exclusive-user": ("resource_sharing", lambda v: "user"),
    "oversubscribe": ("resource_sharing", lambda v: "oversubscribe"),
    "constraint": ("constraints", _same), "reservation": ("reservations", _same), "nice": ("nice", int),
    "begin": ("begin_time", _same), "deadline": ("deadline", _same), "licenses": ("licenses", _same),
    "exclude": ("excluded_nodes", _same), "nodelist": ("required_nodes", _same), "switches": ("switches", _same),
    "network": ("network", _same), "tmp": ("temporary_disk_per_node", _same), "wckey": ("wckey", _same),
    "priority": ("priority", int), "hold": ("priority", lambda v: 0),  # pyslurm: priority 0 == sbatch --hold
    "kill-on-invalid-dep": ("kill_on_invalid_dependency", _flag), "gres-flags": ("gres_binding", _same),
    "acctg-freq": ("accounting_gather_frequency", _same), "core-spec": ("cores_reserved_for_system", int),
    "thread-spec": ("threads_reserved_for_system", int), "mcs-label": ("mcs_label", _same),
    "clusters": ("clusters", _same), "uid": ("user_id", _same), "gid": ("group_id", _same),
    "get-user-env": ("get_user_environment", _flag), "spread-job": ("spreads_over_nodes", _flag),
    "use-min-nodes": ("use_min_nodes", _flag), "delay-boot": ("delay_boot_time", _same),
    "cluster-constraint": ("cluster_constraints", _same), "sockets-per-node": ("sockets_per_node", int),
    "threads-per-core": ("threads_per_core", int), "cores-per-socket": ("cores_per_socket", int),
    "distribution": ("distribution", _same), "ntasks-per-core": ("ntasks_per_core", int),
    "ntasks-per-socket": ("ntasks_per_socket", int), "mincpus": ("min_cpus_per_node", int),
    "container": ("container", _same), "gpu-bind": ("gpu_binding", _same), "reboot": ("requires_node_reboot", _flag),
    "profile": ("profile_types", _same),
}


def description_kwargs(request: SubmitRequest, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """JobSubmitDescription keyword arguments for a request (the tag goes into the job comment)."""
    kwargs: dict[str, Any] = {}
    problems = []
    for key, value in request.options.items():
        if key not in _OPTIONS:
            problems.append(Problem(f"--{key} has no pyslurm JobSubmitDescription attribute",
                                    key=f"sbatch_extra.{key}", hint="use --backend cli, or drop the option"))
            continue
        attr, convert = _OPTIONS[key]
        try:
            kwargs[attr] = convert(value)
        except (ValueError, KeyError) as exc:
            problems.append(Problem(f"--{key}={value}: {exc}", key=key))
    if problems:
        raise InputError(problems)
    # pyslurm defaults ntasks to 1 where sbatch derives it from --nodes x --ntasks-per-node; a 2-node job with
    # 8 tasks per node and ntasks 1 is refused ("Requested node configuration is not available").
    if "ntasks" not in kwargs and "ntasks_per_node" in kwargs and str(kwargs.get("nodes", "1")).isdigit():
        kwargs["ntasks"] = int(kwargs.get("nodes", 1)) * kwargs["ntasks_per_node"]
    kwargs["comment"] = f"sk:{request.tag}"
    kwargs["script"] = request.script
    kwargs.setdefault("working_directory", request.workdir)
    # Always an explicit dict, as sbatch's default --export=ALL would send: pyslurm 25.11.2's own "ALL" (its default)
    # merges libslurm's `environ`, which arrives empty, and slurmctld then refuses the job ("batch job cannot run
    # without an environment", seen on the devcluster). The dict form adds the caller's SLURM_* variables itself.
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if not k.startswith("SLURM_")}
    kwargs["environment"] = {**env, **request.environment}
    return kwargs


def _series(text: str) -> tuple[int, int] | None:
    """'slurm 25.11.2' / '25.11.2' / '24.5.1' -> (25, 11) / (25, 11) / (24, 5)."""
    m = re.search(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@functools.cache
def _sinfo_version() -> str | None:
    """The running Slurm's `sinfo -V`, once per process (auto-selection and the backend's import both ask)."""
    try:
        out = subprocess.run(["sinfo", "-V"], capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@dataclass
class Detection:
    usable: bool
    reason: str
    pyslurm_version: str | None = None
    slurm_version: str | None = None


def _installed_version(name: str) -> str | None:
    """The installed distribution's version, from the name of the dist-info beside the package (a directory
    listing: importing importlib.metadata is ~20 ms of a fresh `sk submit`); importlib.metadata otherwise."""
    spec = importlib.util.find_spec(name)
    if spec is not None and spec.origin:
        site = os.path.dirname(os.path.dirname(spec.origin))  # .../site-packages/<name>/__init__.py
        with contextlib.suppress(OSError):
            for entry in os.listdir(site):
                if entry.startswith(f"{name}-") and entry.endswith(".dist-info"):
                    return entry[len(name) + 1:-len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def detect(*, find_spec: Callable = importlib.util.find_spec, import_module: Callable = importlib.import_module,
           installed_version: Callable[[str], str | None] = _installed_version,
           slurm_version: Callable[[], str | None] = _sinfo_version) -> Detection:
    """Can the pyslurm backend be used here?

    The series is compared BEFORE pyslurm is imported: importing it loads libslurm, which reads slurm.conf at load
    time, and a libslurm of another release that meets a config it cannot parse calls fatal() -> exit(1) in the
    importing process (seen in CI: pyslurm 25.11 under Slurm 22.05 ended the whole pytest run). So: find_spec (no
    import), the installed distribution's version (metadata, no import), `sinfo -V`, and only on a match the import.
    """
    if find_spec("pyslurm") is None:
        return Detection(False, "pyslurm is not installed")
    pv = installed_version("pyslurm") or ""
    sv = slurm_version()
    if sv is None:
        return Detection(False, "sinfo -V failed: cannot tell which Slurm is running", pv or None)
    if _series(pv) is None or _series(pv) != _series(sv):
        built = ".".join(map(str, _series(pv) or ())) or "an unknown Slurm release"
        return Detection(False, f"pyslurm {pv or '(version unknown)'} is built for Slurm {built}, "
                         f"but the running Slurm is {sv}; not imported (its libslurm would exit on this "
                         "Slurm's config)", pv or None, sv)
    try:
        import_module("pyslurm")
    except Exception as exc:  # ImportError, or libslurm missing (OSError from the dynamic loader)
        return Detection(False, f"pyslurm does not import: {exc}", pv, sv)
    return Detection(True, f"pyslurm {pv} matches {sv}", pv, sv)


def _job_info(job: Any) -> JobInfo:
    jid = str(job.id)
    array_job_id = task = None
    if job.array_id:
        array_job_id = str(job.array_id)
        waiting = getattr(job, "array_tasks_waiting", None)
        if job.array_task_id is not None:
            task = str(job.array_task_id)
        elif not waiting:
            task = "0"  # pyslurm 25.11 reads every 0 as "unset" (u32_parse), task 0 included
        # Slurm's collapsed pending record keeps its "123_[4-9]" form, one entry (see base.py).
        jid = f"{job.array_id}_{task}" if task is not None else f"{job.array_id}_[{waiting}]"
    secs = int(job.run_time or 0)
    h, rem = divmod(secs, 3600)
    elapsed = f"{h:02d}:{rem // 60:02d}:{rem % 60:02d}"
    return JobInfo(jid, _text(job, "name") or "", job.user_name or "", job.state or "", job.state_reason or "",
                   f"{job.exit_code or 0}:{job.exit_code_signal or 0}", job.partition or "",
                   job.allocated_nodes or "", elapsed, _text(job, "standard_output") or None,
                   _text(job, "standard_error") or None, _text(job, "comment") or None,
                   array_job_id=array_job_id, array_task=task)


def _text(job: Any, attr: str) -> str | None:
    """A user-chosen text of the job. Slurm lets it hold bytes that are not UTF-8 and pyslurm's getter then
    raises UnicodeDecodeError (utils/cstr.pyx to_unicode), which would stop the listing of every job for one
    user's job name; the error holds the bytes, so the text is theirs with U+FFFD for each byte that is not."""
    try:
        return getattr(job, attr)
    except UnicodeDecodeError as exc:
        return bytes(exc.object).decode("utf-8", errors="replace")


def _load_one(ps: Any, job_id: int) -> Any:
    """pyslurm's Job.load(id), or None where the controller does not hold it any more.

    Job.load also loads the job's steps and indexes slurmctld's answer by this id (JobSteps._load_single:
    data[job.id]); for an array task slurmctld may answer with the steps of the array's other tasks only, and
    pyslurm 25.11 then raises KeyError (seen on the devcluster while an array ran). No step is read here, so the
    record comes from Jobs.load, which loads none."""
    try:
        return ps.Job.load(job_id)
    except KeyError:
        return next((j for j in ps.Jobs.load().values() if j.id == job_id), None)


class PyslurmBackend(Backend):
    name = "pyslurm"

    def __init__(self, module: Any = None):
        self._module = module

    @property
    def pyslurm(self) -> Any:
        if self._module is None:
            d = detect()  # never imports a pyslurm of another Slurm series (its libslurm would exit the process)
            if not d.usable:
                raise BackendUnavailable(d.reason, hint="pyslurm works only with the Slurm series it was built "
                                         "for (pip install pyslurm==<series>.*); use --backend cli")
            self._module = importlib.import_module("pyslurm")
        return self._module

    def _rpc(self, exc: Exception) -> Exception:
        # pyslurm.RPCError carries Slurm's own message (slurm_strerror), the same text sbatch prints.
        return slurm_errors.error(str(exc))

    def describe(self, request: SubmitRequest, *, test_only: bool = False) -> str:
        kwargs = description_kwargs(request)
        kwargs["script"] = "<the script below>"
        return f"pyslurm.JobSubmitDescription(**{kwargs!r}).submit()"

    def submit(self, request: SubmitRequest, *, test_only: bool = False) -> SubmitResult:
        if test_only:
            raise InputError(Problem("pyslurm has no --test-only submission", key="--test-only",
                                     hint="use --backend cli --test-only"))
        ps = self.pyslurm
        try:
            desc = ps.JobSubmitDescription(**description_kwargs(request))
            job_id = desc.submit()
        except ps.RPCError as exc:
            raise self._rpc(exc) from exc
        except (ValueError, TypeError) as exc:  # pyslurm validates before the RPC (e.g. exclusive options)
            raise InputError(Problem(f"pyslurm refused the job description: {exc}")) from exc
        return SubmitResult(job_id=int(job_id), backend=self.name)

    def find_by_tag(self, tag: str) -> int | None:
        ps = self.pyslurm
        try:
            jobs = ps.Jobs.load()
        except ps.RPCError as exc:
            raise self._rpc(exc) from exc
        for job in jobs.values():
            if job.comment == f"sk:{tag}":
                return int(job.array_id or job.id)
        return None

    def _job(self, job_id: str) -> list[JobInfo]:
        """One job, or every task of an array ("123"), or one task ("123_4"). Job.load gives only the record
        whose id it is asked for (for an array: one task), so an array's tasks come from Jobs.load."""
        ps = self.pyslurm
        base, _, task = job_id.partition("_")
        try:
            job = _load_one(ps, int(base))
            if job is None:
                return []
            if not job.array_id and not task:
                return [_job_info(job)]
            array = job.array_id or int(base)
            found = [_job_info(j) for j in ps.Jobs.load().values() if j.array_id == array]
        except ps.RPCError as exc:
            if slurm_errors.classify(str(exc)) == "not-found":
                return []
            raise self._rpc(exc) from exc
        return [j for j in found if not task or j.array_task == task]

    def jobs(self, query: JobQuery) -> list[JobInfo]:
        # The controller's jobs only (pyslurm.db is not read): a job that left it (MinJobAge) is absent.
        self.limitations = ["pyslurm backend: finished jobs are shown only while the controller holds them "
                            "(MinJobAge); accounting is not read"] if query.finished else []
        if query.ids:
            found = [j for job_id in query.ids for j in self._job(str(job_id))]
        else:
            ps = self.pyslurm
            try:
                loaded = ps.Jobs.load()
            except ps.RPCError as exc:
                raise self._rpc(exc) from exc
            me = slurm_me()
            found = [_job_info(j) for j in loaded.values()
                     if query.user == "*" or j.user_name == (query.user or me)]
            found = [j for j in found if query.name is None or j.name == query.name]
        return [j for j in found if query.finished or not j.terminal]

    def cancel(self, ids) -> list[CancelResult]:
        return cancel_each(ids, self._job, self._cancel_one)

    def _cancel_one(self, job_id: str) -> str | None:
        ps = self.pyslurm
        try:
            ps.Job(int(job_id.split("_")[0])).cancel()
        except ps.RPCError as exc:
            return str(exc)
        return None
