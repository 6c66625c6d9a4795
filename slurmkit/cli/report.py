"""`sk report usage|efficiency|idle|top|job`: reports from the accounting store. Parses options, calls
slurmkit.report; pandas/matplotlib are imported only inside the commands.
"""

from __future__ import annotations

import click

from slurmkit.cli.common import JOBID, echo_json, handle_errors, site_option
from slurmkit.config.when import FORMS


@click.group()
def report() -> None:
    """GPU usage reports from the accounting store (GPU-hours, utilization, waste, idle GPUs, grades).

    \b
    Examples:
      sk report usage --since last-month --by account,month
      sk report efficiency --since 2026-11-01 --until 2026-12-01 --tz Europe/Berlin
      sk report top --sort waste --limit 5
      sk report usage --format html -o usage.html
      sk report usage --from-sacct --since last-month --by account   (no hook: allocation only)
      sk report occupancy --since last-month --by week   (how full the cluster was)
      sk report job 1234
    """


def _common(fn):
    opts = [
        click.option("--since", metavar="WHEN", help=f"Start (inclusive, in --tz): {FORMS}. Default: 30d."),
        click.option("--until", metavar="WHEN", help="End (exclusive), same forms. Default: now "
                     "(with --since last-month: the end of that month)."),
        click.option("--tz", metavar="ZONE", default="UTC", show_default=True,
                     help="Zone for reading dates and for day/week/month buckets: UTC, local, or e.g. Europe/Berlin."),
        click.option("--by", "by", multiple=True, metavar="KEYS",
                     help="Group by user, account, partition, gpu_type, node_type, qos, cluster and/or one period "
                          "(day, week, month); comma-separated or repeated."),
        click.option("--format", "fmt", default="table", show_default=True,
                     type=click.Choice(["table", "csv", "json", "parquet", "markdown", "html"])),
        click.option("-o", "--output", metavar="FILE", help="Write to FILE (required for parquet and html)."),
        click.option("--columns", metavar="LIST", help="The figure columns to show, comma-separated, in this order "
                     "(the --by columns always come first); an unknown name lists those of the report."),
        click.option("--freshness/--no-freshness", default=True, show_default=True,
                     help="Say when the store was last ingested and count the finished GPU jobs of the window that "
                          "Slurm accounting lists and the store lacks (one sacct call)."),
        click.option("--db", metavar="PATH|URL", help="SQLite path or postgresql:// URL (default: the site "
                     "config's accounting.store)."),
        click.option("--from-sacct", is_flag=True, help="Read Slurm accounting (sacct) instead of the store: "
                     "GPU-hours allocated and queue wait only, no utilization (for sites without the slurmkit "
                     "hook; non-admins see only their own jobs)."),
        site_option,
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _open(db: str | None, site_path: str | None):
    from slurmkit.report.access import open_for_reports

    return open_for_reports(db, site_path)


def _open_sacct(window, db: str | None, site_path: str | None):
    """The in-memory store filled from sacct. A site config is optional here (sites without the hook may have
    none): it names the admin group and maps partitions to node types."""
    from slurmkit.errors import InputError, Problem, SiteConfigError
    from slurmkit.report.access import scope_for
    from slurmkit.report.sacct_source import open_sacct
    from slurmkit.site.model import find_site_file, load_site, partition_node_types

    if db:
        raise InputError(Problem("--db and --from-sacct name two different sources", key="--from-sacct",
                                 hint="drop --db to read Slurm accounting, or drop --from-sacct to read the store"))
    admin_group, node_types = "slurmkit-admin", {}
    try:
        path = find_site_file(site_path)
    except SiteConfigError:
        if site_path:
            raise
        path = None  # no site config anywhere: defaults
    if path is not None:
        site = load_site(path)
        admin_group = site.accounting.admin_group
        node_types = partition_node_types(site)
    scope = scope_for(admin_group)
    store, _read = open_sacct(window, scope, node_types=node_types)
    return store, scope, admin_group


def _run(kind: str, since, until, tz, by, fmt, output, db, from_sacct, site_path, columns=None, freshness=True,
         **kw) -> None:
    from slurmkit.report.build import build
    from slurmkit.report.formats import write
    from slurmkit.report.query import parse_by
    from slurmkit.report.window import parse_window

    window = parse_window(since, until, tz=tz)
    keys, period = parse_by(by)
    if kind == "occupancy" and keys:
        from slurmkit.errors import InputError, Problem

        raise InputError(Problem(f"the occupancy report cannot group by {', '.join(keys)}", key="--by",
                                 hint="--by day, week or month (Slurm records capacity per cluster, not per "
                                      "partition or account)"))
    if not keys and not period and kind == "usage":
        keys = ["user"]
    source = "sacct" if from_sacct else "store"
    if from_sacct:
        from slurmkit.report.build import check_allocation_only

        check_allocation_only(kind, kw.get("sort"))  # before running sacct
        store, scope, admin_group = _open_sacct(window, db, site_path)
    else:
        store, scope, admin_group = _open(db, site_path)
    with store:
        if kind == "occupancy":
            from slurmkit.report.occupancy import build_occupancy

            rep = build_occupancy(store, window, period, scope, admin_group=admin_group, source=source)
        else:
            rep = build(kind, store, window, keys, period, scope, admin_group=admin_group, source=source, **kw)
        if columns:
            rep.select_columns([c.strip() for c in columns.split(",") if c.strip()])
        stale: list[str] = []
        if freshness and source == "store":
            from slurmkit.report import freshness as fresh

            f = fresh.check(store, window, scope)
            stale = fresh.notes(f, window)
            rep.notes += stale
            rep.extra["freshness"] = f.as_dict()
        html_builder = None
        if fmt == "html":
            from slurmkit.report.html import page

            def html_builder(r):
                return page(r, store)
        if rep.empty and fmt in ("table", "markdown"):
            click.echo("\n".join([rep.empty_message(), *stale]))  # an empty store most needs saying so
            return
        text = write(rep, fmt, output, html_builder=html_builder)
    if text is not None:
        click.echo(text)
    else:
        click.echo(f"wrote {output}", err=True)


@report.command()
@_common
@handle_errors
def usage(**kw) -> None:
    """GPU-hours allocated and used, utilization, waste and queue wait (default: by user).

    Example: sk report usage --since last-month --by account,month
    """
    _run("usage", **kw)


@report.command()
@_common
@handle_errors
def efficiency(**kw) -> None:
    """Efficiency grade per user (or --by account), wasted GPU-hours, idle GPUs in multi-GPU jobs.

    Example: sk report efficiency --by account --since 30d
    """
    _run("efficiency", **kw)


@report.command()
@_common
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1), help="How many jobs to list.")
@handle_errors
def idle(limit: int, **kw) -> None:
    """Multi-GPU jobs whose GPUs sat idle while others worked, worst first, with totals.

    Example: sk report idle --since 7d --limit 10
    """
    _run("idle", limit=limit, **kw)


@report.command()
@_common
@click.option("--sort", type=click.Choice(["gpu-hours", "waste", "used"]), default="gpu-hours", show_default=True)
@click.option("--limit", default=10, show_default=True, type=click.IntRange(min=1), help="How many rows to list.")
@handle_errors
def top(sort: str, limit: int, **kw) -> None:
    """The top users (or --by account...) by GPU-hours, waste or used GPU-hours.

    Example: sk report top --sort waste --limit 5
    """
    _run("top", sort=sort, limit=limit, **kw)


@report.command()
@_common
@handle_errors
def occupancy(**kw) -> None:
    """How full the cluster was: GPU-hours allocated against the GPU-hours it had (its GPUs less nodes down,
    drained or powered down, from Slurm's own records), per period. Admins only (it is every user's jobs).

    \b
    Examples:
      sk report occupancy --since last-month --by week
      sk report occupancy --since 2026-01-01 --until 2027-01-01 --by month --format csv -o occupancy.csv
      sk report occupancy --from-sacct --since 7d --by day   (allocations from sacct: no store needed)
      sk report occupancy --since 2026-01-01 --by week --format html -o occupancy.html   (against a capacity line)
    """
    _run("occupancy", **kw)


@report.command()
@click.argument("jobid", type=JOBID)
@click.option("--db", metavar="PATH|URL", help="SQLite path or postgresql:// URL.")
@click.option("--from-sacct", is_flag=True, help="Read Slurm accounting (sacct and the job's AdminComment) even "
              "where the store is readable (the default when you cannot read it).")
@click.option("--tz", default="UTC", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
@site_option
@handle_errors
def job(jobid: str, db, from_sacct, tz, as_json, site_path) -> None:
    """One job's GPUs, one row each, with a verdict such as "3 of 4 GPUs were idle: request gpus: 1".

    Your own job is read from Slurm accounting when you cannot read the accounting store: the GPU summary the
    node epilogs left in its AdminComment, and CPU, memory and time-limit efficiency from sacct.

    Example: sk report job 1234   (or 1234_7 for an array task)
    """
    from datetime import datetime

    from slurmkit.errors import InputError, Problem
    from slurmkit.report.access import job_source
    from slurmkit.report.window import resolve_tz

    if db and from_sacct:
        raise InputError(Problem("--db and --from-sacct name two different sources", key="--from-sacct",
                                 hint="drop --db to read Slurm accounting, or drop --from-sacct to read the store"))
    zone, _name = resolve_tz(tz)
    store, scope = job_source(db, site_path, from_sacct)
    if store is None:
        from slurmkit.report import jobstats as jobreport

        runs = jobreport.load_job(jobid, scope)
    else:
        from slurmkit.report import job as jobreport  # type: ignore[no-redef]

        with store:
            runs = jobreport.load_job(store, jobid, scope)
    if as_json:
        echo_json(jobreport.as_dict(runs))
        return
    click.echo(jobreport.render(runs, lambda t: datetime.fromtimestamp(t, zone).strftime("%Y-%m-%d %H:%M %Z")))
