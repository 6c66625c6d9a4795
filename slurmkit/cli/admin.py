"""`sk admin`: accounting administration (spool -> store)."""

from __future__ import annotations

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option


@click.group("admin")
def admin() -> None:
    """Accounting administration: move hook records from the spool into the store."""


@admin.command("ingest")
@site_option
@click.option("--spool", "spool_dir", metavar="DIR", help="Spool directory (default: site accounting.spool_dir).")
@click.option("--store", "store_url", metavar="URL", help="SQLite path or postgresql:// URL (default: site).")
@json_option
@handle_errors
def ingest_cmd(site_path: str | None, spool_dir: str | None, store_url: str | None, as_json: bool) -> None:
    """Ingest spooled job records into the store (idempotent; safe to rerun or kill).

    \b
    Example:  sk admin ingest --spool /var/spool/slurmkit --store /var/lib/slurmkit/accounting.db
    """
    from slurmkit.store.db import open_store
    from slurmkit.store.ingest import ingest

    group = None  # a store created from explicit paths only is readable by its owner alone
    if not (spool_dir and store_url) or site_path:
        from slurmkit.site import resolve_site

        acc = resolve_site(site_path).accounting
        spool_dir, store_url, group = spool_dir or acc.spool_dir, store_url or acc.store, acc.admin_group
    with open_store(store_url, group=group) as store:
        res = ingest(store, spool_dir)
    if as_json:
        echo_json(vars(res))
    else:
        click.echo(f"ingested {res.ingested}, quarantined {res.quarantined}, still spooled {res.remaining}")
