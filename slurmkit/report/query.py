"""Report queries pushed into the database: one GROUP BY per report, the same portable SQL on SQLite and PostgreSQL.

Only aggregated rows (one per group x period) leave the database, so a report over 10M job records never holds
10M rows in Python. Per-job figures are computed inside the query:

* a job's seconds inside each period (and the window) are clipped with CASE expressions (portable MIN/MAX);
* per-GPU metrics are first summed per job run (CTE ``g``), then joined to the job run, so a job's time is never
  multiplied by its number of GPU rows;
* each (cluster, job_id, run) row is one allocation: requeued runs carry their own times and are never merged,
  array tasks have their own job ids, a multi-node job is one row with ``gpus`` over all its nodes.

The per-run figures are the store's (slurmkit/store/runsql.py), the very expressions the usage rollup is computed
with. Where the store keeps the rollup (slurmkit/store/rollup.py), rollup_sql sums clean UTC hours, days and
months inside a period from it and computes the rest run by run; aggregate_sql computes every run (stores without
it). Both end in the same SELECT (_FIGURES_SQL). GPU records per metric source are counted by a second query
of the same shape (one row per group, period and source), so any number of sources is counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmkit.errors import InputError, Problem
from slurmkit.record import IDLE_UTIL_PCT, SOURCE_NAMES
from slurmkit.report.window import Window, periods
from slurmkit.store import runsql
from slurmkit.store.db import Store
from slurmkit.store.runsql import GROUP_KEYS, SUM_COLUMNS

# --by name -> SQL expression over the jobs table (alias j). NULLs become "(none)" so they group and print.
KEYS = {name: f"j.{column}" for name, column in GROUP_KEYS.items()}


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


def _scope_sql(scope: Scope) -> tuple[str, list[Any]]:
    return ("", []) if scope.everyone else (" AND j.user_name = ?", [scope.user])


def _window_filter(window: Window, scope: Scope) -> tuple[str, list[Any]]:
    """The job runs a report over `window` counts (SQL over jobs j): GPU jobs that overlap the window."""
    scope_sql, scope_params = _scope_sql(scope)
    # A run that ends at the window's start is outside it, unless it also starts there (no seconds, but a job).
    return ("j.gpus > 0 AND j.start_time IS NOT NULL AND j.end_time IS NOT NULL"
            f" AND j.start_time < ? AND (j.end_time > ? OR j.start_time >= ?){scope_sql}",
            [window.until, window.since, window.since, *scope_params])


def _key_cols(keys: list[str], alias: str = "j") -> list[str]:
    # Quoted: "user" is a reserved word in PostgreSQL (bare, it means CURRENT_USER, the database role).
    return [f"COALESCE({alias}.{GROUP_KEYS[k]}, '(none)') AS \"{k}\"" for k in keys]


def _group(keys: list[str]) -> list[str]:
    return [*(f'"{k}"' for k in keys), "period"]


def _figures_sql(keys: list[str]) -> str:
    """The report's figures from the additive per-run columns (SUM_COLUMNS) of CTE y, per group and period. Sums
    of BIGINT columns are cast back to BIGINT: PostgreSQL's SUM(bigint) is NUMERIC (a Decimal in Python)."""
    group = _group(keys)
    f = "CAST({} AS DOUBLE PRECISION)"
    return f"""SELECT {', '.join(group)},
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
       MAX(wait_max) AS wait_s_max
FROM y
GROUP BY {', '.join(group)}
ORDER BY {', '.join(group)}"""


def _sources_sql(keys: list[str]) -> str:
    """Per group, period and metric source: the GPU records with metrics, from CTE ys (keys, period, source, n)."""
    group = _group(keys)
    return f"""SELECT {', '.join(group)}, source, CAST(SUM(n) AS BIGINT) AS n
FROM ys
GROUP BY {', '.join(group)}, source
ORDER BY {', '.join(group)}, source"""


def _aggregate_x(window: Window, keys: list[str], period: str | None, scope: Scope,
                 dialect: str) -> tuple[str, list[Any], str, list[Any]]:
    """(CTEs p and x, their parameters, the jobs filter and its parameters) of aggregate_sql: x is one row per job
    run and period, its clipped seconds `s` and `first` computed once (SQLite would otherwise flatten x into the
    outer query and re-evaluate them in every figure that names them: LIMIT -1 keeps x a co-routine)."""
    buckets = periods(window, period) if period else [("", window.since, window.until)]
    values = ", ".join("(?, ?, ?)" for _ in buckets)
    params: list[Any] = [x for b in buckets for x in b]
    where, where_params = _window_filter(window, scope)
    seconds = _clip("j.start_time", "j.end_time", "p.ps", "p.pe")
    # Count a job (and its wait and GPU counts) once: in the period it started in, or the first period.
    first = f"(CASE WHEN j.start_time >= p.ps OR p.ps = {int(window.since)} THEN 1 ELSE 0 END)"
    limit = " LIMIT -1" if dialect == "sqlite" else ""
    sql = f"""p(period, ps, pe) AS (VALUES {values}),
x AS (
    SELECT {', '.join([*_key_cols(keys), 'p.period AS period'])},
           j.cluster AS cluster, j.job_id AS job_id, j.run AS run, j.gpus AS gpus, j.start_time AS start_time,
           j.submit_time AS submit_time, {seconds} AS s, {first} AS first
    FROM jobs j
    CROSS JOIN p
    WHERE {where}
      AND j.start_time < p.pe AND (j.end_time > p.ps OR j.start_time >= p.ps){limit}
)"""
    return sql, params + where_params, where, where_params


def aggregate_sql(window: Window, keys: list[str], period: str | None, scope: Scope,
                  idle_pct: float = IDLE_UTIL_PCT, *, narrow: bool = False,
                  dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """The GROUP BY query behind usage/efficiency/top, every run computed. Returns (sql with ? placeholders,
    params). `narrow`: the window holds a small part of the store, so g reads only the GPU rows of the window's
    jobs (an index lookup per job) instead of every GPU row (measured in bench/report.py)."""
    x_sql, x_params, where, where_params = _aggregate_x(window, keys, period, scope, dialect)
    g_sql = runsql.per_run_gpus(where if narrow else "")
    figures = runsql.select_list(runsql.run_figures(seconds="j.s", first="j.first"))
    sql = f"""WITH {x_sql},
{g_sql},
y AS (
    SELECT {', '.join([*(f'j."{k}" AS "{k}"' for k in keys), 'j.period AS period'])},
           {figures}
    FROM x j LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
)
{_figures_sql(keys)}"""
    return sql, [*x_params, idle_pct, *(where_params if narrow else [])]


def aggregate_sources_sql(window: Window, keys: list[str], period: str | None, scope: Scope, *,
                          narrow: bool = False, dialect: str = "sqlite") -> tuple[str, list[Any]]:
    """The GPU records per metric source behind aggregate_sql's rows (counted once per run, like its jobs)."""
    x_sql, x_params, where, where_params = _aggregate_x(window, keys, period, scope, dialect)
    sql = f"""WITH {x_sql},
{runsql.per_run_sources(where if narrow else "")},
ys AS (
    SELECT {', '.join([*(f'j."{k}" AS "{k}"' for k in keys), 'j.period AS period'])}, gs.source AS source,
           j.first * gs.n AS n
    FROM x j JOIN gs ON gs.cluster = j.cluster AND gs.job_id = j.job_id AND gs.run = j.run
)
{_sources_sql(keys)}"""
    return sql, [*x_params, *(where_params if narrow else [])]


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
                  idle_pct: float = IDLE_UTIL_PCT, *, every_run: bool = False):
    """Run the aggregate queries; a pandas DataFrame with one row per group (x period), n_<source> included.

    Through the usage rollup (rollup_sql) where the store keeps one, else (or with `every_run`) the GROUP BY over
    every job run."""
    buckets = None if every_run else _rollup_buckets(store, window, idle_pct)
    if buckets:
        sql, params = rollup_sql(window, keys, period, scope, idle_pct, buckets)
        src_sql, src_params = rollup_sources_sql(window, keys, period, scope, buckets)
        if store.dialect == "postgresql":
            # PostgreSQL over-estimates the runs read one by one (a range per period edge) and then spends ~2 s
            # compiling the short query with JIT; for this transaction only.
            store.execute("SET LOCAL jit = off")
    else:
        narrow = is_narrow(store, window)
        sql, params = aggregate_sql(window, keys, period, scope, idle_pct, narrow=narrow, dialect=store.dialect)
        src_sql, src_params = aggregate_sources_sql(window, keys, period, scope, narrow=narrow,
                                                    dialect=store.dialect)
    return with_sources(_frame(store, sql, params), _frame(store, src_sql, src_params), keys)


def source_columns(names: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The n_<source> columns of a report frame: every registered source (slurmkit/record.py) in its order, then
    any other source found in the store (`names`), so a source is counted before it is registered too."""
    return [f"n_{s}" for s in dict.fromkeys([*SOURCE_NAMES, *sorted(names)])]


def with_sources(df, src, keys: list[str]):
    """`df` (one row per group and period) with an n_<source> column per metric source, from `src` (one row per
    group, period and source): GPU records with metrics, 0 where none."""
    group = [*keys, "period"]
    cols = source_columns(list(src["source"].unique()) if len(src) else [])
    if len(src):
        wide = src.pivot_table(index=group, columns="source", values="n", aggfunc="sum").add_prefix("n_")
        df = df.merge(wide.reset_index(), on=group, how="left")
    for c in cols:
        df[c] = df[c].fillna(0).astype("int64") if c in df else 0
    return df[[*(c for c in df.columns if c not in cols), *cols]]


@dataclass(frozen=True)
class Buckets:
    """The rollup buckets a window needs: UTC hours {lo: (max_end, clean)}, and the longer buckets (UTC days and
    months, registered zones' local days) {lo: [(hi, clean)], longest first}. A bucket is clean when it is fresh
    and no stale hour's runs (up to its max_end) reach into it."""

    hours: dict[int, tuple[int, bool]]
    spans: dict[int, list[tuple[int, bool]]]


def _rollup_buckets(store: Store, window: Window, idle_pct: float) -> Buckets | None:
    """The store's rollup buckets around `window`; None where the store keeps no rollup of this kind (an older
    schema read without migrating, or a store whose rows were written without slurmkit's writers, e.g.
    --from-sacct's)."""
    from bisect import bisect_left

    from slurmkit.store.db import current_version
    from slurmkit.store.rollup import HOUR

    if current_version(store) < 7:  # version 7: time spread over the hours (slurmkit/store/rollup.py)
        return None
    rows = store.execute("SELECT lo, hi, max_end, stale, idle_pct FROM rollup_buckets "
                         "WHERE lo < ? AND (hi > ? OR max_end > ?)",
                         [window.until, window.since, window.since]).fetchall()
    if not rows and store.execute("SELECT COUNT(*) FROM rollup_buckets").fetchone()[0] == 0:
        return None
    fresh = {(lo, hi): stale == 0 and pct == idle_pct for lo, hi, _, stale, pct in rows}
    # [lo, end) where a stale hour's runs ran: every bucket meeting one is stale too, merged and sorted
    dirty: list[list[int]] = []
    for lo, hi, max_end, _, _ in sorted(rows):
        if hi - lo == HOUR and not fresh[(lo, hi)]:
            end = max(hi, max_end or hi)
            if dirty and lo <= dirty[-1][1]:
                dirty[-1][1] = max(dirty[-1][1], end)
            else:
                dirty.append([lo, end])
    ends = [e for _, e in dirty]

    def clean(lo: int, hi: int) -> bool:
        i = bisect_left(ends, lo + 1)  # the first dirty span ending after lo
        return fresh[(lo, hi)] and not (i < len(dirty) and dirty[i][0] < hi)

    hours: dict[int, tuple[int, bool]] = {}
    spans: dict[int, list[tuple[int, bool]]] = {}
    for lo, hi, max_end, _, _ in rows:
        if hi - lo == HOUR:
            hours[lo] = (max_end if max_end is not None else lo, clean(lo, hi))
        else:
            spans.setdefault(lo, []).append((hi, clean(lo, hi)))
    for longer in spans.values():
        longer.sort(reverse=True)
    return Buckets(hours, spans)


def _cover(b: Buckets, ps: int, pe: int) -> list[tuple[int, int]]:
    """Clean rollup buckets (lo, hi) inside [ps, pe): from each hour edge the longest that fits (a UTC month, a
    day, a zone's local day), else the hour."""
    from slurmkit.store.rollup import HOUR

    out, t, end = [], -(-ps // HOUR) * HOUR, pe // HOUR * HOUR
    while t < end:
        hi = next((hi for hi, clean in b.spans.get(t, ()) if clean and hi <= end), None)
        if hi is not None:
            out.append((t, hi))
            t = hi
            continue
        if b.hours.get(t, (0, False))[1]:
            out.append((t, t + HOUR))
        t += HOUR
    return out


class _Reach:
    """The earliest start hour whose runs reach past a time, for times asked in increasing order (a sweep over the
    hours' max_end: an hour whose runs all ended before one time has ended before every later one)."""

    def __init__(self, hours: dict[int, tuple[int, bool]]):
        from collections import deque

        self._todo = sorted((lo, end) for lo, (end, _) in hours.items())
        self._next, self._live = 0, deque()

    def first_start(self, t: int) -> int:
        """min(lo) of the hours starting before t with max_end > t; t itself where none."""
        while self._next < len(self._todo) and self._todo[self._next][0] < t:
            self._live.append(self._todo[self._next])
            self._next += 1
        while self._live and self._live[0][1] <= t:
            self._live.popleft()
        # the front is the earliest live hour; later ones that ended are dropped when they reach the front
        return self._live[0][0] if self._live else t


def _rollup_plan(b: Buckets, buckets: list[tuple[str, int, int]], since: int) -> tuple[list[tuple], list[tuple]]:
    """(cover, raw) for the periods `buckets`: cover rows (period, lo, hi) are summed from usage_rollup; raw rows
    (period, ps, pe, lo, hi, kind) are computed run by run, over the runs that started in [lo, hi) and reach
    past ps (or start at or after it):
    kind 0: the part [ps, pe) of a period that no clean bucket covers (a stale bucket, a part of an hour): the
    runs' seconds inside it, counted where they start in it;
    kind 1: the runs that started before the window and ran into it: counted in its first period (their seconds
    inside the window are in the buckets and the kind 0 rows)."""
    reach = _Reach(b.hours)
    ordered = sorted(buckets, key=lambda x: x[1])
    cover, raw = [], []
    if ordered and (s := reach.first_start(since)) < since:
        raw.append((ordered[0][0], since, since, s, since, 1))
    for label, ps, pe in ordered:
        t = ps
        for lo, hi in [*_cover(b, ps, pe), (pe, pe)]:
            if t < lo:
                raw.append((label, t, lo, reach.first_start(t), lo, 0))
            if lo < hi:
                cover.append((label, lo, hi))
            t = hi
    return cover, raw


def _values(name: str, cols: str, rows: list[tuple]) -> str:
    """A CTE of literal rows (labels are our own strftime output; numbers are ints): no parameter limit."""
    if not rows:  # typed like the rows it stands for (PostgreSQL compares them with BIGINT columns)
        n = len(cols.split(","))
        return f"{name}({cols}) AS (SELECT {', '.join(['CAST(NULL AS TEXT)', *['CAST(NULL AS BIGINT)'] * (n - 1)])}" \
               " WHERE 1 = 0)"
    lit = ", ".join("(" + ", ".join(f"'{v}'" if isinstance(v, str) else str(int(v)) for v in r) + ")" for r in rows)
    return f"{name}({cols}) AS (VALUES {lit})"


def _rollup_ctes(window: Window, keys: list[str], period: str | None, scope: Scope,
                 b: Buckets) -> tuple[str, str, str, list[Any]]:
    """(CTEs c, r and rj; `seconds`; `first`; scope parameters) shared by rollup_sql and rollup_sources_sql:
    c the rollup buckets summed per period, r the ranges read run by run (_rollup_plan), rj those runs."""
    buckets = periods(window, period) if period else [("", window.since, window.until)]
    cover, raw = _rollup_plan(b, buckets, window.since)
    scope_sql, scope_params = _scope_sql(scope)
    need = ["cluster", "job_id", "run", "gpus", "start_time", "end_time", "submit_time",
            *{GROUP_KEYS[k] for k in keys}]
    seconds = f"(CASE WHEN j.kind = 1 THEN 0 ELSE {_clip('j.start_time', 'j.end_time', 'j.ps', 'j.pe')} END)"
    first = "(CASE WHEN j.kind = 1 OR j.start_time >= j.ps THEN 1 ELSE 0 END)"
    ctes = f"""{_values('c', 'period, lo, hi', cover)},
{_values('r', 'period, ps, pe, lo, hi, kind', raw)},
rj AS (
    SELECT r.period, r.ps, r.pe, r.kind, {', '.join(f'j.{c}' for c in dict.fromkeys(need))}
    FROM r CROSS JOIN jobs j
    WHERE j.start_time >= r.lo AND j.start_time < r.hi AND j.gpus > 0 AND j.end_time IS NOT NULL
      AND (j.end_time > r.ps OR j.start_time >= r.ps){scope_sql}
)"""
    return ctes, seconds, first, scope_params


def rollup_sql(window: Window, keys: list[str], period: str | None, scope: Scope, idle_pct: float,
               b: Buckets) -> tuple[str, list[Any]]:
    """The same figures as aggregate_sql, from the usage rollup (slurmkit/store/rollup.py) plus the runs it
    cannot place, computed run by run (_rollup_plan). Returns (sql, params)."""
    ctes, seconds, first, scope_params = _rollup_ctes(window, keys, period, scope, b)
    scope_u = _scope_sql(scope)[0].replace("j.", "u.")
    figures = runsql.select_list(runsql.run_figures(seconds, first))
    sql = f"""WITH {ctes},
{runsql.per_run_gpus(runs="SELECT cluster, job_id, run FROM rj")},
y AS (
    SELECT {', '.join([*_key_cols(keys, 'u'), 'c.period AS period', *(f'u.{s}' for s in SUM_COLUMNS)])}
    FROM c CROSS JOIN usage_rollup u
    WHERE u.lo = c.lo AND u.hi = c.hi{scope_u}
    UNION ALL
    SELECT {', '.join([*_key_cols(keys), 'j.period AS period'])},
           {figures}
    FROM rj j LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
)
{_figures_sql(keys)}"""
    return sql, [*scope_params, idle_pct, *scope_params]


def rollup_sources_sql(window: Window, keys: list[str], period: str | None, scope: Scope,
                       b: Buckets) -> tuple[str, list[Any]]:
    """The GPU records per metric source behind rollup_sql's rows: the rollup's per-source rows of the clean
    buckets plus the runs read one by one, counted where `first` is 1."""
    ctes, _, first, scope_params = _rollup_ctes(window, keys, period, scope, b)
    scope_u = _scope_sql(scope)[0].replace("j.", "u.")
    sql = f"""WITH {ctes},
{runsql.per_run_sources(runs="SELECT cluster, job_id, run FROM rj")},
ys AS (
    SELECT {', '.join([*_key_cols(keys, 'u'), 'c.period AS period'])}, u.source AS source, u.gpu_records AS n
    FROM c CROSS JOIN usage_rollup_sources u
    WHERE u.lo = c.lo AND u.hi = c.hi{scope_u}
    UNION ALL
    SELECT {', '.join([*_key_cols(keys), 'j.period AS period'])}, gs.source AS source, {first} * gs.n AS n
    FROM rj j JOIN gs ON gs.cluster = j.cluster AND gs.job_id = j.job_id AND gs.run = j.run
)
{_sources_sql(keys)}"""
    return sql, [*scope_params, *scope_params]


def idle_jobs_sql(window: Window, scope: Scope, limit: int, idle_pct: float = IDLE_UTIL_PCT):
    """Multi-GPU job runs with idle GPUs while others worked, worst (most idle GPU-hours) first."""
    g_sql = runsql.per_run_gpus()
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
    params = [idle_pct, *clip, *clip, window.until, window.since, *scope_params, limit]
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
