"""`sk report job JOBID`: one job's GPUs, one row each, and a verdict a user understands."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slurmkit.errors import InputError, JobNotFound, Problem
from slurmkit.quoting import for_terminal
from slurmkit.record import BY_SOURCE, GPU_REPORT_COLUMNS, IDLE_UTIL_PCT
from slurmkit.report.query import Scope
from slurmkit.store.db import Store

LOW_UTIL_PCT = 30.0  # below this (and above idle) a GPU is "underused"
_JOBREF = re.compile(r"^(\d+)(?:_(\d+))?$")

JOB_COLS = ("cluster", "job_id", "run", "array_job_id", "array_task_id", "job_name", "user_name", "account",
            "partition", "state", "submit_time", "start_time", "end_time", "gpus", "gpu_types", "nodes")


@dataclass
class JobRun:
    job: dict[str, Any]
    gpus: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hours(self) -> float:
        j = self.job
        if j["start_time"] is None or j["end_time"] is None:
            return 0.0
        return (j["end_time"] - j["start_time"]) / 3600


def _measured(run: JobRun) -> list[dict[str, Any]]:
    return [g for g in run.gpus if g["util_mean"] is not None]


def verdict_counts(run: JobRun, idle_pct: float = IDLE_UTIL_PCT) -> tuple[int, int]:
    """(idle GPUs, GPUs with metrics) of one run."""
    measured = _measured(run)
    return sum(g["util_mean"] < idle_pct for g in measured), len(measured)


def verdict(run: JobRun, idle_pct: float = IDLE_UTIL_PCT) -> str:
    """'3 of 4 GPUs were idle ...' in words; unknown stays unknown."""
    allocated = int(run.job["gpus"] or 0)
    measured = _measured(run)
    if allocated == 0:
        return "this job had no GPUs allocated"
    if not measured:
        return f"no GPU metrics were recorded for this job's {allocated} GPU(s): utilization is unknown"
    idle = [g for g in measured if g["util_mean"] < idle_pct]
    low = [g for g in measured if idle_pct <= g["util_mean"] < LOW_UTIL_PCT]
    mean = sum(g["util_mean"] for g in measured) / len(measured)
    parts = []
    if idle:
        parts.append(f"{len(idle)} of {len(measured)} GPUs were idle (mean utilization below {idle_pct:g} %)")
    if low:
        parts.append(f"{len(low)} of {len(measured)} GPUs were underused (below {LOW_UTIL_PCT:g} %)")
    if not parts:
        parts.append(f"all {len(measured)} GPUs were busy")
    text = "; ".join(parts) + f"; mean utilization {mean:.1f} %"
    if len(measured) < allocated:
        text += f"; {allocated - len(measured)} of {allocated} allocated GPUs have no metrics"
    if any(g["source"] in BY_SOURCE and not BY_SOURCE[g["source"]].real for g in measured):
        text += " [SIMULATED metrics, not measured on real GPUs]"
    return text


def parse_ref(ref: str) -> str:
    """A job id (1234) or an array task (1234_7), stripped; anything else is a usage error."""
    if not _JOBREF.match(ref.strip()):
        raise InputError(Problem(f"not a job id: {ref!r}", key="JOBID", hint="e.g. 1234 or 1234_7 (array task)"))
    return ref.strip()


def load_job(store: Store, ref: str, scope: Scope) -> list[JobRun]:
    """Every run of job `ref`, visible to `scope`: a job id (an array's id: every task of the array, in task order),
    or ARRAYID_TASK."""
    m = _JOBREF.match(parse_ref(ref))
    assert m is not None
    if m.group(2) is None:
        where, params = "job_id = ? OR array_job_id = ?", [int(m.group(1))] * 2
    else:
        where, params = "array_job_id = ? AND array_task_id = ?", [int(m.group(1)), int(m.group(2))]
    cur = store.execute(f"SELECT {', '.join(JOB_COLS)} FROM jobs WHERE {where} "
                        "ORDER BY cluster, array_task_id, run", params)
    jobs = [dict(zip(JOB_COLS, row, strict=False)) for row in cur.fetchall()]
    hidden = [j for j in jobs if not scope.everyone and j["user_name"] != scope.user]
    jobs = [j for j in jobs if j not in hidden]
    if not jobs:
        extra = " (or it belongs to another user: you see only your own jobs)" if hidden or not scope.everyone \
            else ""
        raise JobNotFound(f"job {ref} is not in the accounting store{extra}",
                          hint="the store has jobs once they have ended and been ingested (sk admin ingest)")
    runs = []
    for j in jobs:
        cur = store.execute(f"SELECT {', '.join(GPU_REPORT_COLUMNS)} FROM job_gpus WHERE cluster = ? AND job_id = ? "
                            "AND run = ? ORDER BY node, gpu_index", [j["cluster"], j["job_id"], j["run"]])
        runs.append(JobRun(j, [dict(zip(GPU_REPORT_COLUMNS, row, strict=False)) for row in cur.fetchall()]))
    return runs


def _f(v: Any, spec: str = ".1f") -> str:
    return "-" if v is None else format(v, spec)


def render(runs: list[JobRun], fmt_time, more: Callable[[JobRun], list[str]] | None = None) -> str:
    """The runs as text; `more` adds lines after each run's verdict (the sacct path's seff figures)."""
    out = []
    for r in runs:
        # users' values reach a terminal: no control characters (the JSON keeps them raw)
        j = {k: for_terminal(v) if isinstance(v, str) else v for k, v in r.job.items()}
        head = f"job {j['job_id']}"
        if j["array_job_id"] is not None and j["array_task_id"] is not None:
            head += f" (array {j['array_job_id']}_{j['array_task_id']})"
        if j["run"]:
            head += f", run {j['run']} (requeued)"
        out.append(f"{head} on {j['cluster']}: {j['job_name'] or '-'}, user {j['user_name']}, account "
                   f"{j['account']}, partition {j['partition']}, {j['state']}")
        start = fmt_time(j["start_time"]) if j["start_time"] else "-"
        end = fmt_time(j["end_time"]) if j["end_time"] else "-"
        out.append(f"  {j['gpus']} GPU(s) {j['gpu_types'] or ''} on {j['nodes'] or '-'}, {start} to {end} "
                   f"({r.hours:.2f} h, {r.hours * (j['gpus'] or 0):.2f} GPU-h)")
        out.append(f"  verdict: {verdict(r)}")
        if more is not None:
            out.extend(more(r))
        if r.gpus:
            out.append(f"  {'node':<12} {'gpu':>3} {'util %':>7} {'max %':>6} {'idle %':>6} {'mem max/total MiB':>18} "
                       f"{'energy kJ':>9}  source")
            for g in r.gpus:
                mem = f"{_f(g['mem_max_mib'], 'd')}/{_f(g['mem_total_mib'], 'd')}"
                idle = None if g["idle_fraction"] is None else g["idle_fraction"] * 100
                energy = None if g["energy_j"] is None else g["energy_j"] / 1000
                node, source = for_terminal(g["node"]), for_terminal(g["source"])
                out.append(f"  {node:<12} {g['gpu_index']:>3} {_f(g['util_mean']):>7} {_f(g['util_max']):>6} "
                           f"{_f(idle):>6} {mem:>18} {_f(energy):>9}  {source}")
    total = total_line(runs)
    if total:
        out.append(total)
    return "\n".join(out)


def total_line(runs: list[JobRun]) -> str | None:
    """The sum over an array's tasks (or a requeued job's runs), when there is more than one run."""
    if len(runs) < 2:
        return None
    states = Counter(r.job["state"] for r in runs)
    gpu_h = sum(r.hours * (r.job["gpus"] or 0) for r in runs)
    counts = [verdict_counts(r) for r in runs]
    idle, measured = sum(c[0] for c in counts), sum(c[1] for c in counts)
    per_state = ", ".join(f"{n} {state}" for state, n in sorted(states.items()))
    return (f"total: {len(runs)} runs ({per_state}), {gpu_h:.2f} GPU-h, {idle} of {measured} measured GPUs idle")


def as_dict(runs: list[JobRun]) -> list[dict[str, Any]]:
    return [{**r.job, "hours": r.hours, "verdict": verdict(r), "gpus_detail": r.gpus} for r in runs]
