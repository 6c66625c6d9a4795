"""The usage rollup: per UTC hour, day and month, the report figures of the job runs, summed per key.

Why: SQLite sorts for every GROUP BY (no hash aggregation), so a report that groups 1M job runs costs seconds
however the SQL is written. Summed ahead per (bucket, cluster, user, account, partition, gpu type, node type,
qos), a report adds up tens of thousands of rows instead, and computes run by run only what the rollup cannot
give: stale buckets and parts of hours (slurmkit/report/query.py).

What a bucket holds: a run's time figures (GPU-seconds, measured, used and idle GPU-seconds) are spread over the
hours it ran in, each hour holding the seconds inside it; its counts (jobs, waits, GPUs idle in multi-GPU jobs,
jobs without metrics, GPU records per metric source) are in the hour it started. So a report period made of whole
buckets is exactly their sum: a run crossing the period's edge brings the part inside it, and is counted in the
period it started in, with no run-by-run correction (that correction cost 38 s of a year by user x day on 10M
records). Days are sums of their hours, months of their days.

Why hours: a report's periods start at midnight in its time zone (--tz), and for every zone a whole number of
hours off UTC (nearly all) that is an hour edge, so a local day or week is a run of whole UTC hours (with whole
UTC days inside it).

Exactness: a day's hour rows are recomputed from jobs and job_gpus with the per-run SQL the reports use
(slurmkit/store/runsql.py), from every run that started in or ran into the day; its GPU records per metric
source go to usage_rollup_sources, one row per source. rollup_buckets keeps, per hour, the latest end of the runs
that started in it (max_end): which earlier hours' runs reach into a day. Every writer of jobs or job_gpus calls
mark() for the runs it touches, in its own transaction (before a change that may move a run to another hour, and
after), which flags their start hours stale with their end; reports treat every bucket a stale hour's runs may
reach as stale too, and refresh() (run by `sk admin ingest` after each commit) recomputes the days they ran in.
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

# The 24 hours of the UTC day given as the one parameter: a derived table d(h).
_DAY_HOURS = ("(SELECT CAST(? AS BIGINT) + o AS h FROM ("
              + " UNION ALL ".join(f"SELECT {h} AS o" for h in range(0, DAY, HOUR)) + ") t)")
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
    """The hour rows of one UTC day [lo, hi), every hour of it in one statement, from the runs that started in
    [first, hi) and ran into the day or started in it (first: the earliest start hour whose runs reach the day).
    Each run is joined to the hours of the day it ran in (and its start hour): its seconds inside each, counted
    (`first`) in its start hour only. Parameters, in order: idle threshold, first, hi, lo, lo (CTE g), lo (the
    day's hours), first, hi, lo, lo."""
    runs = "j.start_time >= ? AND j.start_time < ? AND (j.end_time > ? OR j.start_time >= ?)"
    g_sql = runsql.per_run_gpus(jobs_filter=runs)
    seconds = (f"((CASE WHEN j.end_time < d.h + {HOUR} THEN j.end_time ELSE d.h + {HOUR} END)"
               " - (CASE WHEN j.start_time > d.h THEN j.start_time ELSE d.h END))")
    first = "(CASE WHEN j.start_time >= d.h THEN 1 ELSE 0 END)"
    figures = runsql.select_list(runsql.run_figures(seconds=seconds, first=first))
    keys = ", ".join(KEY_COLUMNS)
    return f"""INSERT INTO usage_rollup (lo, hi, {keys}, {', '.join(SUM_COLUMNS)})
WITH {g_sql},
r AS (
    SELECT d.h AS h, {', '.join(f'j.{k} AS {k}' for k in KEY_COLUMNS)}, {figures}
    FROM jobs j
    JOIN {_DAY_HOURS} d ON j.start_time < d.h + {HOUR} AND (j.end_time > d.h OR j.start_time >= d.h)
    LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
    WHERE j.gpus > 0 AND j.end_time IS NOT NULL AND {runs}
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
    inside = f"WHERE lo >= ? AND hi <= ? AND hi - lo = {part} AND lo / {part} * {part} = lo"  # no zone day
    return (f"INSERT INTO usage_rollup (lo, hi, {keys}, {', '.join(SUM_COLUMNS)})\n"
            f"SELECT ?, ?, {keys}, {runsql.sums()} FROM usage_rollup {inside} GROUP BY {keys}",
            f"INSERT INTO {SOURCES_TABLE} (lo, hi, {keys}, source, gpu_records)\n"
            f"SELECT ?, ?, {keys}, source, SUM(gpu_records) FROM {SOURCES_TABLE} {inside} GROUP BY {keys}, source")


def refresh(store: Store, idle_pct: float | None = None) -> int:
    """Recompute, in one transaction, every UTC day that the runs of the stale hours started in or ran into
    (their max_end), then the months holding those days: one statement per day and table. Returns the stale
    hours found."""
    idle_pct = IDLE_UTIL_PCT if idle_pct is None else idle_pct
    with store.transaction() as cur:
        lock = " FOR UPDATE" if store.dialect == "postgresql" else ""
        cur.execute(store.sql(f"SELECT lo, max_end FROM rollup_buckets WHERE hi - lo = {HOUR} "
                              f"AND (stale = 1 OR idle_pct IS NULL OR idle_pct <> ?) ORDER BY lo{lock}"), [idle_pct])
        stale = cur.fetchall()
        days = sorted({d for lo, end in stale for d in _days_of(lo, end)})
        if not days:
            return 0
        firsts = _first_starts(store, cur, days)
        hours_sql, sources_sql = store.sql(_refresh_hours_sql()), store.sql(_refresh_hour_sources_sql())
        day_sql = [store.sql(q) for q in _refresh_sum_sql(HOUR)]
        month_sql = [store.sql(q) for q in _refresh_sum_sql(DAY)]
        hour_buckets = store.sql(_HOUR_BUCKETS_SQL)
        for lo in days:
            hi, first = lo + DAY, firsts[lo]
            for table in ("usage_rollup", SOURCES_TABLE):
                cur.execute(store.sql(f"DELETE FROM {table} WHERE lo >= ? AND hi <= ? AND hi - lo = {HOUR}"),
                            [lo, hi])
            cur.execute(hours_sql, [idle_pct, first, hi, lo, lo, lo, first, hi, lo, lo])
            cur.execute(sources_sql, [lo, hi, lo, hi])
            cur.execute(hour_buckets, [lo, idle_pct])
            _sum_bucket(store, cur, day_sql, lo, hi, idle_pct)
        # every hour is fresh now: the registered zones' local days over these UTC days, sums of their hours
        for zone in zones(store):
            for lo, hi in sorted({b for d in days for b in local_days(zone, d, d + DAY)}):
                _sum_bucket(store, cur, day_sql, lo, hi, idle_pct)
        for lo, hi in sorted({month_of(lo) for lo in days}):
            _sum_bucket(store, cur, month_sql, lo, hi, idle_pct)
    return len(stale)


def local_days(zone: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """[start, end) of the days in `zone` that overlap [lo, hi), as epoch seconds: those whose edges are hour
    edges (a zone 30 or 45 minutes off UTC has none: its reports read hours and the parts of hours)."""
    from datetime import timedelta
    from zoneinfo import ZoneInfo

    tz = ZoneInfo(zone)
    day = datetime.fromtimestamp(lo, tz).date()
    out = []
    while True:
        start = int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp())
        nxt = day + timedelta(days=1)
        end = int(datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz).timestamp())
        if start >= hi:
            return out
        if end > lo and start % HOUR == 0 and end % HOUR == 0 and (start % DAY, end - start) != (0, DAY):
            out.append((start, end))  # (a UTC day itself is kept already)
        day = nxt


def _days_of(lo: int, max_end: int | None) -> range:
    """The UTC days that the runs starting in hour `lo` and ending by `max_end` ran in."""
    last = max(lo, (max_end or lo) - 1)
    return range(lo // DAY * DAY, last // DAY * DAY + DAY, DAY)


def _first_starts(store: Store, cur, days: list[int]) -> dict[int, int]:
    """Per day: the earliest start hour whose runs reach into it (max_end after its start), else the day itself.
    max_end is never below the truth (mark() raises it before refresh() lowers it to the exact value)."""
    firsts = {d: d for d in days}
    cur.execute(store.sql(f"SELECT lo, max_end FROM rollup_buckets WHERE hi - lo = {HOUR} AND lo < ? AND max_end > ?"),
                [days[-1], days[0]])
    wanted = set(days)
    for lo, end in cur.fetchall():
        for d in _days_of(lo, end)[1:]:  # the later days its runs reach
            if d in wanted and lo < firsts[d]:
                firsts[d] = lo
    return firsts


# The 24 hour buckets of a refreshed day [?, ? + DAY) (parameters: the day, the idle threshold): clean, with the
# latest end of the runs that started in each (NULL where none did; reports read it as "reaches no later hour").
_HOUR_BUCKETS_SQL = f"""INSERT INTO rollup_buckets (lo, hi, max_end, stale, idle_pct)
SELECT d.h, d.h + {HOUR}, (SELECT MAX(COALESCE(j.end_time, j.start_time)) FROM jobs j
                           WHERE j.start_time >= d.h AND j.start_time < d.h + {HOUR}), 0, p.idle
FROM {_DAY_HOURS} d CROSS JOIN (SELECT CAST(? AS DOUBLE PRECISION) AS idle) p
WHERE 1 = 1
ON CONFLICT (lo, hi) DO UPDATE SET stale = 0, idle_pct = excluded.idle_pct, max_end = excluded.max_end"""


def _sum_bucket(store: Store, cur, sql: list[str], lo: int, hi: int, idle_pct: float) -> None:
    """A day's or month's rows and bucket, from its parts' (clean, just recomputed)."""
    for table, statement in zip(("usage_rollup", SOURCES_TABLE), sql, strict=True):
        cur.execute(store.sql(f"DELETE FROM {table} WHERE lo = ? AND hi = ?"), [lo, hi])
        cur.execute(statement, [lo, hi, lo, hi])
    cur.execute(store.sql("INSERT INTO rollup_buckets (lo, hi, stale, idle_pct) VALUES (?, ?, 0, ?) "
                          "ON CONFLICT (lo, hi) DO UPDATE SET stale = 0, idle_pct = excluded.idle_pct"),
                [lo, hi, idle_pct])


def rebuild(store: Store, idle_pct: float | None = None, zones: Iterable[str] = ()) -> int:
    """Mark every hour that holds job runs stale and refresh: for stores written by hand or by an older slurmkit.
    `zones` (IANA names, checked by the caller) are added to those whose local days are kept. Returns the hours
    recomputed."""
    with store.transaction() as cur:
        for zone in zones:
            cur.execute(store.sql("INSERT INTO rollup_zones (zone) VALUES (?) ON CONFLICT (zone) DO NOTHING"), [zone])
        cur.execute(store.sql(BACKFILL_SQL))
    return refresh(store, idle_pct)


def zones(store: Store) -> list[str]:
    """The time zones whose local days the rollup keeps."""
    return [z for (z,) in store.execute("SELECT zone FROM rollup_zones ORDER BY zone").fetchall()]


# Every hour holding job runs, stale (the days and months are recomputed with their hours). Also migration 0004's.
BACKFILL_SQL = f"""INSERT INTO rollup_buckets (lo, hi, max_end, stale)
SELECT start_time / {HOUR} * {HOUR}, start_time / {HOUR} * {HOUR} + {HOUR}, MAX(COALESCE(end_time, start_time)), 1
FROM jobs WHERE start_time IS NOT NULL GROUP BY start_time / {HOUR}
ON CONFLICT (lo, hi) DO UPDATE SET stale = 1, max_end = excluded.max_end"""
