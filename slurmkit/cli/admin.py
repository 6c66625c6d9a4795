"""`sk admin`: accounting administration (spool -> store, and the store checked against Slurm's own records)."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option
from slurmkit.cli.lazy import LazyGroup
from slurmkit.config.when import FORMS
from slurmkit.errors import InputError, Problem, StoreError

spool_option = click.option("--spool", "spool_dir", metavar="DIR",
                            help="Spool directory (default: site accounting.spool_dir).")
store_option = click.option("--store", "store_url", metavar="URL",
                            help="SQLite path or postgresql:// URL (default: site accounting.store).")
timeout_option = click.option("--timeout", "timeout_s", type=click.FloatRange(min=0.1), default=30.0,
                              show_default=True, metavar="SECONDS",
                              help="How long to wait for a locked or unreachable store before giving up.")


@click.group("admin", cls=LazyGroup, lazy={"notify": "slurmkit.cli.notify:notify",
                                           "exporter": "slurmkit.cli.exporter:exporter"})
def admin() -> None:
    """Accounting administration: move hook records from the spool into the store, and check the store
    against Slurm's accounting database (reconcile, import-sacct); mail owners of idle GPUs (notify idle); serve
    the figures to Prometheus (exporter)."""


@dataclass
class _Accounting:
    """Where the records are and what the site says about them: explicit options win, the rest comes from the
    site config (none found: `site` is False). A store created from explicit paths alone (no --site) is its
    owner's alone: `group` (and `transport`) come from the site only where it named the locations or was given;
    the partition map is read from whichever site config is found."""

    spool_dir: str
    store_url: str
    group: str | None = None
    transport: str | None = None
    node_types: dict[str, str] = field(default_factory=dict)  # partition -> node type, the jobs' node_type
    site: bool = False


def _accounting(site_path: str | None, spool_dir: str | None, store_url: str | None) -> _Accounting:
    from slurmkit.errors import SiteConfigError
    from slurmkit.site.model import find_site_file, load_site, partition_node_types

    try:
        path = find_site_file(site_path)
    except SiteConfigError:
        if site_path or not (spool_dir and store_url):
            raise
        _check_spool(spool_dir)  # type: ignore[arg-type]
        return _Accounting(spool_dir, store_url)  # type: ignore[arg-type]
    site = load_site(path)
    acc = site.accounting
    named = bool(site_path or not (spool_dir and store_url))
    _check_spool(spool_dir or acc.spool_dir)
    return _Accounting(spool_dir or acc.spool_dir, store_url or acc.store, acc.admin_group if named else None,
                       acc.transport if named else None, partition_node_types(site), True)


def _check_spool(spool_dir: str) -> None:
    """A spool that exists must be a real directory: a file, /dev/null or a link is refused before any work
    (the hooks create a missing one)."""
    import os
    import stat

    try:
        mode = os.lstat(spool_dir).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(Problem(f"cannot read the spool {spool_dir}: {exc.strerror}", key="--spool")) from exc
    if not stat.S_ISDIR(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a directory"
        raise InputError(Problem(f"the spool {spool_dir} is {kind}", key="--spool",
                                 hint="give the spool directory the hooks write into (site accounting.spool_dir)"))


@contextlib.contextmanager
def _store_errors(url: str, after: str) -> Iterator[None]:
    """Driver errors (locked SQLite, PostgreSQL gone) as a StoreError saying what happens to the records."""
    import sqlite3

    driver_errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
    try:
        import psycopg

        driver_errors += (psycopg.Error,)
    except ImportError:  # pragma: no cover - depends on the installed extras
        pass
    try:
        yield
    except driver_errors as exc:
        raise StoreError(f"the accounting store {url} failed: {str(exc).strip()}", hint=after) from exc


@admin.command("ingest")
@site_option
@spool_option
@store_option
@timeout_option
@json_option
@handle_errors
def ingest_cmd(site_path: str | None, spool_dir: str | None, store_url: str | None, timeout_s: float,
               as_json: bool) -> None:
    """Ingest spooled job records into the store (idempotent; safe to rerun or kill).

    A record leaves the spool only after the store committed it; if the store is locked or down, the records
    stay spooled and the next run ingests them. A record that cannot be stored goes to DIR/quarantine/ with a
    .reason file and the rest is ingested; the exit status is then 3.

    \b
    Examples:
      sk admin ingest                                     # spool and store from the site config
      sk admin ingest --spool /var/spool/slurmkit --store /var/lib/slurmkit/accounting.db
      sk admin ingest --store postgresql://slurmkit@dbhost/accounting --json
    """
    from slurmkit.accounting.ingest import EXIT_QUARANTINED, ingest
    from slurmkit.store.db import open_store

    acc = _accounting(site_path, spool_dir, store_url)
    if not acc.site:
        click.echo("sk admin ingest: no site config found, so jobs are stored without their node type "
                   "(sk report --by node_type); pass --site FILE", err=True)
    after = "nothing was lost: the records stay in the spool; run sk admin ingest again once the store is back"
    with _store_errors(acc.store_url, after):
        try:
            store = open_store(acc.store_url, group=acc.group, timeout_s=timeout_s)
        except StoreError as exc:
            raise StoreError(exc.message, hint=exc.hint or after) from exc
        with store:
            res = ingest(store, acc.spool_dir, node_types=acc.node_types)
    if as_json:
        echo_json(vars(res))
    else:
        click.echo(f"ingested {res.ingested}, quarantined {res.quarantined}, still spooled {res.remaining}")
    if res.quarantined:
        click.echo(f"sk admin ingest: {res.quarantined} records quarantined in {acc.spool_dir}/quarantine "
                   "(each with a .reason file); fix or remove them there", err=True)
        sys.exit(EXIT_QUARANTINED)


def _window(since: str, until: str | None) -> tuple[int, int | None]:
    from slurmkit.config.when import to_epoch

    now = time.time()
    start = to_epoch(since, now=now, option="--since")
    stop = to_epoch(until, now=now, option="--until") if until else None
    if start >= (stop if stop is not None else now):
        end = "--until" if stop is not None else "now"
        raise InputError(Problem(f"--since {since!r} is not before {end}", key="--since",
                                 hint="give the start of the window first, e.g. --since 2d or --since 2026-11-01"))
    return start, stop


def _chunk_seconds(text: str) -> int:
    from slurmkit.config.when import span_seconds

    seconds = span_seconds(text)
    if seconds is None or seconds < 60:
        raise InputError(Problem(f"--chunk {text!r} is not a length of at least a minute", key="--chunk",
                                 hint="use e.g. 1d, 12h or 1w"))
    return seconds


def _run_reconcile(mode: str, site_path: str | None, since: str, until: str | None, store_url: str | None,
                   spool_dir: str | None, cluster: str | None, chunk: str, dry_run: bool, quiet: bool,
                   timeout_s: float, as_json: bool, admin_comment: bool | None = None) -> None:
    from slurmkit.accounting.reconcile import reconcile
    from slurmkit.store.db import open_store

    start, stop = _window(since, until)
    chunk_s = _chunk_seconds(chunk)
    acc = _accounting(site_path, spool_dir, store_url)
    if admin_comment is None:
        admin_comment = "admin_comment" in (acc.transport or "spool").split("+")
    progress = None if quiet else (lambda line: click.echo(line, err=True))
    after = "changes are made per sacct slice in one transaction each; run the same command again"
    with _store_errors(acc.store_url, after), \
            open_store(acc.store_url, group=acc.group, timeout_s=timeout_s) as store:
        res = reconcile(store, start, stop, mode=mode, spool_dir=acc.spool_dir, cluster=cluster, dry_run=dry_run,
                        chunk_s=chunk_s, progress=progress, admin_comment=admin_comment,
                        node_types=acc.node_types)
    if as_json:
        echo_json(res.as_dict())
        return
    fmt = "%Y-%m-%d %H:%M"
    window = f"{time.strftime(fmt, time.localtime(start))} .. " + (
        time.strftime(fmt, time.localtime(stop)) if stop is not None else "now") + f" ({time.strftime('%Z')})"
    done = {"insert": "inserted", "renumber": "renumbered", "remove-duplicate": "duplicates removed",
            "complete": "completed", "refresh": "refreshed", "fill": "filled",
            "gpus": "node GPU summaries added from AdminComment"}
    summary = ", ".join(f"{n} {done[action]}" for action, n in sorted(res.counts().items())) or "nothing to change"
    click.echo(f"{mode} {window}: {res.runs} ended runs in sacct; {'would be: ' if dry_run else ''}{summary}; "
               f"{res.unchanged} unchanged")
    if res.spooled:
        click.echo(f"skipped {res.spooled} runs of jobs with a record still in the spool: run sk admin ingest first")
    shown = res.changes if dry_run else res.changes[:20]
    for change in shown:
        click.echo(f"  {change.describe()}")
    if len(shown) < len(res.changes):
        click.echo(f"  ... and {len(res.changes) - len(shown)} more (--json lists every change)")
    for line in res.conflicts:
        click.echo(f"conflict: {line}", err=True)
    if dry_run:
        click.echo("dry run: the store was not changed")


def _window_options(fn):
    for opt in reversed([
        site_option,
        click.option("--since", required=True, metavar="WHEN", help=f"Start of the window (local time): {FORMS}."),
        click.option("--until", metavar="WHEN", help="End of the window, same forms (default: now)."),
        store_option,
        spool_option,
        click.option("--cluster", metavar="NAME", help="The Slurm cluster to ask (sacct -M; default: this one)."),
        click.option("--chunk", default="1d", show_default=True, metavar="LENGTH",
                     help="Read sacct in slices of this length: one sacct call and one transaction each."),
        click.option("--dry-run", is_flag=True, help="Show what would change; change nothing."),
        click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr."),
        timeout_option,
        json_option,
    ]):
        fn = opt(fn)
    return fn


@admin.command("reconcile")
@_window_options
@click.option("--admin-comment/--no-admin-comment", default=None,
              help="Also read node GPU summaries from the jobs' AdminComment (default: when the site's "
                   "accounting.transport is admin_comment).")
@handle_errors
def reconcile_cmd(site_path, since, until, store_url, spool_dir, cluster, chunk, dry_run, quiet, timeout_s,
                  as_json, admin_comment) -> None:
    """Check the store against Slurm's accounting (sacct) for runs that ended in a window, and fix it.

    Inserts runs the hook missed (source "reconcile"), completes hook records flagged no-scontrol or
    run-uncertain with the allocation sacct reports, renumbers and de-duplicates the runs of requeued jobs
    (one row per run, never two), and never replaces a hook record's values with sacct's poorer ones.
    With --admin-comment, node GPU summaries that epilogs left in a job's AdminComment (sites without a shared
    spool) are added to the store when it has none for that node and run. Idempotent: a second run changes
    nothing. Jobs with a record still in the spool are skipped.

    \b
    Examples:
      sk admin reconcile --since 2d                       # what the systemd timer runs
      sk admin reconcile --since 2026-11-01 --until 2026-11-08 --dry-run
      sk admin reconcile --since 12h --json | jq .counts
    """
    _run_reconcile("reconcile", site_path, since, until, store_url, spool_dir, cluster, chunk, dry_run, quiet,
                   timeout_s, as_json, admin_comment)


@admin.command("import-sacct")
@_window_options
@handle_errors
def import_sacct_cmd(site_path, since, until, store_url, spool_dir, cluster, chunk, dry_run, quiet, timeout_s,
                     as_json) -> None:
    """Backfill the store with job history from Slurm's accounting (sacct), e.g. from before the hooks.

    Every run that ended in the window and that no row describes yet is inserted (source "sacct-import"), with
    its GPU count and types from AllocTRES (gres/gpu=4,gres/gpu:a100=4). Rows that exist are never changed.
    GPU utilization is not in sacct: imported runs have no per-GPU metrics. Needs
    AccountingStorageTRES=gres/gpu (and gres/gpu:<type> for types) in slurm.conf at the time the jobs ran.

    \b
    Examples:
      sk admin import-sacct --since 2026-01-01            # one sacct call per day, progress on stderr
      sk admin import-sacct --since 2026-01-01 --until 2026-07-01 --chunk 1w --dry-run --json
    """
    _run_reconcile("import", site_path, since, until, store_url, spool_dir, cluster, chunk, dry_run, quiet,
                   timeout_s, as_json)


@admin.command("rebuild-rollup")
@site_option
@store_option
@click.option("--zone", "zones", multiple=True, metavar="TZ",
              help="also keep the local days of this IANA time zone (repeatable; kept from then on): reports by "
                   "day with --tz TZ then read one bucket per day instead of 24 hours")
@timeout_option
@json_option
@handle_errors
def rebuild_rollup_cmd(site_path: str | None, store_url: str | None, zones: tuple[str, ...], timeout_s: float,
                       as_json: bool) -> None:
    """Recompute the usage rollup that makes reports fast, from the job and GPU rows.

    Ingest, reconcile and import-sacct keep the rollup up to date themselves; run this after rows were written
    or deleted by hand (SQL), or to check a store: the reports then read exactly what the rows say. One
    transaction; reports keep working meanwhile.

    The rollup keeps UTC hours, days and months; a report in another zone reads its days from hours. Name the
    zone your reports use with --zone once, and ingest keeps its local days as well (same figures, fewer rows
    to add up: measured in bench/report.py).

    \b
    Example:  sk admin rebuild-rollup --store /var/lib/slurmkit/accounting.db
              sk admin rebuild-rollup --zone Europe/Berlin
    """
    from slurmkit.store import rollup
    from slurmkit.store.db import is_postgres, open_store

    acc = _accounting(site_path, "-", store_url)  # no spool involved
    store_url, group = acc.store_url, acc.group
    if not is_postgres(store_url) and not os.path.exists(store_url):
        raise InputError(Problem(f"there is no accounting store at {store_url}", key="--store",
                                 hint="name the store ingest writes (site accounting.store)"))
    from slurmkit.report.window import iana_zone

    for zone in zones:
        iana_zone(zone, key="--zone", hint="an IANA name such as Europe/Berlin or America/New_York "
                                            "(timedatectl list-timezones)")
    with _store_errors(store_url, "nothing was changed; run it again"), \
            open_store(store_url, group=group, timeout_s=timeout_s) as store:
        hours = rollup.rebuild(store, zones=zones)
        kept = rollup.zones(store)
    if as_json:
        echo_json({"hours_recomputed": hours, "store": store_url, "zones": kept})
    else:
        local = f"; local days of {', '.join(kept)}" if kept else ""
        click.echo(f"rollup rebuilt: {hours} hours with job runs recomputed (and their days and months{local}) "
                   f"in {store_url}")
