"""`sk admin exporter`: serve slurmkit's figures to Prometheus (slurmkit/exporter.py)."""

from __future__ import annotations

import sys
import time

import click

from slurmkit.cli.admin import spool_option, store_option
from slurmkit.cli.common import handle_errors, site_option
from slurmkit.errors import InputError, Problem

DEFAULT_PORT = 9877


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    host = host.strip("[]")  # [::1]:9877
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(Problem(f"{value!r} is not [ADDRESS:]PORT (a port 1-65535)", key="--listen",
                                 hint=f"e.g. --listen 127.0.0.1:{DEFAULT_PORT} or --listen {DEFAULT_PORT}"))
    return host or "0.0.0.0", int(port)


WHAT = ("node", "store")


@click.command("exporter")
@click.argument("what", nargs=-1, required=True, type=click.Choice(WHAT))
@site_option
@click.option("--state-dir", metavar="DIR", help="The samplers' state directory (default: site "
                                                  "accounting.state_dir).")
@click.option("--node-name", metavar="NAME", help="Only this node's samplers (default: every node directory "
                                                  "under the state directory).")
@store_option
@spool_option
@click.option("--listen", default=str(DEFAULT_PORT), show_default=True, metavar="[ADDRESS:]PORT",
              help="Where to serve /metrics.")
@click.option("--refresh", "refresh_s", type=click.FloatRange(min=1), default=300.0, show_default=True,
              metavar="SECONDS", help="Read the store at most this often (its aggregate can take seconds); "
                                      "scrapes in between get the last figures.")
@click.option("--once", is_flag=True, help="Print one scrape on stdout and exit (a check, or node_exporter's "
                                           "textfile collector).")
@handle_errors
def exporter(what: tuple[str, ...], site_path: str | None, state_dir: str | None,
             node_name: str | None, store_url: str | None, spool_dir: str | None, listen: str, refresh_s: float,
             once: bool) -> None:
    """Serve slurmkit's accounting to Prometheus on /metrics: WHAT is `node`, `store` or both.

    `node` (on each GPU node): per job and GPU, utilization, memory, power, idle seconds and the time of the
    last reading, labelled cluster, jobid, run, user, account, partition, node, gpu, uuid and source
    (source="simulated" on pretend GPUs), plus slurmkit_job_gpu_info to join DCGM exporter series on. Jobs drop
    out when they end. `store` (where the store is readable, as root or the admin group): counters of
    GPU-hours allocated/measured/used/wasted and jobs by account and partition (the figures of
    `sk report usage --by account,partition` over the whole store), jobs with idle GPUs in the last 24 h, the last
    ingest time and the spool backlog.

    \b
    Examples:
      sk admin exporter node                      # on a GPU node, port 9877
      sk admin exporter store --listen 127.0.0.1:9878
      sk admin exporter node --once               # one scrape on stdout
    contrib/systemd has units for both, contrib/prometheus a scrape configuration, contrib/grafana a dashboard.
    """
    node_mode, store_mode = "node" in what, "store" in what
    address, port = _listen(listen)
    try:
        from slurmkit import exporter as ex
    except ImportError as exc:
        raise InputError(Problem(f"the exporter needs prometheus-client ({exc})", key="sk admin exporter",
                                 hint="pip install 'slurmkit[exporter]'")) from exc
    site = None
    if site_path or (node_mode and not state_dir) or (store_mode and not store_url):
        from slurmkit.site.model import find_site_file, load_site

        site = load_site(find_site_file(site_path))
    collectors: list = []
    if node_mode:
        collectors.append(ex.NodeCollector(state_dir or site.accounting.state_dir, node_name))  # type: ignore[union-attr]
    if store_mode:
        url = store_url or site.accounting.store  # type: ignore[union-attr]
        spool = spool_dir or (site.accounting.spool_dir if site else None)
        collectors.append(ex.StoreCollector(url, site_path, spool, refresh_s=refresh_s))
    if once:
        sys.stdout.write(ex.exposition(collectors))
        return
    try:
        ex.serve(collectors, address, port)
    except OSError as exc:
        raise InputError(Problem(f"cannot listen on {address}:{port}: {exc.strerror}", key="--listen")) from exc
    click.echo(f"sk admin exporter: serving http://{address}:{port}/metrics "
               f"({', '.join(dict.fromkeys(what))})", err=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
