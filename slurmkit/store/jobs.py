"""Job records (slurmkit/record.py, kind "job") -> jobs rows, one per (cluster, job_id, run).

The writers (ingest of the spool, reconcile and import-sacct: slurmkit/accounting/) build records; this module
is the one place that turns a record into a row and knows how a row is upserted.
"""

from __future__ import annotations

from typing import Any

from slurmkit.record import JOB_COLUMNS, JOB_FIELDS, JOB_KEY

# A hook record without a trustworthy allocation (scontrol failed, or answered about a later run) never replaces
# a row that has one: e.g. the same spool file ingested again after `sk admin reconcile` completed its row.
# '%%': psycopg reads a single % as a placeholder; to SQLite's LIKE, %% is two wildcards, i.e. the same pattern.
_INCOMPLETE = "(COALESCE({t}.flags, '') LIKE '%%no-scontrol%%' OR COALESCE({t}.flags, '') LIKE '%%run-uncertain%%')"


def row(rec: dict, node_types: dict[str, str] | None = None) -> tuple:
    """The jobs row of a validated job record. `node_types` (the site's partition -> node type map) fills
    node_type where the record has none: the hook does not read the site config, so ingest names it."""
    if node_types and not rec.get("node_type") and rec.get("partition"):
        rec = {**rec, "node_type": node_types.get(rec["partition"])}
    return tuple(f.default if rec.get(f.name) is None else rec[f.name] for f in JOB_FIELDS)


def upsert_sql() -> str:
    """INSERT of a row, replacing the row of the same run unless that would lose an allocation."""
    cols = ", ".join(JOB_COLUMNS)
    marks = ", ".join("?" for _ in JOB_COLUMNS)
    updates = ", ".join(f"{c} = excluded.{c}" for c in JOB_COLUMNS if c not in JOB_KEY)
    return (f"INSERT INTO jobs ({cols}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(JOB_KEY)}) DO UPDATE SET {updates} "
            f"WHERE NOT {_INCOMPLETE.format(t='excluded')} OR {_INCOMPLETE.format(t='jobs')}")


def insert_new_sql() -> str:
    """INSERT of a row only where no row describes that run yet (reconcile's inserts)."""
    return (f"INSERT INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({', '.join('?' for _ in JOB_COLUMNS)}) "
            f"ON CONFLICT ({', '.join(JOB_KEY)}) DO NOTHING")


def last_ingest(store: Any) -> int | None:
    """When a job run was last stored (ingest or reconcile), epoch seconds; None for an empty store."""
    row = store.execute("SELECT MAX(ingested_at) FROM jobs").fetchone()
    return int(row[0]) if row and row[0] is not None else None
