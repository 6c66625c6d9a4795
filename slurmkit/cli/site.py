"""`sk site ...`: show the site config in use, discover a node type from a GPU node, check the config vs Slurm."""

from __future__ import annotations

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option


@click.group()
def site() -> None:
    """The site configuration slurmkit uses: show it, discover a node type, check it against Slurm."""


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


@site.command()
@click.option("--from", "from_dir", metavar="DIR", help="Read saved command outputs from DIR instead of running "
              "the tools (file names below).")
@click.option("--save", "save_dir", metavar="DIR", help="On a node: also write the raw outputs to DIR, for "
              "`--from` elsewhere.")
@click.option("--name", default="gpunode", show_default=True, help="Node type name for the block.")
@click.option("--memory", metavar="SIZE", help="Schedulable memory (RealMemory), e.g. 1000G, when slurmd -C "
              "and /proc/meminfo are not available (or to schedule less).")
@click.option("--gpu-model", metavar="MODEL", help="GPU model when query-gpu.csv is not available.")
@click.option("--slurm-type", metavar="TYPE", help="gres type (gres.conf Type=), default: from slurmd -G or the "
              "model name.")
@click.option("--fabric", type=click.Choice(["infiniband", "roce", "tcp", "slingshot"]),
              help="Fabric kind, default: from /sys/class/infiniband link_layer.")
@json_option
@handle_errors
def discover(from_dir: str | None, save_dir: str | None, name: str, memory: str | None, gpu_model: str | None,
             slurm_type: str | None, fabric: str | None, as_json: bool) -> None:
    """Read a GPU node's topology and print a node-type block for the site config.

    Run it on a GPU node: it reads `nvidia-smi topo -m`, `nvidia-smi --query-gpu`, `lscpu -p`, sysfs
    (/sys/bus/pci/devices/*/numa_node, local_cpulist, /sys/class/infiniband), `slurmd -C` and `slurmd -G`.
    Each GPU gets its NUMA node, CPU list and nearest compute HCA (PIX/PXB beat PHB, which beats NODE, which
    beats SYS; ties are spread over the GPUs); HCAs that are SYS to every GPU are listed as storage_hcas.

    \b
    Offline (--from DIR), only topo-m.txt is required:
      topo-m.txt      nvidia-smi topo -m
      query-gpu.csv   nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total --format=csv
      lscpu.txt       lscpu -p   (plain lscpu also accepted)
      slurmd-C.txt    slurmd -C
      slurmd-G.txt    slurmd -G 2>&1
      meminfo.txt     cat /proc/meminfo
      pci.txt         "<bus id> <numa_node> <local_cpulist>" per GPU, from /sys/bus/pci/devices/
      infiniband.txt  "<hca> <port> <state> <link_layer>" per HCA port, from /sys/class/infiniband/

    \b
    Examples:
      sk site discover --name dgx-a100 > dgx-a100.yaml        (on a GPU node)
      sk site discover --save /tmp/node1                       (on the node; copy the directory)
      sk site discover --from /tmp/node1 --memory 1000G        (anywhere)

    Exit status: 0 block printed; 1 the tools are missing here (not a GPU node); 2 bad or incomplete input.
    """
    from slurmkit import discover as disc

    facts = disc.read_dir(from_dir) if from_dir else disc.collect_live()
    if save_dir:
        for path in disc.save(facts, save_dir):
            click.echo(f"saved {path}", err=True)
    result = disc.discover(facts, name=name, memory=memory, gpu_model=gpu_model, slurm_type=slurm_type,
                           fabric=fabric)
    if as_json:
        echo_json({"name": result.name, "node_type": result.node_type, "notes": result.notes,
                   "gres_conf": result.gres_conf, "missing": facts.missing})
        return
    for what, why in facts.missing.items():
        click.echo(f"note: {what}: {why}", err=True)
    click.echo(result.yaml(), nl=False)
