"""What has been sent, in the accounting store's `notices` table (migration 0006), so no job run is noticed twice.

The row is inserted and the message sent inside one transaction, committed only once the SMTP server took the
message: a failed send rolls the row back and the next run tries again; two notifiers running at once serialize
on the row (SQLite: the write lock taken at BEGIN IMMEDIATE; PostgreSQL: the second INSERT of the key waits for
the first transaction, then inserts nothing). Left open: a crash between the server's acceptance and the commit
sends that one message again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from slurmkit.store.db import Store, current_version

IDLE_GPUS = "idle-gpus"
VERSION = 6  # the migration that creates the table


@dataclass(frozen=True)
class Notice:
    notice: str
    cluster: str
    job_id: int
    run: int
    user_name: str | None
    recipient: str
    phase: str
    idle_gpus: int
    idle_s: float
    message_id: str | None


def has_table(store: Store) -> bool:
    return current_version(store) >= VERSION


def sent_keys(store: Store, notice: str = IDLE_GPUS) -> set[tuple[str, int, int]]:
    """(cluster, job_id, run) of every job run already sent this notice; empty on a store not yet migrated."""
    if not has_table(store):
        return set()
    rows = store.execute("SELECT cluster, job_id, run FROM notices WHERE notice = ?", (notice,)).fetchall()
    store.end_read()  # the sends below each open their own transaction
    return {(c, int(j), int(r)) for c, j, r in rows}


def send_once(store: Store, n: Notice, send: Callable[[], None], *, now: float | None = None) -> bool:
    """Record `n` and call `send` in one transaction. False (nothing sent) when the job run already has this
    notice; an exception from `send` rolls the record back and propagates."""
    with store.transaction():
        cur = store.execute(
            "INSERT INTO notices (notice, cluster, job_id, run, user_name, recipient, phase, idle_gpus, idle_s, "
            "sent_at, message_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (notice, cluster, job_id, run) DO NOTHING",
            (n.notice, n.cluster, n.job_id, n.run, n.user_name, n.recipient, n.phase, n.idle_gpus,
             round(n.idle_s, 1), int(time.time() if now is None else now), n.message_id))
        if cur.rowcount != 1:
            return False  # already sent: the insert did nothing, so the commit writes nothing
        send()  # raises -> the transaction rolls the record back
    return True
