"""`sk admin notify`: mail job owners about their jobs (slurmkit/notify)."""

from __future__ import annotations

import sys
import time

import click

from slurmkit.cli.admin import _store_errors, store_option, timeout_option
from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option
from slurmkit.config.when import FORMS
from slurmkit.errors import InputError, Problem


@click.group("notify")
def notify() -> None:
    """Notices to job owners by mail (the site config's notify: section)."""


def _print_message(msg) -> None:  # type: ignore[no-untyped-def]
    for header in ("From", "To", "Subject"):
        click.echo(f"{header}: {msg[header]}")
    click.echo()
    click.echo(msg.get_content().rstrip("\n"))


@notify.command("idle")
@site_option
@click.option("--idle-for", metavar="LENGTH",
              help="Notice a GPU idle at least this long: 30m, 1h, 2d (default: notify.idle_for, else 1h).")
@click.option("--since", default="1d", show_default=True, metavar="WHEN",
              help=f"Finished jobs that ended since then (local time): {FORMS}.")
@click.option("--state-dir", metavar="DIR",
              help="The node samplers' state directory (default: site accounting.state_dir).")
@store_option
@click.option("--running/--no-running", default=True, show_default=True,
              help="Look at running jobs (the samplers' live files).")
@click.option("--finished/--no-finished", default=True, show_default=True,
              help="Look at finished jobs (the accounting store).")
@click.option("--dry-run", is_flag=True, help="Print the messages; send and record nothing.")
@timeout_option
@json_option
@handle_errors
def idle_cmd(site_path: str | None, idle_for: str | None, since: str, state_dir: str | None,
             store_url: str | None, running: bool, finished: bool, dry_run: bool, timeout_s: float,
             as_json: bool) -> None:
    """Mail the owner of every job whose GPUs sat idle: running jobs with a GPU idle for longer than --idle-for
    (the node samplers' readings; Slurm confirms the job runs and names its owner) and finished jobs with such
    GPUs (the accounting store). Idle is below the accounting's idle threshold (5 % utilization).

    One message per job run, ever: what was sent is recorded in the store (notices) in the same transaction
    as the send, committed only when the SMTP server took the message; a failed send is retried by the next
    run. Exit status 1 when a message could not be sent (or has no address).

    \b
    Examples:
      sk admin notify idle --dry-run                      # what would be sent, to whom
      sk admin notify idle                                # from a timer, e.g. every 15 minutes
      sk admin notify idle --idle-for 2h --since 7d --json
    """
    import os

    from slurmkit.config.when import to_epoch
    from slurmkit.notify import FAILED, NO_ADDRESS, NOT_TRIED, SENT, WOULD_SEND, deliver, idle, ledger, mail
    from slurmkit.site.model import resolve_site
    from slurmkit.store.db import is_postgres, open_store

    start = to_epoch(since, option="--since")  # the options first: a usage error needs no site config
    if idle_for:
        mail.idle_for_seconds(idle_for, option="--idle-for")
    if not (running or finished):
        raise InputError(Problem("--no-running and --no-finished leave nothing to look at", key="--no-running"))
    site = resolve_site(site_path)
    cfg = site.notify
    if cfg is None and not dry_run:
        raise InputError(Problem("there is no notify: section: no SMTP server to send through",
                                 file=site.source_file, key="notify",
                                 hint="add notify: {sender: 'HPC support <hpc@example.edu>', domain: example.edu, "
                                      "smtp_host: ...} (docs/accounting.md), or use --dry-run"))
    idle_for_s = mail.idle_for_seconds(idle_for, option="--idle-for") if idle_for else \
        mail.idle_for_seconds(cfg.idle_for if cfg else mail.DEFAULT_IDLE_FOR, option="notify.idle_for")
    acc = site.accounting
    store_url = store_url or acc.store
    state_dir = state_dir or acc.state_dir
    password = mail.read_password(site) if cfg is not None and not dry_run else None

    after = "nothing was recorded for the messages not reported as sent; run it again"
    with _store_errors(store_url, after):
        store = None
        if not dry_run:
            store = open_store(store_url, group=acc.admin_group, timeout_s=timeout_s)
        elif is_postgres(store_url) or os.path.exists(store_url):
            store = open_store(store_url, migrate=False, timeout_s=timeout_s)  # a dry run changes nothing
        try:
            sent = ledger.sent_keys(store) if store is not None else set()
            jobs: list[idle.IdleJob] = []
            notes: list[str] = []
            if running:
                jobs, notes = idle.running_idle(state_dir, idle_for_s, site.cluster, skip=sent.__contains__)
            if finished and store is not None:
                seen = sent | {j.key for j in jobs}
                jobs += idle.finished_idle(store, start, idle_for_s, skip=seen.__contains__)
            mailer = mail.Mailer(cfg, password) if cfg is not None and not dry_run else None
            try:
                outcomes = deliver(store, jobs, cfg, dry_run=dry_run, mailer=mailer, sent=sent)
            finally:
                if mailer is not None:
                    mailer.close()
        finally:
            if store is not None:
                store.close()

    bad = [o for o in outcomes if o.status in (FAILED, NO_ADDRESS, NOT_TRIED)]
    if as_json:
        echo_json({"dry_run": dry_run, "idle_for_s": idle_for_s, "since": start, "checked_at": int(time.time()),
                   "jobs": [o.as_dict() for o in outcomes], "notes": notes})
    else:
        for note in notes:
            click.echo(f"note: {note}", err=True)
        for o in outcomes:
            j = o.job
            what = f"job {j.ref}{f' ({j.job_name})' if j.job_name else ''} of {j.user}: {len(j.idle)} of {j.gpus} " \
                f"GPUs idle for {mail.duration_words(j.idle_s)} ({j.phase})"
            if o.status == WOULD_SEND:
                click.echo(f"--- would send ({what}){': ' + o.error if o.error else ''}")
                _print_message(o.message)
                click.echo()
            elif o.status == SENT:
                click.echo(f"sent to {o.recipient}: {what}")
            elif o.status in (FAILED, NOT_TRIED, NO_ADDRESS):
                click.echo(f"{o.status}: {what}: {o.error}; not recorded, the next run tries again", err=True)
        counts = {s: sum(o.status == s for o in outcomes) for s in dict.fromkeys(o.status for o in outcomes)}
        summary = ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"
        click.echo(f"{len(outcomes)} job runs with GPUs idle for {mail.duration_words(idle_for_s)} or more: "
                   f"{summary}" + ("; dry run: nothing was sent or recorded" if dry_run else ""))
    if bad:
        sys.exit(1)
