"""Which jobs left GPUs idle: running jobs from the node samplers' live files, finished ones from the store.

One idle threshold: IDLE_UTIL_PCT, the one the sampler's idle_fraction and the reports use. A running job's GPU
has been idle for the time since its last reading at or above the threshold (the same weighting as
slurmkit/accounting/gpusummary.py: each reading stands for the time since the previous one, the first for one
interval); a reading without a utilization value ends the streak (unknown is never idle). A finished job's GPU
is idle when its job-mean utilization is below the threshold (as `sk report job` says), idle for
idle_fraction x the run's time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from slurmkit.accounting import gpusummary, sampler
from slurmkit.report.figures import IDLE_UTIL_PCT
from slurmkit.store.db import Store


@dataclass
class IdleGpu:
    node: str
    index: int  # Slurm's (NVML) index on that node
    idle_s: float  # running: the current idle stretch; finished: idle_fraction x run time
    util_mean: float | None  # over the run so far (running) or the whole run (finished)
    uuid: str | None = None


@dataclass
class IdleJob:
    """One job run with idle GPUs, as the notice describes it."""

    cluster: str
    job_id: int
    run: int
    phase: str  # "running" | "finished"
    user: str | None
    gpus: int  # allocated, all nodes
    idle: list[IdleGpu]
    job_name: str | None = None
    state: str | None = None
    array_job_id: int | None = None
    array_task_id: int | None = None
    partition: str | None = None
    nodes: str | None = None
    start_time: int | None = None
    end_time: int | None = None
    source: str | None = None  # metric source: simulated numbers are never passed off as measured

    @property
    def key(self) -> tuple[str, int, int]:
        return self.cluster, self.job_id, self.run

    @property
    def ref(self) -> str:
        """The id its owner knows: 123_4 for an array task (with its own job id in the text), else the job id."""
        if self.array_job_id is not None and self.array_task_id is not None:
            return f"{self.array_job_id}_{self.array_task_id}"
        return str(self.job_id)

    @property
    def idle_s(self) -> float:
        return max((g.idle_s for g in self.idle), default=0.0)

    def as_dict(self) -> dict:
        return {**asdict(self), "ref": self.ref, "idle_s": self.idle_s}


def trailing_idle_s(points: list[tuple[float, float | None]], interval_s: float,
                    idle_pct: float = IDLE_UTIL_PCT) -> float:
    """How long a GPU has been idle up to its last reading: points are (time, util % or None) in time order."""
    if not points or points[-1][1] is None or points[-1][1] >= idle_pct:
        return 0.0
    busy = next((t for t, u in reversed(points) if u is None or u >= idle_pct), None)
    since = busy if busy is not None else points[0][0] - interval_s
    return max(0.0, points[-1][0] - since)


def _points(lines: list[dict], i: int) -> list[tuple[float, float | None]]:
    """GPU i's readings as (time, util) where the GPU had any metric (gpusummary.summarize's rule)."""
    out = []
    for line in lines:
        g = line["g"]
        if i < len(g) and isinstance(g[i], list) and len(g[i]) == 4 and any(v is not None for v in g[i]):
            out.append((float(line["t"]), g[i][0]))
    return out


@dataclass
class LiveRun:
    """One job run's sampler state on one node."""

    cluster: str
    job_id: int
    run: int
    node: str
    source: str
    gpus: list[IdleGpu]  # every sampled GPU, idle_s 0 when it is busy now
    last_reading: float | None


def live_runs(state_dir: str, idle_pct: float = IDLE_UTIL_PCT) -> tuple[list[LiveRun], list[str]]:
    """Every job run with sampler readings under `state_dir` (<node>/<cluster>-<job>-<run>/), and notes on what
    could not be read. Orphaned (dot-named) and summary-only (DCGM) runs have no live readings and are left out."""
    runs: list[LiveRun] = []
    notes: list[str] = []
    for node, name, d in sampler.run_dirs(state_dir, notes):
        try:
            cluster, job_id, run = sampler.parse_run_name(name)
        except ValueError:
            continue
        meta, lines, _ = sampler.read_state(d)
        if not meta or not lines or not isinstance(meta.get("gpus"), list):
            continue
        interval = float(meta.get("interval_s") or sampler.DEFAULT_INTERVAL_S)
        summary = gpusummary.summarize(meta, lines, idle_pct)
        gpus = [IdleGpu(node=node, index=int(g.get("index", i)), uuid=g.get("uuid"),
                        util_mean=summary[i]["util_mean"],
                        idle_s=round(trailing_idle_s(_points(lines, i), interval, idle_pct), 1))
                for i, g in enumerate(meta["gpus"])]
        runs.append(LiveRun(cluster, job_id, run, node, str(meta.get("source") or ""), gpus,
                            float(lines[-1]["t"])))
    return runs, notes


ShowJob = Callable[[int], dict[str, str]]


def _user(show: dict[str, str]) -> str | None:
    """UserId=alice(1001) -> alice."""
    value = show.get("UserId", "")
    return value.split("(", 1)[0] or None


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() else None


def running_idle(state_dir: str, idle_for_s: float, cluster: str, show_job: ShowJob | None = None, *,
                 skip: Callable[[tuple[str, int, int]], bool] = lambda key: False,
                 idle_pct: float = IDLE_UTIL_PCT) -> tuple[list[IdleJob], list[str]]:
    """Running job runs of `cluster` with a GPU idle for at least `idle_for_s`, from the live sampler files; Slurm
    (scontrol show job) confirms the run is still running and names its owner. `skip(key)` leaves out runs
    already noticed (no scontrol call for them). Returns (jobs, notes)."""
    from slurmkit.slurm import fields, scontrol

    show_job = show_job or scontrol.show_job
    runs, notes = live_runs(state_dir, idle_pct)
    by_run: dict[tuple[str, int, int], list[LiveRun]] = {}
    for r in runs:
        by_run.setdefault((r.cluster, r.job_id, r.run), []).append(r)
    jobs = []
    for (run_cluster, job_id, run), parts in sorted(by_run.items()):
        idle = [g for p in parts for g in p.gpus if g.idle_s >= idle_for_s]
        if not idle or skip((run_cluster, job_id, run)):
            continue
        if run_cluster != cluster:
            notes.append(f"job {job_id} (run {run}) belongs to cluster {run_cluster!r}, not {cluster!r}: skipped")
            continue
        try:
            show = show_job(job_id)
        except (OSError, TimeoutError, RuntimeError) as exc:
            notes.append(f"job {job_id}: Slurm does not show it running ({str(exc).strip()}); its sampler files "
                         "are left for the epilog")
            continue
        state = fields.base_state(show.get("JobState", ""))
        restarts = _int(show.get("Restarts")) or 0
        if state != "RUNNING" or restarts != run:
            continue  # ended (the finished pass sees it once ingested), or an earlier run's leftovers
        jobs.append(IdleJob(
            cluster=cluster, job_id=job_id, run=run, phase="running", user=_user(show),
            gpus=fields.gpu_count(show.get("AllocTRES") or show.get("TRES")) or sum(len(p.gpus) for p in parts),
            idle=sorted(idle, key=lambda g: (g.node, g.index)), job_name=show.get("JobName"), state=state,
            array_job_id=_int(show.get("ArrayJobId")), array_task_id=_int(show.get("ArrayTaskId")),
            partition=show.get("Partition"), nodes=show.get("NodeList"),
            source=",".join(sorted({p.source for p in parts})) or None))
    return jobs, notes


_JOB_COLS = ("cluster", "job_id", "run", "array_job_id", "array_task_id", "job_name", "user_name", "state",
             "partition", "nodes", "gpus", "start_time", "end_time")


def finished_idle(store: Store, since: int, idle_for_s: float, *, until: int | None = None,
                  skip: Callable[[tuple[str, int, int]], bool] = lambda key: False,
                  idle_pct: float = IDLE_UTIL_PCT) -> list[IdleJob]:
    """Job runs that ended in [since, until) with a GPU whose mean utilization was below the threshold for at
    least `idle_for_s` (idle_fraction x run time; without idle_fraction, the whole run). `skip(key)` leaves out
    runs already dealt with (those already noticed)."""
    cols = ", ".join(f"j.{c}" for c in _JOB_COLS)
    sql = (f"SELECT {cols} FROM jobs j WHERE j.end_time >= ? AND j.end_time < ? AND j.gpus > 0 "
           "AND j.start_time IS NOT NULL AND EXISTS (SELECT 1 FROM job_gpus g WHERE g.cluster = j.cluster AND "
           "g.job_id = j.job_id AND g.run = j.run AND g.util_mean < ?) ORDER BY j.end_time, j.job_id, j.run")
    rows = store.execute(sql, (since, until if until is not None else 2**62, idle_pct)).fetchall()
    out = []
    for row in rows:
        j = dict(zip(_JOB_COLS, row, strict=True))
        key = (j["cluster"], j["job_id"], j["run"])
        if skip(key):
            continue
        seconds = max(0, (j["end_time"] or 0) - j["start_time"])
        gpu_rows = store.execute(
            "SELECT node, gpu_index, uuid, util_mean, idle_fraction, source FROM job_gpus WHERE cluster = ? "
            "AND job_id = ? AND run = ? ORDER BY node, gpu_index", key).fetchall()
        idle = [IdleGpu(node=node, index=index, uuid=uuid, util_mean=util,
                        idle_s=round(seconds * (1.0 if frac is None else frac), 1))
                for node, index, uuid, util, frac, _ in gpu_rows if util is not None and util < idle_pct]
        idle = [g for g in idle if g.idle_s >= idle_for_s]
        if not idle:
            continue
        out.append(IdleJob(
            cluster=j["cluster"], job_id=j["job_id"], run=j["run"], phase="finished", user=j["user_name"],
            gpus=j["gpus"], idle=idle, job_name=j["job_name"], state=j["state"], array_job_id=j["array_job_id"],
            array_task_id=j["array_task_id"], partition=j["partition"], nodes=j["nodes"],
            start_time=j["start_time"], end_time=j["end_time"],
            source=",".join(sorted({r[5] for r in gpu_rows if r[5]})) or None))
    return out
