"""Report queries pushed into the database: one GROUP BY per report, the same portable SQL on SQLite and PostgreSQL.

Only aggregated rows (one per group x period) leave the database, so a report over 10M job records never holds
10M rows in Python. Per-job figures are computed inside the query:

* a job's seconds inside each period (and the window) are clipped with CASE expressions (portable MIN/MAX);
* per-GPU metrics are first summed per job run (CTE ``g``), then joined to the job run, so a job's time is never
  multiplied by its number of GPU rows;
* each (cluster, job_id, run) row is one allocation: requeued runs carry their own times and are never merged,
  array tasks have their own job ids, a multi-node job is one row with ``gpus`` over all its nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmkit.errors import InputError, Problem
from slurmkit.report.figures import IDLE_UTIL_PCT
from slurmkit.report.window import Window, periods
from slurmkit.store.db import Store

# --by name -> SQL expression over the jobs table (alias j). NULLs become "(none)" so they group and print.
KEYS = {
    "user": "j.user_name",
    "account": "j.account",
    "partition": "j.partition",
    "gpu_type": "j.gpu_types",
    "node_type": "j.node_type",
    "qos": "j.qos",
    "cluster": "j.cluster",
}
SOURCES = ("nvml", "dcgm", "slurm", "simulated")


@dataclass(frozen=True)
class Scope:
    """Whose jobs a report may see: everybody (admins) or one user name."""

    user: str | None = None  # None = all users

    @property
    def everyone(self) -> bool:
        return self.user is None


def parse_by(values: tuple[str, ...] | list[str]) -> tuple[list[str], str | None]:
    """--by values (repeatable or comma-separated) -> (group keys, period or None)."""
    keys: list[str] = []
    period = None
    for value in values:
        for name in filter(None, (v.strip() for v in value.split(","))):
            if name in ("day", "week", "month"):
                if period and period != name:
                    raise InputError(Problem(f"--by names two periods ({period}, {name})", key="--by",
                                             hint="pick one of day, week, month"))
                period = name
            elif name in KEYS:
                if name not in keys:
                    keys.append(name)
            else:
                from slurmkit.suggest import did_you_mean

                choices = [*KEYS, "day", "week", "month"]
                raise InputError(Problem(f"cannot group by {name!r}", key="--by",
                                         hint=did_you_mean(name, choices)))
    return keys, period


def _clip(start: str, end: str, lo: str, hi: str) -> str:
    """SQL for max(0, min(end, hi) - max(start, lo)); callers already require overlap, so no max(0, ...)."""
    return (f"((CASE WHEN {end} < {hi} THEN {end} ELSE {hi} END)"
            f" - (CASE WHEN {start} > {lo} THEN {start} ELSE {lo} END))")


# Per-job GPU record counts by metric source, packed into one integer (16 bits each) so that one SUM per GPU row
# counts all four; a job has far fewer than 65,536 GPU rows of one source. Unpacked per job in the outer query.
_SRC_BITS = 16


def _source_code() -> str:
    whens = " ".join(f"WHEN '{s}' THEN {1 << (_SRC_BITS * i)}" for i, s in enumerate(SOURCES))
    return f"CASE source {whens} ELSE 0 END"


def _source_count(packed: str, i: int) -> str:
    # field i of the packed count, with integer division only ('%' would clash with psycopg's placeholders)
    lo, hi = 1 << (_SRC_BITS * i), 1 << (_SRC_BITS * (i + 1))
    if i == len(SOURCES) - 1:  # the top field: nothing above it (and 2**64 is no SQL integer)
        return f"({packed} / {lo})"
    return f"({packed} / {lo} - {packed} / {hi} * {1 << _SRC_BITS})"


def _per_job_gpus(idle_pct: float, jobs_filter: str = "") -> tuple[str, list[Any]]:
    """CTE g: per job run, the sums over its GPUs that the report needs (rows without util_mean are unmeasured).

    Five aggregates per GPU row (this is the widest scan of a report). `jobs_filter` (SQL over jobs j) limits g to
    the job runs a narrow window needs, found through the jobs index instead of reading every GPU row.
    """
    restrict = ""
    if jobs_filter:
        restrict = ("\n      AND (cluster, job_id, run) IN"
                    f" (SELECT j.cluster, j.job_id, j.run FROM jobs j WHERE {jobs_filter})")
    sql = f"""g AS (
    SELECT cluster, job_id, run,
           COUNT(*) AS n_gpu,
           SUM(util_mean) AS util_sum,
           SUM(idle_fraction) AS idle_sum,
           SUM(CASE WHEN util_mean < ? THEN 1 ELSE 0 END) AS n_idle,
           CAST(SUM({_source_code()}) AS BIGINT) AS src
    FROM job_gpus
    WHERE util_mean IS NOT NULL{restrict}
    GROUP BY cluster, job_id, run
)"""
    return sql, [idle_pct]


def _scope_sql(scope: Scope) -> tuple[str, list[Any]]:
    return ("", []) if scope.everyone else (" AND j.user_name = ?", [scope.user])


def _window_filter(window: Window, scope: Scope) -> tuple[str, list[Any]]:
    """The job runs a report over `window` counts (SQL over jobs j): GPU jobs that overlap the window."""
    scope_sql, scope_params = _scope_sql(scope)
    return ("j.gpus > 0 AND j.start_time IS NOT NULL AND j.end_time IS NOT NULL"
            f" AND j.start_time < ? AND j.end_time > ?{scope_sql}", [window.until, window.since, *scope_params])


def aggregate_sql(window: Window, keys: list[str], period: str | None, scope: Scope,
                  idle_pct: float = IDLE_UTIL_PCT, *, narrow: bool = False,
                  dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """The GROUP BY query behind usage/efficiency/top. Returns (sql with ? placeholders, params).

    Shape, for speed on SQLite (measured in bench/report.py): g reads each GPU row once with five aggregates;
    x is one row per job run and period, every per-row value computed once (SQLite would otherwise flatten x
    into the outer query and re-evaluate `s` and `first` in every aggregate that names them: LIMIT -1 keeps x a
    co-routine); the outer query only sums. `narrow`: the window holds a small part of the store, so g reads
    only the GPU rows of the window's jobs (an index lookup per job) instead of every GPU row.
    """
    buckets = periods(window, period) if period else [("", window.since, window.until)]
    values = ", ".join("(?, ?, ?)" for _ in buckets)
    params: list[Any] = [x for b in buckets for x in b]
    where, where_params = _window_filter(window, scope)
    g_sql, g_params = _per_job_gpus(idle_pct, where if narrow else "")
    params += g_params + (where_params if narrow else [])
    # Quoted: "user" is a reserved word in PostgreSQL (bare, it means CURRENT_USER, the database role).
    key_cols = [f"COALESCE({KEYS[k]}, '(none)') AS \"{k}\"" for k in keys]
    seconds = _clip("j.start_time", "j.end_time", "p.ps", "p.pe")
    # Count a job (and its wait and GPU counts) once: in the period it started in, or the first period.
    first = "(CASE WHEN j.start_time >= p.ps OR p.ps = ? THEN 1 ELSE 0 END)"
    # An idle GPU "inside" a multi-GPU job: below the threshold while some other GPU of the job was above it.
    multi = "(CASE WHEN j.gpus > 1 AND g.n_idle > 0 AND g.n_idle < g.n_gpu THEN g.n_idle ELSE 0 END)"
    measured = "(CASE WHEN g.n_gpu > j.gpus THEN j.gpus ELSE COALESCE(g.n_gpu, 0) END)"
    x_sql = f"""x AS (
    SELECT {', '.join([*key_cols, 'p.period AS period'])},
           {seconds} AS s, {first} AS first, j.gpus AS gpus, {measured} AS n_measured,
           g.util_sum AS util_sum, g.idle_sum AS idle_sum, {multi} AS idle_multi,
           j.start_time - j.submit_time AS wait_s, g.n_gpu AS n_gpu, g.src AS src
    FROM jobs j
    CROSS JOIN p
    LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
    WHERE {where}
      AND j.start_time < p.pe AND j.end_time > p.ps{" LIMIT -1" if dialect == "sqlite" else ""}
)"""
    params += [window.since, *where_params]
    group = [*(f'"{k}"' for k in keys), "period"]
    f = "CAST({} AS DOUBLE PRECISION)"
    # per job (counted once, in its first period): the wait and the GPU records by metric source
    once = "CASE WHEN first = 1 THEN {} END"
    sources = ", ".join(f"COALESCE(SUM({once.format(_source_count('src', i))}), 0) AS n_{s}"
                        for i, s in enumerate(SOURCES))
    sql = f"""WITH p(period, ps, pe) AS (VALUES {values}),
{g_sql},
{x_sql}
SELECT {', '.join(group)},
       SUM(first) AS jobs,
       {f.format('SUM(gpus * s)')} / 3600 AS gpu_hours,
       {f.format('SUM(n_measured * s)')} / 3600 AS gpu_hours_measured,
       {f.format('COALESCE(SUM(util_sum * s), 0)')} / 360000 AS gpu_hours_used,
       {f.format('COALESCE(SUM(idle_sum * s), 0)')} / 3600 AS gpu_hours_wasted,
       SUM(first * idle_multi) AS idle_gpus_in_multi,
       {f.format('SUM(idle_multi * s)')} / 3600 AS idle_gpu_hours_in_multi,
       SUM(first) - COUNT({once.format('n_gpu')}) AS jobs_no_metrics,
       {f.format('SUM(first * wait_s)')} AS wait_s_sum,
       COUNT({once.format('wait_s')}) AS wait_n,
       MAX({once.format('wait_s')}) AS wait_s_max,
       {sources}
FROM x
GROUP BY {', '.join(group)}
ORDER BY {', '.join(group)}"""
    return sql, params


# Below this share of the store's time span, a report reads only its window's GPU rows (see aggregate_sql).
NARROW_SHARE = 0.25


def is_narrow(store: Store, window: Window) -> bool:
    """Does `window` cover only a small part of the stored jobs' time span? (two index lookups: MIN/MAX)"""
    lo, hi = store.execute("SELECT MIN(end_time), MAX(end_time) FROM jobs").fetchone()
    if lo is None or hi is None or hi <= lo:
        return False
    inside = min(hi, window.until) - max(lo, window.since)
    return inside < NARROW_SHARE * (hi - lo)


def run_aggregate(store: Store, window: Window, keys: list[str], period: str | None, scope: Scope,
                  idle_pct: float = IDLE_UTIL_PCT):
    """Run the aggregate query; a pandas DataFrame with one row per group (x period)."""
    sql, params = aggregate_sql(window, keys, period, scope, idle_pct, narrow=is_narrow(store, window),
                                dialect=store.dialect)
    return _frame(store, sql, params)


def idle_jobs_sql(window: Window, scope: Scope, limit: int, idle_pct: float = IDLE_UTIL_PCT):
    """Multi-GPU job runs with idle GPUs while others worked, worst (most idle GPU-hours) first."""
    g_sql, g_params = _per_job_gpus(idle_pct)
    seconds = _clip("j.start_time", "j.end_time", "?", "?")
    scope_sql, scope_params = _scope_sql(scope)
    sql = f"""WITH {g_sql}
SELECT j.cluster, j.job_id, j.run, j.array_job_id, j.array_task_id, j.job_name,
       COALESCE(j.user_name, '(none)') AS "user", COALESCE(j.account, '(none)') AS account,
       COALESCE(j.partition, '(none)') AS partition, j.gpus, g.n_gpu AS gpus_measured, g.n_idle AS idle_gpus,
       CAST({seconds} AS DOUBLE PRECISION) / 3600 AS hours,
       CAST(g.n_idle * {seconds} AS DOUBLE PRECISION) / 3600 AS idle_gpu_hours,
       g.util_sum / g.n_gpu AS mean_util_pct, j.start_time, j.end_time
FROM jobs j JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
WHERE j.gpus > 1 AND g.n_idle > 0 AND g.n_idle < g.n_gpu
  AND j.start_time < ? AND j.end_time > ?{scope_sql}
ORDER BY idle_gpu_hours DESC, j.job_id
LIMIT ?"""
    clip = [window.until, window.until, window.since, window.since]  # the order of ? in _clip
    params = [*g_params, *clip, *clip, window.until, window.since, *scope_params, limit]
    return sql, params


def run_idle_jobs(store: Store, window: Window, scope: Scope, limit: int = 20, idle_pct: float = IDLE_UTIL_PCT):
    sql, params = idle_jobs_sql(window, scope, limit, idle_pct)
    return _frame(store, sql, params)


def util_histogram(store: Store, window: Window, scope: Scope, bins: int = 10):
    """Measured GPU-hours per utilization bin (0-10 %, ..., 90-100 %): the shape of cluster efficiency."""
    seconds = _clip("j.start_time", "j.end_time", "?", "?")
    scope_sql, scope_params = _scope_sql(scope)
    width = 100 // bins
    sql = f"""SELECT CASE WHEN u.util_mean >= 100 THEN {bins - 1} ELSE CAST(u.util_mean / {width} AS INTEGER) END
              AS bin,
       CAST(SUM({seconds}) AS DOUBLE PRECISION) / 3600 AS gpu_hours
FROM job_gpus u JOIN jobs j ON j.cluster = u.cluster AND j.job_id = u.job_id AND j.run = u.run
WHERE u.util_mean IS NOT NULL AND j.gpus > 0 AND j.start_time < ? AND j.end_time > ?{scope_sql}
GROUP BY 1 ORDER BY 1"""
    params = [window.until, window.until, window.since, window.since, window.until, window.since, *scope_params]
    df = _frame(store, sql, params)
    import pandas as pd

    full = pd.DataFrame({"bin": range(bins)})
    df = full.merge(df, on="bin", how="left").fillna({"gpu_hours": 0.0})
    df["label"] = [f"{b * width}-{(b + 1) * width} %" for b in df["bin"]]
    return df


def _frame(store: Store, sql: str, params: list[Any]):
    import pandas as pd

    cur = store.execute(sql, params)
    cols = [d[0] for d in cur.description]
    return pd.DataFrame.from_records(cur.fetchall(), columns=cols)
