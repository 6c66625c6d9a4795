"""`sk site ...`: show the site config in use, discover a node type from a GPU node, check the config vs Slurm."""

from __future__ import annotations

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option
from slurmkit.nccl import FABRIC_KINDS


@click.group()
def site() -> None:
    """The site configuration slurmkit uses: show it, discover a node type, check it against Slurm."""


@site.command()
@site_option
@json_option
@handle_errors
def show(site_path: str | None, as_json: bool) -> None:
    """Show the site config slurmkit would use, and where it was found."""
    from slurmkit.site.model import find_site_file, load_site

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


def _hca_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    return [] if value.strip().lower() == "none" else [v.strip() for v in value.split(",") if v.strip()]


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
@click.option("--fabric", type=click.Choice(FABRIC_KINDS),
              help="Fabric kind, default: the compute HCAs' link layer (infiniband.txt), else their RDMA names.")
@click.option("--sockets", type=click.IntRange(min=1), help="CPU sockets, with --cores-per-socket and "
              "--threads-per-core, when neither lscpu nor slurmd -C output is available.")
@click.option("--cores-per-socket", type=click.IntRange(min=1), help="Cores per socket (see --sockets).")
@click.option("--threads-per-core", type=click.IntRange(min=1), help="Threads per core (see --sockets).")
@click.option("--numa-nodes", type=click.IntRange(min=1), help="NUMA nodes of the node, when lscpu output (its "
              "NUMA map) is not available.")
@click.option("--storage-hcas", metavar="LIST", callback=_hca_list, help="Comma-separated NICs that are not compute "
              "HCAs (`none`: every NIC is), when topo -m cannot tell and infiniband.txt is not available.")
@json_option
@handle_errors
def discover(from_dir: str | None, save_dir: str | None, name: str, memory: str | None, gpu_model: str | None,
             slurm_type: str | None, fabric: str | None, sockets: int | None, cores_per_socket: int | None,
             threads_per_core: int | None, numa_nodes: int | None, storage_hcas: list[str] | None,
             as_json: bool) -> None:
    """Read a GPU node's topology and print a node-type block for the site config.

    Run it on a GPU node: it reads `nvidia-smi topo -m`, `nvidia-smi --query-gpu`, `lscpu -p`, sysfs
    (/sys/bus/pci/devices/*/numa_node, local_cpulist, /sys/class/infiniband, the process's cpuset), `slurmd -C`
    and `slurmd -G`. Each GPU gets its NUMA node, CPU list and nearest compute HCA (PIX/PXB beat PHB, which beats
    NODE, which beats SYS; ties are spread over the GPUs). A NIC that is no GPU's nearest NIC is listed under
    storage_hcas; so are ports whose link layer is Ethernet on an InfiniBand host and front-end bonds; ports that
    are not ACTIVE are left out. What it cannot know it does not guess: it exits 2 and says what to add.

    \b
    Needed besides topo-m.txt (each from a file, else a flag):
      CPU layout       lscpu.txt or slurmd-C.txt, else --sockets/--cores-per-socket/--threads-per-core
      memory           slurmd-C.txt (RealMemory) or meminfo.txt, else --memory
      GPU model        query-gpu.csv, else --gpu-model
      GPU NUMA nodes   the NUMA Affinity column of topo -m, else pci.txt, else CPU Affinity + lscpu's NUMA map
      NUMA node count  lscpu.txt (its NUMA map), else --numa-nodes
      tied NICs        only where one GPU has more equally-near NICs than GPUs share them (a storage card
                       beside a rail NIC): infiniband.txt, else --storage-hcas

    \b
    Files for --from DIR:
      topo-m.txt      nvidia-smi topo -m
      query-gpu.csv   nvidia-smi --query-gpu=index,uuid,pci.bus_id,name,memory.total --format=csv
      lscpu.txt       lscpu -p   (plain lscpu also accepted)
      slurmd-C.txt    slurmd -C
      slurmd-G.txt    slurmd -G 2>&1
      meminfo.txt     cat /proc/meminfo
      pci.txt         "<bus id> <numa_node> <local_cpulist>" per GPU, from /sys/bus/pci/devices/
      infiniband.txt  "<hca> <port> <state> <link_layer>" per HCA port, from /sys/class/infiniband/
                      (or the output of ibstat or ibstatus)
      cpuset.txt      "allowed <Cpus_allowed_list>" and "online <list>" lines (/proc/self/status,
                      /sys/devices/system/cpu/online): warns when read inside a job or container

    \b
    Examples:
      sk site discover --name dgx-a100 > dgx-a100.yaml        (on a GPU node, outside any job)
      sk site discover --save /tmp/node1                       (on the node; copy the directory)
      sk site discover --from /tmp/node1 --memory 1000G        (anywhere)

    Exit status: 0 block printed; 1 the tools are missing here (not a GPU node); 2 bad or incomplete input.
    """
    from slurmkit.site import discover as disc

    facts = disc.read_dir(from_dir) if from_dir else disc.collect_live()
    if save_dir:
        for path in disc.save(facts, save_dir):
            click.echo(f"saved {path}", err=True)
    result = disc.discover(facts, name=name, memory=memory, gpu_model=gpu_model, slurm_type=slurm_type,
                           fabric=fabric, sockets=sockets, cores_per_socket=cores_per_socket,
                           threads_per_core=threads_per_core, numa_nodes=numa_nodes, storage_hcas=storage_hcas)
    if as_json:
        echo_json({"name": result.name, "node_type": result.node_type, "notes": result.notes,
                   "gres_conf": result.gres_conf, "missing": facts.missing})
        return
    for what, why in facts.missing.items():
        click.echo(f"note: {what}: {why}", err=True)
    for note in result.notes:
        if note.startswith("WARNING"):
            click.echo(note, err=True)
    click.echo(result.yaml(), nl=False)


@site.command()
@site_option
@json_option
@click.option("--no-gres-conf", is_flag=True, help="Do not run `slurmd -G` (gres.conf Cores= is then not compared).")
@handle_errors
def check(site_path: str | None, as_json: bool, no_gres_conf: bool) -> None:
    """Compare the site config with the live Slurm and say, for every disagreement, what to change where.

    Reads `scontrol show config`, `scontrol show partition -o`, `scontrol show node -o` and, unless
    --no-gres-conf, `slurmd -f <slurm.conf> -G -N <node>` for one node of each partition (gres.conf as slurmd
    reads it). Compares: partitions (exist, node count, MaxTime, DefaultTime, MaxNodes, DefCpuPerGPU,
    DefMemPerGPU, AllowQos, state), nodes (GPU gres type and count, boards x sockets, cores per socket,
    threads per core, RealMemory, features, state), gres.conf Cores= against each GPU's CPUs, the cluster name,
    the Slurm version and the default partition.

    Each finding names the site-config key (file:line) and the Slurm side (slurm.conf/gres.conf), with both
    values and the fix. ERROR: jobs would be refused, pend forever or bind to the wrong socket. WARNING: the
    config is more conservative than Slurm, or a default differs.

    \b
    Examples:
      sk site check                               (the site config from $SK_SITE or /etc/slurmkit/site.yaml)
      sk site check --site site_config/devcluster.yaml
      sk site check --json | jq '.findings[] | select(.severity == "error")'

    Exit status: 0 no errors (warnings may be listed); 1 at least one error; 2 the site config itself is
    invalid or the command line is wrong; 3 Slurm could not be asked (scontrol missing or the controller down).
    """
    from slurmkit.config.source import load
    from slurmkit.site import check as sitecheck
    from slurmkit.site.model import find_site_file, site_from_source

    path = find_site_file(site_path)
    src = load(path)
    cfg = site_from_source(src)
    state = sitecheck.collect_live(None if no_gres_conf else cfg)
    report = sitecheck.check_site(cfg, src, state)
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo(f"sk site check: {report.site_file} vs Slurm {report.slurm_version} (cluster "
                   f"{report.cluster}, {state.slurm_conf})")
        click.echo(f"checked: partitions {', '.join(report.checked['partitions']) or '-'}; nodes "
                   f"{_hosts(report.checked['nodes'])}; gres.conf via slurmd -G on "
                   f"{_hosts(report.checked['gres_conf_nodes'])}")
        for note in report.notes:
            click.echo(f"note: {note}")
        for finding in report.findings:
            click.echo(finding.format())
        click.echo(f"result: {len(report.errors)} error(s), {len(report.warnings)} warning(s)")
    raise SystemExit(1 if report.errors else 0)


def _hosts(names: list[str]) -> str:
    import hostlist

    return hostlist.collect_hostlist(names) if names else "-"
