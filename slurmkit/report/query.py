"""Report queries pushed into the database: one GROUP BY per report, the same portable SQL on SQLite and PostgreSQL.

Only aggregated rows (one per group x period) leave the database, so a report over 10M job records never holds
10M rows in Python. Per-job figures are computed inside the query:

* a job's seconds inside each period (and the window) are clipped with CASE expressions (portable MIN/MAX);
* per-GPU metrics are first summed per job run (CTE ``g``), then joined to the job run, so a job's time is never
  multiplied by its number of GPU rows;
* each (cluster, job_id, run) row is one allocation: requeued runs carry their own times and are never merged,
  array tasks have their own job ids, a multi-node job is one row with ``gpus`` over all its nodes.

Where the store keeps the usage rollup (slurmkit/store/rollup.py), rollup_sql gives the same figures from it:
clean UTC hours, days and months inside a period are summed from the rollup, the rest run by run (run_figures_sql,
the expressions the rollup itself is computed with). aggregate_sql stays for stores without it.
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
                from slurmkit.config.suggest import did_you_mean

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


def _per_job_gpus(idle_pct: float, jobs_filter: str = "", runs: str = "") -> tuple[str, list[Any]]:
    """CTE g: per job run, the sums over its GPUs that the report needs (rows without util_mean are unmeasured).

    Five aggregates per GPU row (this is the widest scan of a report). `jobs_filter` (SQL over jobs j) limits g to
    the job runs a narrow window needs, found through the jobs index instead of reading every GPU row.
    """
    restrict = ""
    if jobs_filter:
        runs = f"SELECT j.cluster, j.job_id, j.run FROM jobs j WHERE {jobs_filter}"
    if runs:  # a SELECT of (cluster, job_id, run): only these runs' GPU rows
        restrict = f"\n      AND (cluster, job_id, run) IN ({runs})"
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


def run_figures_sql(seconds: str, first: str, jobs_filter: str = "", runs: str = "") -> tuple[str, str]:
    """(select list, CTE g) of one job run's additive report figures, the columns of usage_rollup
    (slurmkit/store/rollup.py): `seconds` of the run counted, `first` 1 where the run itself (its wait, GPU counts)
    is counted. Over jobs j LEFT JOIN g; g's one parameter (before `jobs_filter`'s) is the idle threshold."""
    g_sql, _ = _per_job_gpus(0.0, jobs_filter, runs)
    multi = "(CASE WHEN j.gpus > 1 AND g.n_idle > 0 AND g.n_idle < g.n_gpu THEN g.n_idle ELSE 0 END)"
    measured = "(CASE WHEN g.n_gpu > j.gpus THEN j.gpus ELSE COALESCE(g.n_gpu, 0) END)"
    wait = "(j.start_time - j.submit_time)"
    cols = [f"{first} AS jobs", f"j.gpus * {seconds} AS gpu_s", f"{measured} * {seconds} AS measured_s",
            f"COALESCE(g.util_sum, 0) * {seconds} AS util_s", f"COALESCE(g.idle_sum, 0) * {seconds} AS idle_s",
            f"{first} * {multi} AS idle_multi", f"{multi} * {seconds} AS idle_multi_s",
            f"{first} * (CASE WHEN g.n_gpu IS NULL THEN 1 ELSE 0 END) AS no_metrics",
            f"{first} * {wait} AS wait_sum",
            f"(CASE WHEN {first} = 1 AND {wait} IS NOT NULL THEN 1 ELSE 0 END) AS wait_n",
            f"(CASE WHEN {first} = 1 THEN {wait} END) AS wait_max",
            *(f"{first} * COALESCE({_source_count('g.src', i)}, 0) AS n_{s}" for i, s in enumerate(SOURCES))]
    return ",\n           ".join(cols), g_sql


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
    """Run the aggregate query; a pandas DataFrame with one row per group (x period).

    Through the usage rollup (rollup_sql) where the store keeps one, else the GROUP BY over every job run."""
    buckets = _rollup_buckets(store, window, idle_pct)
    if buckets:
        sql, params = rollup_sql(window, keys, period, scope, idle_pct, buckets)
        if store.dialect == "postgresql":
            # PostgreSQL over-estimates the runs read one by one (a range per period edge) and then spends ~2 s
            # compiling the short query with JIT; for this transaction only.
            store.execute("SET LOCAL jit = off")
    else:
        sql, params = aggregate_sql(window, keys, period, scope, idle_pct, narrow=is_narrow(store, window),
                                    dialect=store.dialect)
    return _frame(store, sql, params)


@dataclass(frozen=True)
class Buckets:
    """The rollup buckets a window needs: UTC hours {lo: (max_end, clean)}, days and months {lo: clean}."""

    hours: dict[int, tuple[int, bool]]
    days: dict[int, bool]
    months: dict[int, bool]


def _rollup_buckets(store: Store, window: Window, idle_pct: float) -> Buckets | None:
    """The store's rollup buckets around `window`; None where the store keeps no rollup (an older schema read
    without migrating, or a store whose rows were written without slurmkit's writers, e.g. --from-sacct's)."""
    from slurmkit.store.db import current_version
    from slurmkit.store.rollup import DAY, HOUR

    if current_version(store) < 4:
        return None
    rows = store.execute("SELECT lo, hi, max_end, stale, idle_pct FROM rollup_buckets "
                         "WHERE lo < ? AND (hi > ? OR max_end > ?)",
                         [window.until, window.since, window.since]).fetchall()
    if not rows and store.execute("SELECT COUNT(*) FROM rollup_buckets").fetchone()[0] == 0:
        return None
    hours, days, months = {}, {}, {}
    for lo, hi, max_end, stale, pct in rows:
        clean = stale == 0 and pct == idle_pct
        if hi - lo == HOUR:
            hours[lo] = (max_end if max_end is not None else lo, clean)
        elif hi - lo == DAY:
            days[lo] = clean
        else:
            months[lo] = clean
    return Buckets(hours, days, months)


def _cover(b: Buckets, ps: int, pe: int) -> list[tuple[int, int]]:
    """Clean rollup buckets (lo, hi) inside [ps, pe): whole UTC months where they fit, else days, else hours."""
    from slurmkit.store.rollup import DAY, HOUR, month_of

    out, t, end = [], -(-ps // HOUR) * HOUR, pe // HOUR * HOUR
    while t < end:
        if t % DAY == 0:
            m_lo, m_hi = month_of(t)
            if m_lo == t and m_hi <= end and b.months.get(t, False):
                out.append((t, m_hi))
                t = m_hi
                continue
            if t + DAY <= end and b.days.get(t, False):
                out.append((t, t + DAY))
                t += DAY
                continue
        if b.hours.get(t, (0, False))[1]:
            out.append((t, t + HOUR))
        t += HOUR
    return out


def _rollup_plan(b: Buckets, buckets: list[tuple[str, int, int]]) -> tuple[list[tuple], list[tuple]]:
    """(cover, raw) for the periods `buckets`: cover rows (period, lo, hi) are summed from usage_rollup; raw rows
    (period, ps, pe, lo, hi, kind) select runs by start_time in [lo, hi), computed run by run:
    kind 0 runs start inside the period but in no clean bucket; kind 1 runs start before it and end inside or after
    it; kind 2 runs start in a cover bucket but end after the period: the rollup counted them whole, they add back
    minus the part after the period."""
    from slurmkit.store.rollup import HOUR

    hours = sorted(b.hours.items())
    cover, raw = [], []
    before: list[tuple[int, int]] = []  # (lo, max_end) of the hours before the current period with a run ending later
    nxt = 0
    for label, ps, pe in sorted(buckets, key=lambda x: x[1]):
        t = ps
        for lo, hi in _cover(b, ps, pe):
            cover.append((label, lo, hi))
            if t < lo:
                raw.append((label, ps, pe, t, lo, 0))
            # only the hours of the bucket that hold a run ending after the period
            raw += [(label, ps, pe, h, h + HOUR, 2) for h, (max_end, _) in _hours_in(hours, lo, hi) if max_end > pe]
            t = hi
        if t < pe:
            raw.append((label, ps, pe, t, pe, 0))
        while nxt < len(hours) and hours[nxt][0] < ps:
            before.append((hours[nxt][0], hours[nxt][1][0]))
            nxt += 1
        before = [(lo, end) for lo, end in before if end > ps]  # periods come in order: a pruned hour never returns
        raw += [(label, ps, pe, lo, min(lo + HOUR, ps), 1) for lo, _ in before]
    return cover, raw


def _hours_in(hours: list[tuple[int, tuple[int, bool]]], lo: int, hi: int) -> list[tuple[int, tuple[int, bool]]]:
    """The entries of the sorted `hours` with lo <= hour < hi."""
    from bisect import bisect_left

    i, j = bisect_left(hours, (lo,)), bisect_left(hours, (hi,))
    return hours[i:j]


def _values(name: str, cols: str, rows: list[tuple]) -> str:
    """A CTE of literal rows (labels are our own strftime output; numbers are ints): no parameter limit."""
    if not rows:  # typed like the rows it stands for (PostgreSQL compares them with BIGINT columns)
        n = len(cols.split(","))
        return f"{name}({cols}) AS (SELECT {', '.join(['CAST(NULL AS TEXT)', *['CAST(NULL AS BIGINT)'] * (n - 1)])}" \
               " WHERE 1 = 0)"
    lit = ", ".join("(" + ", ".join(f"'{v}'" if isinstance(v, str) else str(int(v)) for v in r) + ")" for r in rows)
    return f"{name}({cols}) AS (VALUES {lit})"


def rollup_sql(window: Window, keys: list[str], period: str | None, scope: Scope, idle_pct: float,
               b: Buckets) -> tuple[str, list[Any]]:
    """The same figures as aggregate_sql, from the usage rollup (slurmkit/store/rollup.py) plus the runs it
    cannot place, computed run by run (_rollup_plan). Returns (sql, params). Sums of BIGINT columns are cast back
    to BIGINT: PostgreSQL's SUM(bigint) is NUMERIC (a Decimal in Python)."""
    from slurmkit.store.rollup import SUM_COLUMNS

    buckets = periods(window, period) if period else [("", window.since, window.until)]
    cover, raw = _rollup_plan(b, buckets)
    scope_sql, scope_params = _scope_sql(scope)
    need = ["cluster", "job_id", "run", "gpus", "start_time", "end_time", "submit_time",
            *{KEYS[k].removeprefix("j.") for k in keys}]
    seconds = (f"({_clip('j.start_time', 'j.end_time', 'j.ps', 'j.pe')}"
               " - CASE WHEN j.kind = 2 THEN j.end_time - j.start_time ELSE 0 END)")
    first = f"(CASE WHEN j.kind = 2 THEN 0 WHEN j.start_time >= j.ps OR j.ps = {int(window.since)} THEN 1 ELSE 0 END)"
    figures, g_sql = run_figures_sql(seconds, first, runs="SELECT cluster, job_id, run FROM rj")
    rj = f"""rj AS (
    SELECT r.period, r.ps, r.pe, r.kind, {', '.join(f'j.{c}' for c in dict.fromkeys(need))}
    FROM r CROSS JOIN jobs j
    WHERE j.start_time >= r.lo AND j.start_time < r.hi AND j.gpus > 0 AND j.end_time IS NOT NULL
      AND j.end_time > (CASE WHEN r.kind = 2 THEN r.pe ELSE r.ps END){scope_sql}
)"""
    raw_keys = [f"COALESCE({KEYS[k]}, '(none)') AS \"{k}\"" for k in keys]
    cover_keys = [f"COALESCE({KEYS[k].replace('j.', 'u.')}, '(none)') AS \"{k}\"" for k in keys]
    group = [*(f'"{k}"' for k in keys), "period"]
    f = "CAST({} AS DOUBLE PRECISION)"
    sql = f"""WITH {_values('c', 'period, lo, hi', cover)},
{_values('r', 'period, ps, pe, lo, hi, kind', raw)},
{rj},
{g_sql},
y AS (
    SELECT {', '.join([*cover_keys, 'c.period AS period', *(f'u.{s}' for s in SUM_COLUMNS)])}
    FROM c CROSS JOIN usage_rollup u
    WHERE u.lo = c.lo AND u.hi = c.hi{scope_sql.replace('j.', 'u.')}
    UNION ALL
    SELECT {', '.join([*raw_keys, 'j.period AS period'])},
           {figures}
    FROM rj j LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
)
SELECT {', '.join(group)},
       CAST(SUM(jobs) AS BIGINT) AS jobs,
       {f.format('SUM(gpu_s)')} / 3600 AS gpu_hours,
       {f.format('SUM(measured_s)')} / 3600 AS gpu_hours_measured,
       {f.format('COALESCE(SUM(util_s), 0)')} / 360000 AS gpu_hours_used,
       {f.format('COALESCE(SUM(idle_s), 0)')} / 3600 AS gpu_hours_wasted,
       CAST(SUM(idle_multi) AS BIGINT) AS idle_gpus_in_multi,
       {f.format('SUM(idle_multi_s)')} / 3600 AS idle_gpu_hours_in_multi,
       CAST(SUM(no_metrics) AS BIGINT) AS jobs_no_metrics,
       {f.format('SUM(wait_sum)')} AS wait_s_sum,
       CAST(SUM(wait_n) AS BIGINT) AS wait_n,
       MAX(wait_max) AS wait_s_max,
       {', '.join(f'CAST(COALESCE(SUM(n_{s}), 0) AS BIGINT) AS n_{s}' for s in SOURCES)}
FROM y
GROUP BY {', '.join(group)}
ORDER BY {', '.join(group)}"""
    return sql, [*scope_params, idle_pct, *scope_params]


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
