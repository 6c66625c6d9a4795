"""`sk hook jobcomp|prolog|epilog`: run by Slurm, dispatched without click (slurmkit/cli/__init__.py).

Fast config path: the hook never loads the YAML site config. It reads SK_SPOOL (spool directory) from the
environment, which the hook wrapper exports (contrib/slurm/sk-hook); default /var/spool/slurmkit. The node
hooks (prolog/epilog: the per-job GPU sampler) read their settings the same way (slurmkit/accounting/sampler.py).
Every recoverable problem is logged to stderr and the hook exits 0 (Slurm only logs the exit code, and a
failing Prolog/Epilog would drain the node). The record is never lost: if scontrol fails, the record is
written from the environment alone and flagged `no-scontrol`; `sk admin reconcile` completes it later.
"""

from __future__ import annotations

import os
import sys
import time

from slurmkit import record
from slurmkit.accounting import spool
from slurmkit.slurm import fields, scontrol

TYPE_CHECKING = False  # typing's constant without importing typing (~5 ms of every hook)
if TYPE_CHECKING:
    from slurmkit.accounting.sampler import NodeConfig

DEFAULT_SPOOL = "/var/spool/slurmkit"


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v not in (None, "") else None
    except ValueError:
        return None


# JOBSTATE of a run that ended in a requeue: Slurm 22.05 passes the job's state at that moment (PENDING, or a
# REQUEUE* state) and has already incremented the restart count (seen on the devcluster: both runs of a requeued
# job read Restarts=1), so that run is Restarts - 1.
_REQUEUED = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT"}


def _slurm_time(epoch: int) -> set[str]:
    """The ways scontrol may print `epoch` (+-1 s): local ISO time, or epoch digits under SLURM_TIME_FORMAT=%s."""
    fmt = "%Y-%m-%dT%H:%M:%S"
    return {s for t in (epoch - 1, epoch, epoch + 1) for s in (time.strftime(fmt, time.localtime(t)), str(t))}


def _same_run(env: dict[str, str], show: dict[str, str], requeued: bool) -> bool:
    """Whether `scontrol show job` still describes the run this record is about. scontrol answers with the job's
    *current* run: after a requeue its SubmitTime is the requeue time (= the end of the requeued run), but while
    the requeued run is still COMPLETING (its epilogs running) it shows that run's own SubmitTime with Restarts
    already counted (seen on the devcluster under load). When the job was requeued again before this hook ran,
    nothing matches and the run number is a guess."""
    submit = show.get("SubmitTime", "")
    moment = _int(env.get("END") if requeued else env.get("SUBMIT"))
    if moment is not None and submit in _slurm_time(moment):
        return True
    own = _int(env.get("SUBMIT"))
    return requeued and own is not None and show.get("JobState") == "COMPLETING" and submit in _slurm_time(own)


def jobcomp_record(env: dict[str, str], show: dict[str, str] | None) -> dict:
    """One complete job record from the jobcomp variables (Slurm 22.05) plus `scontrol show job -o`.

    A run that never started (cancelled while pending) gets no start time and no allocation: scontrol's TRES of
    a pending job is the request, and sacct reports no AllocTRES for it either.
    """
    flags = []
    state = env.get("JOBSTATE")
    requeued = state in _REQUEUED
    array_task = _int(env.get("ARRAYTASKID"))
    if array_task == fields.NOT_ARRAY:
        array_task = None
    # ARRAYJOBID is 0 for a job that is not an array; the record of an array's never-started tasks has the
    # array id and no task id (sacct shows it as 129_[0-4]).
    array_job = _int(env.get("ARRAYJOBID")) or None
    started = bool(env.get("NODES"))
    rec = {
        "version": record.JOB_VERSION, "kind": record.JOB_KIND,
        "cluster": env.get("CLUSTER", ""), "job_id": _int(env.get("JOBID")),
        "array_job_id": array_job, "array_task_id": array_task,
        "het_job_id": _int(env.get("HETJOBID")), "het_job_offset": _int(env.get("HETJOBOFFSET")),
        "job_name": env.get("JOBNAME"), "user_name": env.get("USERNAME"), "uid": _int(env.get("UID")),
        "account": env.get("ACCOUNT"), "partition": env.get("PARTITION"), "qos": env.get("QOS"),
        "state": "REQUEUED" if requeued else state, "exit_code": fields.exit_code(env.get("EXITCODE")),
        "submit_time": _int(env.get("SUBMIT")), "start_time": _int(env.get("START")) if started else None,
        "end_time": _int(env.get("END")), "nodes": env.get("NODES") or None,
        "node_count": _int(env.get("NODECNT")) if started else 0, "cpus": _int(env.get("PROCS")) if started else 0,
        "gpus": 0, "gpu_types": None, "tres": None, "run": 0, "elapsed_s": 0,
    }
    if show:
        if started:
            # Slurm 22.05 prints the allocation as TRES=; 25.11 prints ReqTRES= and AllocTRES= instead
            # (src/scontrol/info_job.c), and no TRES=.
            alloc = show.get("AllocTRES") or show.get("TRES") or ""
            rec["tres"] = alloc or None
            rec["gpus"], types = fields.parse_gpu_tres(alloc)
            rec["gpu_types"] = ",".join(types) or None
        restarts = _int(show.get("Restarts")) or 0
        rec["run"] = max(0, restarts - 1) if requeued else restarts
        if not _same_run(env, show, requeued):
            flags.append("run-uncertain")  # sk admin reconcile renumbers it from sacct (matched by start time)
        rec["qos"] = rec["qos"] or show.get("QOS")
    else:
        flags.append("no-scontrol")  # no allocation, run unknown: sk admin reconcile completes it from sacct
    if rec["start_time"] and rec["end_time"]:
        rec["elapsed_s"] = max(0, rec["end_time"] - rec["start_time"])
    rec["flags"] = ",".join(flags) or None
    rec["source"] = "jobcomp"
    return record.storable(rec)  # a job name with bytes that are not UTF-8 is written as \xNN, not refused


def jobcomp(env: dict[str, str]) -> int:
    show = None
    job_id = _int(env.get("JOBID"))
    if job_id is None:
        print("sk hook jobcomp: JOBID is not set; not run by Slurm?", file=sys.stderr)
        return 0
    try:
        show = scontrol.show_job(job_id)
    except Exception as exc:
        print(f"sk hook jobcomp: scontrol show job {job_id} failed ({exc}); record flagged", file=sys.stderr)
    rec = jobcomp_record(env, show)
    name = f"job-{rec['cluster']}-{job_id}-{rec['run']}-{time.time_ns()}"
    spool_dir = env.get("SK_SPOOL") or DEFAULT_SPOOL
    try:
        spool.write(spool_dir, name, rec)
    except OSError as exc:
        # Nothing durable is left to write to: put the record in the hook log (the wrapper keeps stderr) so it
        # can be re-spooled by hand; `sk admin reconcile` recovers the job from sacct in any case.
        import json

        print(f"sk hook jobcomp: cannot spool job {job_id} into {spool_dir} ({exc}); record: "
              f"{json.dumps(rec, sort_keys=True)}", file=sys.stderr)
    return 0


def _node_job(hook: str, env: dict[str, str]):
    """(config, job run) of a node hook, or None when Slurm's variables are unusable (logged)."""
    from slurmkit.accounting import sampler

    cfg = sampler.NodeConfig.from_env(env)
    for problem in cfg.problems:
        print(f"sk hook {hook}: {problem}", file=sys.stderr)
    try:
        return cfg, sampler.JobRun.from_env(env)
    except ValueError as exc:
        print(f"sk hook {hook}: {exc}", file=sys.stderr)
        return None


def prolog(env: dict[str, str]) -> int:
    """Start the job's GPU sampler on this node (detached; returns in milliseconds). No GPUs here: nothing."""
    from slurmkit.accounting import sampler

    got = _node_job("prolog", env)
    if got and got[1].gpus:
        cfg, job = got
        if not sampler.alive(sampler.job_dir(cfg, job)):
            sampler.start_detached(cfg, job)
    if got:
        sweep_orphans(got[0], got[1].node)
    return 0


def sweep_orphans(cfg: NodeConfig, node: str) -> int:
    """Deliver what jobs that died with the node had sampled: their run directories predate this boot and no
    epilog will come for them. Flagged `node-rebooted`; the job's own record comes from the controller (jobcomp,
    or sk admin reconcile). Returns how many were delivered. A few stat calls when there are none."""
    from slurmkit.accounting import sampler

    booted = sampler.boot_time()
    if booted is None:
        return 0
    orphans = sampler.claim_orphans(cfg, node, booted)
    for path, name, last in orphans:
        try:
            cluster, job_id, run = sampler.parse_run_name(name)
        except ValueError:
            print(f"sk hook prolog: {path}: not a run directory (<cluster>-<job>-<run>); left as it is",
                  file=sys.stderr)
            continue
        _deliver_dir(cfg, path, cluster=cluster, job_id=job_id, run=run, node=node, gpus=[], stopped=None,
                     flags=["node-rebooted"], ended=last)
    return len(orphans)


def epilog(env: dict[str, str]) -> int:
    """Stop the job's sampler, summarize per GPU and deliver the node record; flagged records when the sampler
    is missing, crashed or had no source, so an allocated GPU is never silently absent."""
    from slurmkit.accounting import gpusummary, sampler, transport

    got = _node_job("epilog", env)
    if not got:
        return 0
    cfg, job = got
    transport.flush_undelivered(cfg, job.node)
    configured = "nvml" if cfg.source == "auto" else cfg.source
    dirs = sampler.job_dirs(cfg, job)
    if not dirs and job.gpus:
        rec = gpusummary.node_record(cluster=job.cluster, job_id=job.job_id, run=job.run, node=job.node,
                                     source=configured, interval_s=cfg.interval_s,
                                     gpus=gpusummary.empty_gpus(job.gpus), flags=["no-sampler"])
        transport.deliver(cfg, rec)
    for d in dirs:
        _deliver_dir(cfg, d, cluster=job.cluster, job_id=job.job_id, run=sampler.run_of(d), node=job.node,
                     gpus=job.gpus, stopped=sampler.stop(d))
    return 0


def _deliver_dir(cfg: NodeConfig, d: str, *, cluster: str, job_id: int, run: int, node: str, gpus: list[int],
                 stopped: str | None, flags: tuple[str, ...] | list[str] = (), ended: float | None = None) -> None:
    """Summarize one run directory per GPU, deliver the node record and remove the directory. `gpus`: the
    allocation, for a directory without meta.json; `stopped`: sampler.stop's flag."""
    import shutil

    from slurmkit.accounting import gpusummary, sampler, transport

    configured = "nvml" if cfg.source == "auto" else cfg.source
    flags = list(flags)
    meta, lines, error = sampler.read_state(d)
    if error:
        flags.append("source-unavailable")
    elif stopped:
        flags.append(stopped)
    if meta and "recording" in meta:  # a summary source (DCGM): the host engine kept the numbers
        summary, more, error = _finish_recording(meta)
        flags += more
        source, interval = meta["source"], meta["interval_s"]
    else:
        if not lines:
            flags.append("no-samples")
        if meta:
            summary, source, interval = gpusummary.summarize(meta, lines), meta["source"], meta["interval_s"]
        else:
            summary, source, interval = gpusummary.empty_gpus(gpus), configured, cfg.interval_s
    rec = gpusummary.node_record(cluster=cluster, job_id=job_id, run=run, node=node, source=source,
                                 interval_s=interval, gpus=summary, flags=flags, started=(meta or {}).get("started"),
                                 note=error, ended=ended)
    transport.deliver(cfg, rec)
    shutil.rmtree(d, ignore_errors=True)


def _finish_recording(meta: dict) -> tuple[list[dict], list[str], str | None]:
    """(gpus, flags, note) from a summary source; its failure gives the allocation without numbers, flagged."""
    from slurmkit.accounting import gpusummary
    from slurmkit.accounting.metrics import SourceUnavailable, finish_recording

    try:
        return finish_recording(meta)
    except SourceUnavailable as exc:
        return gpusummary.empty_gpus([g["index"] for g in meta["gpus"]]), ["source-unavailable"], str(exc)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: sk hook jobcomp|prolog|epilog   (run by Slurm; see contrib/slurm/README.md)")
        return 0 if argv else 2
    env = dict(os.environ)
    try:
        if argv[0] == "jobcomp":
            return jobcomp(env)
        if argv[0] == "prolog":
            return prolog(env)
        if argv[0] == "epilog":
            return epilog(env)
    except Exception as exc:
        print(f"sk hook {argv[0]}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    print(f"sk hook: unknown hook {argv[0]!r} (expected jobcomp, prolog or epilog)", file=sys.stderr)
    return 2
