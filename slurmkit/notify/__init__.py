"""Notices to job owners (Job Defense Shield's role): `sk admin notify idle` mails the owner of every job whose GPUs
sat idle, once per job run.

idle.py finds the jobs (running: the node samplers' live files; finished: the accounting store), mail.py writes
and sends the message (SMTP as the site config's `notify:` section says), ledger.py remembers what was sent (the
store's `notices` table). This module puts them together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmkit.notify import ledger
from slurmkit.notify.idle import IdleJob

SENT, WOULD_SEND, ALREADY, NO_ADDRESS, FAILED, NOT_TRIED = (
    "sent", "would-send", "already-sent", "no-address", "failed", "not-tried")


@dataclass
class Outcome:
    job: IdleJob
    status: str
    recipient: str | None = None
    message: Any = None  # the EmailMessage (dry runs print it)
    error: str | None = None

    def as_dict(self) -> dict:
        out = {**self.job.as_dict(), "status": self.status, "recipient": self.recipient, "error": self.error}
        if self.message is not None:
            out["subject"] = str(self.message["Subject"])
            out["message_id"] = str(self.message["Message-ID"])
        return out


def deliver(store: Any, jobs: list[IdleJob], notify: Any | None, *, dry_run: bool, mailer: Any = None,
            sent: set[tuple[str, int, int]] | None = None) -> list[Outcome]:
    """One outcome per job run: sent (recorded in the store), or why not. A run already in the store's notices is
    never sent again; after the SMTP server could not be reached the remaining messages are not tried."""
    from slurmkit.notify import mail

    sent = set() if sent is None else sent
    out: list[Outcome] = []
    unreachable: str | None = None
    for job in jobs:
        if job.key in sent:
            out.append(Outcome(job, ALREADY))
            continue
        to = mail.recipient(notify, job.user)
        msg = mail.compose(job, notify, to)
        if to is None:
            why = "no owner known" if not job.user else f"no address for user {job.user}: set notify.domain or " \
                "notify.addresses"
            out.append(Outcome(job, WOULD_SEND if dry_run else NO_ADDRESS, None, msg, why))
            continue
        if dry_run:
            out.append(Outcome(job, WOULD_SEND, to, msg))
            continue
        if unreachable:
            out.append(Outcome(job, NOT_TRIED, to, msg, unreachable))
            continue
        notice = ledger.Notice(ledger.IDLE_GPUS, job.cluster, job.job_id, job.run, job.user, to, job.phase,
                               len(job.idle), job.idle_s, str(msg["Message-ID"]))
        try:
            done = ledger.send_once(store, notice, lambda m=msg: mailer.send(m))
        except mail.SendError as exc:
            out.append(Outcome(job, FAILED, to, msg, str(exc)))
            if exc.connection:
                unreachable = f"not tried: {exc}"
            continue
        sent.add(job.key)
        out.append(Outcome(job, SENT if done else ALREADY, to, msg))
    return out
