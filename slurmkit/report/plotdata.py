"""The aggregates behind the HTML page's plots, pushed into the database like every report query (query.py):
the same window filter (GPU job runs overlapping [since, until)), the same clipping of a run's time to the window
(or to a day of it), the same Scope (a non-admin sees only their own jobs), portable SQL for SQLite and PostgreSQL.

Only a few aggregated rows leave the database: percentiles are the nearest-rank values picked by ROW_NUMBER()
(window functions exist on both; SQLite has no PERCENTILE_CONT), histograms are GROUP BY over bins.
"""

from __future__ import annotations

from slurmkit.record import IDLE_UTIL_PCT
from slurmkit.report import grading
from slurmkit.report.query import Scope, _clip, _frame, _values, _window_filter
from slurmkit.report.window import Window, periods
from slurmkit.store import runsql
from slurmkit.store.db import Store

# GPUs per job run -> size bucket (label, lowest GPU count), smallest first.
SIZES: tuple[tuple[str, int], ...] = (("1", 1), ("2", 2), ("3-4", 3), ("5-8", 5), ("> 8", 9))
QUANTILES = (10, 25, 50, 75, 90)  # percent: the box (25-75), its median and whiskers (10, 90)


SECONDS = _clip("j.start_time", "j.end_time", "?", "?")  # a run's seconds inside the window (_clip_params)


def _clip_params(window: Window) -> list[int]:
    return [window.until, window.until, window.since, window.since]  # the order of ? in SECONDS


def clusters(store: Store, window: Window, scope: Scope) -> list[str]:
    """The clusters (jobs.cluster) of the GPU job runs the report counts, for the page header."""
    where, params = _window_filter(window, scope)
    rows = store.execute(f"SELECT DISTINCT j.cluster FROM jobs j WHERE {where} ORDER BY 1", params).fetchall()
    return [str(r[0]) for r in rows]


def _percentiles_sql(inner: str, group: str, value: str) -> str:
    """Nearest-rank percentiles (QUANTILES) of `value` per `group` over the rows of the SELECT `inner`: the value
    at rank ceil(q x n / 100), written with integer division so both databases compute it alike."""
    picks = ",\n       ".join(f"MAX(CASE WHEN rn = ({q} * n + 99) / 100 THEN v END) AS p{q}" for q in QUANTILES)
    return f"""WITH r AS ({inner}),
k AS (
    SELECT {group} AS grp, v, ROW_NUMBER() OVER (PARTITION BY {group} ORDER BY v) AS rn,
           COUNT(*) OVER (PARTITION BY {group}) AS n
    FROM r
)
SELECT grp, n, {picks}
FROM k GROUP BY grp, n ORDER BY grp"""


def wait_percentiles(store: Store, window: Window, scope: Scope):
    """Per partition: job runs with a submit time and their queue wait (start - submit) percentiles, seconds."""
    where, params = _window_filter(window, scope)
    inner = (f"SELECT COALESCE(j.partition, '(none)') AS grp, j.start_time - j.submit_time AS v FROM jobs j "
             f"WHERE {where} AND j.submit_time IS NOT NULL")
    return _frame(store, _percentiles_sql(inner, "grp", "v"), params).rename(columns={"grp": "partition"})


def util_percentiles(store: Store, window: Window, scope: Scope):
    """Per partition: job runs with GPU metrics and the percentiles of their mean GPU utilization (the mean over
    the run's measured GPUs), percent."""
    where, params = _window_filter(window, scope)
    g = runsql.per_run_gpus(where)
    inner = (f"SELECT COALESCE(j.partition, '(none)') AS grp, CAST(g.util_sum AS DOUBLE PRECISION) / g.n_gpu AS v "
             f"FROM jobs j JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run WHERE {where}")
    sql = _percentiles_sql(inner, "grp", "v").replace("WITH r AS", f"WITH {g},\nr AS", 1)
    return _frame(store, sql, [IDLE_UTIL_PCT, *params, *params]).rename(columns={"grp": "partition"})


def _grade_case(util: str) -> str:
    whens = " ".join(f"WHEN {util} >= {lower!r} THEN '{name}'" for name, lower in grading.THRESHOLDS)
    return f"(CASE WHEN {util} IS NULL THEN '{grading.NO_METRICS}' {whens} ELSE '{grading.THRESHOLDS[-1][0]}' END)"


def per_run_groups(store: Store, window: Window, scope: Scope):
    """Job runs and allocated GPU-hours in the window per efficiency grade (of the run's mean GPU utilization,
    'n/a' without metrics) and per size bucket (GPUs per run): the grade and job-size charts."""
    where, params = _window_filter(window, scope)
    g = runsql.per_run_gpus(where)
    seconds = SECONDS
    util = "(CAST(g.util_sum AS DOUBLE PRECISION) / g.n_gpu)"
    size = "(CASE " + " ".join(f"WHEN j.gpus >= {lo} THEN '{label}'" for label, lo in reversed(SIZES)) + " END)"
    sql = f"""WITH {g}
SELECT {_grade_case(util)} AS grade, {size} AS size, COUNT(*) AS jobs,
       CAST(SUM(j.gpus * {seconds}) AS DOUBLE PRECISION) / 3600 AS gpu_hours
FROM jobs j LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
WHERE {where}
GROUP BY 1, 2 ORDER BY 1, 2"""
    return _frame(store, sql, [IDLE_UTIL_PCT, *params, *_clip_params(window), *params])


def memory_histogram(store: Store, window: Window, scope: Scope, bins: int = 10):
    """Measured GPU-hours per bin of peak GPU memory used / GPU memory (job_gpus.mem_max_mib / mem_total_mib),
    one GPU row at a time; GPUs without both numbers are left out (and counted in `gpu_hours_unknown`)."""
    where, params = _window_filter(window, scope)
    seconds = SECONDS
    frac = "(CAST(u.mem_max_mib AS DOUBLE PRECISION) / u.mem_total_mib)"
    known = "u.mem_max_mib IS NOT NULL AND COALESCE(u.mem_total_mib, 0) > 0"  # never NULL: NOT (...) works
    sql = f"""SELECT CASE WHEN NOT ({known}) THEN -1 WHEN {frac} >= 1 THEN {bins - 1}
                   ELSE CAST({frac} * {bins} AS INTEGER) END AS bin,
       COUNT(*) AS gpus, CAST(SUM({seconds}) AS DOUBLE PRECISION) / 3600 AS gpu_hours
FROM job_gpus u JOIN jobs j ON j.cluster = u.cluster AND j.job_id = u.job_id AND j.run = u.run
WHERE {where}
GROUP BY 1 ORDER BY 1"""
    df = _frame(store, sql, [*_clip_params(window), *params])
    import pandas as pd

    unknown = float(df.loc[df["bin"] == -1, "gpu_hours"].sum())
    full = pd.DataFrame({"bin": range(bins)}).merge(df[df["bin"] >= 0], on="bin", how="left")
    full = full.fillna({"gpus": 0, "gpu_hours": 0.0})
    width = 100 // bins
    full["label"] = [f"{b * width}-{(b + 1) * width} %" for b in full["bin"]]
    full.attrs["gpu_hours_unknown"] = unknown
    return full


def day_buckets(window: Window) -> list[tuple[str, int, int]]:
    """The window's calendar days in its own time zone (window.periods), clipped to the window."""
    return periods(window, "day")


def idle_by_node_day(store: Store, window: Window, scope: Scope):
    """Idle GPU-hours per node and day: for each measured GPU row (job_gpus, idle_fraction known) of a run,
    idle_fraction x the run's hours inside that day (days in the window's zone), summed per node and day.

    One row per (node, day) that had a measured GPU; a node-day without one is absent (unknown, not 0).
    A run meets only the days around it: its first day's number is (start - the first midnight) / 86400 give or
    take one (a DST day is 23 or 25 h), so it is joined by equality to days d - 1 .. d + its length in days + 1
    (CTE o) instead of to every day of the window (a year: 365 comparisons per run)."""
    import datetime as dt

    where, params = _window_filter(window, scope)
    days = day_buckets(window)
    first = dt.datetime.fromtimestamp(window.since, window.tz)
    base = int(dt.datetime(first.year, first.month, first.day, tzinfo=window.tz).timestamp())
    start = f"(CASE WHEN j.start_time > {int(window.since)} THEN j.start_time ELSE {int(window.since)} END)"
    end = f"(CASE WHEN j.end_time < {int(window.until)} THEN j.end_time ELSE {int(window.until)} END)"
    span = store.execute(f"SELECT MAX({end} - {start}) FROM jobs j WHERE {where}", params).fetchone()[0] or 0
    offsets = [(i,) for i in range(min(len(days), int(span) // 86400 + 3) + 1)]
    seconds = _clip("j.start_time", "j.end_time", "p.ps", "p.pe")
    sql = f"""WITH {_values('p', 'period, k, ps, pe', [(d[0], k, d[1], d[2]) for k, d in enumerate(days)])},
{_values('o', 'i', offsets)},
n AS (
    SELECT cluster, job_id, run, node, SUM(idle_fraction) AS idle_sum, COUNT(*) AS n_gpu
    FROM job_gpus WHERE idle_fraction IS NOT NULL
    GROUP BY cluster, job_id, run, node
)
SELECT n.node AS node, p.period AS day,
       CAST(SUM(n.idle_sum * {seconds}) AS DOUBLE PRECISION) / 3600 AS idle_gpu_hours,
       CAST(SUM(n.n_gpu * {seconds}) AS DOUBLE PRECISION) / 3600 AS gpu_hours
FROM jobs j JOIN n ON n.cluster = j.cluster AND n.job_id = j.job_id AND n.run = j.run
CROSS JOIN o
JOIN p ON p.k = ({start} - {base}) / 86400 - 1 + o.i
WHERE {where} AND j.start_time < p.pe AND j.end_time > p.ps
GROUP BY n.node, p.period
ORDER BY n.node, p.period"""
    df = _frame(store, sql, params)
    df.attrs["days"] = [d[0] for d in days]
    return df
