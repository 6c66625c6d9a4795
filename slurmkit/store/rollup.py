"""The usage rollup: per UTC day and month, the report figures of the job runs that start there, summed per key.

Why: SQLite sorts for every GROUP BY (no hash aggregation), so a report that groups 1M job runs costs seconds
however the SQL is written. Summed ahead per (bucket, cluster, user, account, partition, gpu type, node type,
qos), a report adds up tens of thousands of rows instead, and computes exactly, run by run, only the runs the
rollup cannot place: those crossing a report period's edge and those in stale or partial buckets
(slurmkit/report/query.py).

Exactness: a bucket's rows are recomputed from jobs and job_gpus with the report's own per-run expressions. Every
writer of jobs or job_gpus calls mark() for the runs it touches, in its own transaction (before a change that may
move a run to another day, and after), which flags their days stale; reports never use a stale bucket, and
refresh() (run by `sk admin ingest` after each commit) recomputes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone

from slurmkit.store.db import Store

DAY = 86400
KEY_COLUMNS = ("cluster", "user_name", "account", "partition", "gpu_types", "node_type", "qos")
SUM_COLUMNS = ("jobs", "gpu_s", "measured_s", "util_s", "idle_s", "idle_multi", "idle_multi_s", "no_metrics",
               "wait_sum", "wait_n", "wait_max", "n_nvml", "n_dcgm", "n_slurm", "n_simulated")

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
    """Flag stale the days of `runs`: (cluster, job_id, run) keys, or (cluster, job_id) for every run of a job.

    Call inside the writer's transaction, before a change that may move or remove a run and after any change."""
    cur = cur or store.conn.cursor()
    marks = set()
    for key in set(runs):
        where = "cluster = ? AND job_id = ?" + (" AND run = ?" if len(key) > 2 else "")
        cur.execute(store.sql(f"SELECT start_time, end_time FROM jobs WHERE {where} AND start_time IS NOT NULL"),
                    key)
        for start, end in cur.fetchall():
            lo = start // DAY * DAY
            marks.add((lo, lo + DAY, end if end is not None else start))
    if marks:
        cur.executemany(store.sql(_MARK_SQL), sorted(marks))


def _refresh_day_sql() -> str:
    from slurmkit.report.query import run_figures_sql

    figures, g_sql = run_figures_sql(seconds="(j.end_time - j.start_time)", first="1",
                                     jobs_filter="j.start_time >= ? AND j.start_time < ?")
    sums = ", ".join(f"{'MAX' if c == 'wait_max' else 'SUM'}({c})" for c in SUM_COLUMNS)
    keys = ", ".join(KEY_COLUMNS)
    return f"""INSERT INTO usage_rollup (lo, hi, {keys}, {', '.join(SUM_COLUMNS)})
WITH {g_sql},
r AS (
    SELECT {', '.join(f'j.{k} AS {k}' for k in KEY_COLUMNS)}, {figures}
    FROM jobs j LEFT JOIN g ON g.cluster = j.cluster AND g.job_id = j.job_id AND g.run = j.run
    WHERE j.gpus > 0 AND j.end_time IS NOT NULL AND j.start_time >= ? AND j.start_time < ?
)
SELECT ?, ?, {keys}, {sums} FROM r GROUP BY {keys}"""


def _refresh_month_sql() -> str:
    sums = ", ".join(f"{'MAX' if c == 'wait_max' else 'SUM'}({c})" for c in SUM_COLUMNS)
    keys = ", ".join(KEY_COLUMNS)
    return f"""INSERT INTO usage_rollup (lo, hi, {keys}, {', '.join(SUM_COLUMNS)})
SELECT ?, ?, {keys}, {sums} FROM usage_rollup
WHERE lo >= ? AND hi <= ? AND hi - lo = {DAY} GROUP BY {keys}"""


def refresh(store: Store, idle_pct: float | None = None) -> int:
    """Recompute the stale days (and the months holding them) in one transaction. Returns the days recomputed."""
    from slurmkit.report.figures import IDLE_UTIL_PCT

    idle_pct = IDLE_UTIL_PCT if idle_pct is None else idle_pct
    if store.dialect == "sqlite":
        store.conn.execute("BEGIN IMMEDIATE")
    cur = store.conn.cursor()
    try:
        lock = " FOR UPDATE" if store.dialect == "postgresql" else ""
        cur.execute(store.sql(f"SELECT lo, hi FROM rollup_buckets WHERE hi - lo = {DAY} "
                              f"AND (stale = 1 OR idle_pct IS NULL OR idle_pct <> ?) ORDER BY lo{lock}"), [idle_pct])
        days = cur.fetchall()
        day_sql, month_sql = store.sql(_refresh_day_sql()), store.sql(_refresh_month_sql())
        for lo, hi in days:
            cur.execute(store.sql("DELETE FROM usage_rollup WHERE lo = ? AND hi = ?"), [lo, hi])
            cur.execute(day_sql, [idle_pct, lo, hi, lo, hi, lo, hi])
            cur.execute(store.sql("UPDATE rollup_buckets SET stale = 0, idle_pct = ?, max_end = (SELECT MAX("
                                  "COALESCE(end_time, start_time)) FROM jobs WHERE start_time >= ? AND start_time "
                                  "< ?) WHERE lo = ? AND hi = ?"), [idle_pct, lo, hi, lo, hi])
        for lo, hi in sorted({month_of(lo) for lo, _ in days}):
            cur.execute(store.sql("DELETE FROM usage_rollup WHERE lo = ? AND hi = ?"), [lo, hi])
            cur.execute(month_sql, [lo, hi, lo, hi])
            cur.execute(store.sql("INSERT INTO rollup_buckets (lo, hi, stale, idle_pct) VALUES (?, ?, 0, ?) "
                                  "ON CONFLICT (lo, hi) DO UPDATE SET stale = 0, idle_pct = excluded.idle_pct"),
                        [lo, hi, idle_pct])
    except BaseException:
        store.conn.rollback() if store.dialect == "postgresql" else store.conn.execute("ROLLBACK")
        raise
    store.conn.commit() if store.dialect == "postgresql" else store.conn.execute("COMMIT")
    return len(days)


def rebuild(store: Store, idle_pct: float | None = None) -> int:
    """Mark every day that holds job runs stale and refresh: for stores written by hand or by an older slurmkit."""
    cur = store.conn.cursor()
    cur.execute(f"""INSERT INTO rollup_buckets (lo, hi, max_end, stale)
SELECT start_time / {DAY} * {DAY}, start_time / {DAY} * {DAY} + {DAY}, MAX(COALESCE(end_time, start_time)), 1
FROM jobs WHERE start_time IS NOT NULL GROUP BY start_time / {DAY}
ON CONFLICT (lo, hi) DO UPDATE SET stale = 1, max_end = excluded.max_end""")
    if store.dialect == "postgresql":
        store.conn.commit()
    return refresh(store, idle_pct)
