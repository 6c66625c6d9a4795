"""`sk site ...`: show the site config in use (and, from topology/, discover and check it)."""

from __future__ import annotations

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option


@click.group()
def site() -> None:
    """The site configuration slurmkit uses (discover and check come with issue 6)."""


@site.command()
@site_option
@json_option
@handle_errors
def show(site_path: str | None, as_json: bool) -> None:
    """Show the site config slurmkit would use, and where it was found."""
    from slurmkit.site import find_site_file, load_site

    path = find_site_file(site_path)
    cfg = load_site(path)
    if as_json:
        echo_json({"file": str(path), **cfg.model_dump(mode="json")})
        return
    click.echo(f"site config: {path}")
    click.echo(f"cluster {cfg.cluster} (Slurm {cfg.slurm_version}), backend {cfg.backend}, "
               f"containers: {cfg.container_runtime}")
    click.echo("partitions:")
    for name, p in cfg.partitions.items():
        nt = cfg.node_types[p.node_type]
        click.echo(f"  {name:<12} {p.nodes:>4} x {p.node_type} ({nt.gpu.count}x {nt.gpu.slurm_type}, "
                   f"{nt.cpus} CPUs, {nt.memory}), max {p.max_time}, default {p.default_time}")
    click.echo("node types:")
    for name, nt in cfg.node_types.items():
        click.echo(f"  {name}: {nt.sockets} sockets x {nt.cores_per_socket} cores x {nt.threads_per_core} "
                   f"threads, {nt.numa_nodes} NUMA nodes, {nt.gpu.nvlink}, fabric {nt.fabric.kind}")
        for g in nt.gpus:
            click.echo(f"    GPU{g.index}: NUMA {g.numa}, CPUs {g.cpus}, HCA {g.hca or '-'}")
