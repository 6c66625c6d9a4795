"""The usage rollup: per UTC hour, day and month, the report figures of the job runs that start there, summed per key.

Why: SQLite sorts for every GROUP BY (no hash aggregation), so a report that groups 1M job runs costs seconds
however the SQL is written. Summed ahead per (bucket, cluster, user, account, partition, gpu type, node type,
qos), a report adds up tens of thousands of rows instead, and computes exactly, run by run, only the runs the
rollup cannot place: those crossing a report period's edge and those in stale or partial buckets
(slurmkit/report/query.py).

Why hours: a report's periods start at midnight in its time zone (--tz), and for every zone a whole number of
hours off UTC (nearly all) that is an hour edge, so a local day or week is a run of whole UTC hours (with whole
UTC days inside it) and only runs crossing the period's own edges are computed one by one. With day buckets
alone, a day in Europe/Berlin held no whole bucket and every run of it was computed one by one.

Exactness: an hour's rows are recomputed from jobs and job_gpus with the per-run SQL the reports use
(slurmkit/store/runsql.py); its GPU records per metric source go to usage_rollup_sources, one row per source; a
day's rows are the sum of its hours', a month's the sum of its days'. Every writer of jobs or job_gpus calls
mark() for the runs it touches, in its own transaction (before a change that may move a run to another hour,
and after), which flags their hours, days and months stale; reports never use a stale bucket, and refresh() (run
by `sk admin ingest` after each commit) recomputes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone

from slurmkit.record import IDLE_UTIL_PCT
from slurmkit.store import runsql
from slurmkit.store.db import Store
from slurmkit.store.runsql import KEY_COLUMNS, SUM_COLUMNS

HOUR = 3600
DAY = 86400
SOURCES_TABLE = "usage_rollup_sources"  # per bucket, key and metric source: the GPU records with metrics

_MARK_SQL = ("INSERT INTO rollup_buckets (lo, hi, max_end, stale) VALUES (?, ?, ?, 1) "
             "ON CONFLICT (lo, hi) DO UPDATE SET stale = 1, max_end = CASE WHEN rollup_buckets.max_end IS NULL "
             "OR excluded.max_end > rollup_buckets.max_end THEN excluded.max_end ELSE rollup_buckets.max_end END")


def month_of(t: int) -> tuple[int, int]:
    """[lo, hi) of the UTC month holding epoch second t."""
    d = datetime.fromtimestamp(t, timezone.utc)
    lo = datetime(d.year, d.month, 1, tzinfo=timezone.utc)
    hi = datetime(d.year + d.month // 12, d.month % 12 + 1, 1, tzinfo=timezone.utc)
    return int(lo.timestamp()), int(hi.timestamp())


def mark(store: Store, runs: Iterable[tuple], cur=None) -> None:
    """Flag stale the hours (and their days and months) of `runs`: (cluster, job_id, run) keys, or
    (cluster, job_id) for every run of a job.

    Call inside the writer's transaction, before a change that may move or remove a run and after any change."""
    cur = cur or store.conn.cursor()
    marks = set()
    for key in set(runs):
        where = "cluster = ? AND job_id = ?" + (" AND run = ?" if len(key) > 2 else "")
        cur.execute(store.sql(f"SELECT start_time, end_time FROM jobs WHERE {where} AND start_time IS NOT NULL"),
                    key)
        for start, end in cur.fetchall():
            end = end if end is not None else start
            lo = start // HOUR * HOUR
            marks.add((lo, lo + HOUR, end))
            marks.add((lo // DAY * DAY, lo // DAY * DAY + DAY, end))
            marks.add((*month_of(lo), end))
    if marks:
        cur.executemany(store.sql(_MARK_SQL), sorted(marks))


def _refresh_hours_sql() -> str:
    """The hour rows of one UTC day [?, ?), every hour of it in one statement (parameters: idle threshold, the
    day twice)."""
    g_sql = runsql.per_run_gpus(jobs_filter="j.start_time >= ? AND j.start_time < ?")
    figures = runsql.select_list(runsql.run_figures(seconds="(j.end_time - j.start_time)", first="1"))
    keys = ", ".join(KEY_COLUMNS)
    return f"""INSERT INTO usage_rollup (lo, hi, {keys}, {', '.join(SUM_COLUMNS)})
WITH {g_sql},
r AS (
    SELECT j.start_time / {HOUR} * {HOUR} AS h, {', '.join(f'j.{k} AS {k}' for k in KEY_COLUMNS)}, {figures}
    FROM jobs j LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
    WHERE j.gpus > 0 AND j.end_time IS NOT NULL AND j.start_time >= ? AND j.start_time < ?
)
SELECT h, h + {HOUR}, {keys}, {runsql.sums()} FROM r GROUP BY h, {keys}"""


def _refresh_hour_sources_sql() -> str:
    """The per-source rows of the hours of one UTC day [?, ?) (parameters: the day twice)."""
    gs_sql = runsql.per_run_sources(jobs_filter="j.start_time >= ? AND j.start_time < ?")
    keys, jkeys = ", ".join(KEY_COLUMNS), ", ".join(f"j.{k}" for k in KEY_COLUMNS)
    return f"""INSERT INTO {SOURCES_TABLE} (lo, hi, {keys}, source, gpu_records)
WITH {gs_sql}
SELECT j.start_time / {HOUR} * {HOUR}, j.start_time / {HOUR} * {HOUR} + {HOUR}, {jkeys}, gs.source, SUM(gs.n)
FROM jobs j JOIN gs ON gs.cluster = j.cluster AND gs.job_id = j.job_id AND gs.run = j.run
WHERE j.gpus > 0 AND j.end_time IS NOT NULL AND j.start_time >= ? AND j.start_time < ?
GROUP BY j.start_time / {HOUR}, {jkeys}, gs.source"""


def _refresh_sum_sql(part: int) -> tuple[str, str]:
    """The rows of bucket [?, ?) summed from its parts (buckets of `part` seconds inside it: hours or days):
    (usage_rollup statement, usage_rollup_sources statement)."""
    keys = ", ".join(KEY_COLUMNS)
    inside = f"WHERE lo >= ? AND hi <= ? AND hi - lo = {part}"
    return (f"INSERT INTO usage_rollup (lo, hi, {keys}, {', '.join(SUM_COLUMNS)})\n"
            f"SELECT ?, ?, {keys}, {runsql.sums()} FROM usage_rollup {inside} GROUP BY {keys}",
            f"INSERT INTO {SOURCES_TABLE} (lo, hi, {keys}, source, gpu_records)\n"
            f"SELECT ?, ?, {keys}, source, SUM(gpu_records) FROM {SOURCES_TABLE} {inside} GROUP BY {keys}, source")


def refresh(store: Store, idle_pct: float | None = None) -> int:
    """Recompute the stale hours, then the days and months holding them, in one transaction. An hour is recomputed
    with every other hour of its day (one statement per day and table). Returns the hours recomputed."""
    idle_pct = IDLE_UTIL_PCT if idle_pct is None else idle_pct
    with store.transaction() as cur:
        lock = " FOR UPDATE" if store.dialect == "postgresql" else ""
        cur.execute(store.sql(f"SELECT lo FROM rollup_buckets WHERE hi - lo = {HOUR} "
                              f"AND (stale = 1 OR idle_pct IS NULL OR idle_pct <> ?) ORDER BY lo{lock}"), [idle_pct])
        hours = [lo for (lo,) in cur.fetchall()]
        days = sorted({lo // DAY * DAY for lo in hours})
        hours_sql, sources_sql = store.sql(_refresh_hours_sql()), store.sql(_refresh_hour_sources_sql())
        day_sql = [store.sql(q) for q in _refresh_sum_sql(HOUR)]
        month_sql = [store.sql(q) for q in _refresh_sum_sql(DAY)]
        for lo in days:
            hi = lo + DAY
            for table in ("usage_rollup", SOURCES_TABLE):
                cur.execute(store.sql(f"DELETE FROM {table} WHERE lo >= ? AND hi <= ? AND hi - lo = {HOUR}"),
                            [lo, hi])
            cur.execute(hours_sql, [idle_pct, lo, hi, lo, hi])
            cur.execute(sources_sql, [lo, hi, lo, hi])
            cur.execute(store.sql(f"UPDATE rollup_buckets SET stale = 0, idle_pct = ?, max_end = (SELECT MAX("
                                  f"COALESCE(j.end_time, j.start_time)) FROM jobs j WHERE j.start_time >= "
                                  f"rollup_buckets.lo AND j.start_time < rollup_buckets.hi) "
                                  f"WHERE lo >= ? AND lo < ? AND hi - lo = {HOUR}"), [idle_pct, lo, hi])
            _sum_bucket(store, cur, day_sql, lo, hi, idle_pct)
        for lo, hi in sorted({month_of(lo) for lo in days}):
            _sum_bucket(store, cur, month_sql, lo, hi, idle_pct)
    return len(hours)


def _sum_bucket(store: Store, cur, sql: list[str], lo: int, hi: int, idle_pct: float) -> None:
    """A day's or month's rows and bucket, from its parts' (clean, just recomputed)."""
    for table, statement in zip(("usage_rollup", SOURCES_TABLE), sql, strict=True):
        cur.execute(store.sql(f"DELETE FROM {table} WHERE lo = ? AND hi = ?"), [lo, hi])
        cur.execute(statement, [lo, hi, lo, hi])
    cur.execute(store.sql("INSERT INTO rollup_buckets (lo, hi, stale, idle_pct) VALUES (?, ?, 0, ?) "
                          "ON CONFLICT (lo, hi) DO UPDATE SET stale = 0, idle_pct = excluded.idle_pct"),
                [lo, hi, idle_pct])


def rebuild(store: Store, idle_pct: float | None = None) -> int:
    """Mark every hour that holds job runs stale and refresh: for stores written by hand or by an older slurmkit.
    Returns the hours recomputed."""
    with store.transaction() as cur:
        cur.execute(store.sql(BACKFILL_SQL))
    return refresh(store, idle_pct)


# Every hour holding job runs, stale (the days and months are recomputed with their hours). Also migration 0004's.
BACKFILL_SQL = f"""INSERT INTO rollup_buckets (lo, hi, max_end, stale)
SELECT start_time / {HOUR} * {HOUR}, start_time / {HOUR} * {HOUR} + {HOUR}, MAX(COALESCE(end_time, start_time)), 1
FROM jobs WHERE start_time IS NOT NULL GROUP BY start_time / {HOUR}
ON CONFLICT (lo, hi) DO UPDATE SET stale = 1, max_end = excluded.max_end"""
