"""`sk doctor`: check this node, or this rank inside a job, and say what to fix."""

from __future__ import annotations

import click

from slurmkit.cli.common import echo_json, handle_errors, json_option, site_option


@click.command()
@site_option
@click.option("--partition", metavar="NAME", help="Which partition's node type this node is (default: the job's "
              "SLURM_JOB_PARTITION, or the site's only node type).")
@json_option
@handle_errors
def doctor(site_path: str | None, partition: str | None, as_json: bool) -> None:
    """Diagnose a GPU node or a running rank: one line per check, PASS/WARN/FAIL/SKIP, the reason and the fix.

    \b
    Checks:
      site      the site config and which node type this node is
      driver    NVIDIA driver vs the CUDA toolkit's minimum (CUDA release notes)
      nccl      NCCL version(s): nvidia-nccl wheels, torch's own (if torch is installed), libnccl.so files
      gpus      GPUs Slurm allocated (SLURM_STEP_GPUS/SLURM_JOB_GPUS) vs CUDA_VISIBLE_DEVICES vs nvidia-smi -L
      cuda_env  CUDA_VISIBLE_DEVICES well-formed; CUDA_DEVICE_ORDER=PCI_BUS_ID
      hcas      RDMA devices and port states (/sys/class/infiniband) vs the node type's compute/storage HCAs
      ifname    the node type's fabric.socket_ifname selects an interface that is up (/sys/class/net,
                else `ip -o link`), by NCCL_SOCKET_IFNAME's prefix rule
      nccl_env  NCCL_* variables: names, risky values, HCAs and interfaces that do not exist here
      binding   this process's CPUs and memory nodes (/proc/self/status, numactl --show) vs the GPU the site
                config's topology gives this rank (the same rule as sk's bind step)
    Without an NVIDIA driver the GPU checks say so (SKIP) and the rest still run.

    \b
    Examples:
      sk doctor                                   (on a node)
      srun --gpus-per-node=a100:8 sk doctor        (one rank, inside an allocation)
      sk doctor --json | jq '.checks[] | select(.status != "PASS")'

    \b
    Exit status:
      0  every check PASS or SKIP
      1  at least one WARN, no FAIL
      2  at least one FAIL (a command-line mistake is also 2, with a usage message instead of the report)
    A site config that cannot be read is the `site` check FAILing (none found: SKIP), not an abort.
    """
    from slurmkit.errors import SlurmkitError
    from slurmkit.site import doctor as doc
    from slurmkit.site.model import resolve_site

    inputs = doc.Inputs()
    try:
        cfg, error = resolve_site(site_path), None
    except SlurmkitError as exc:
        cfg, error = None, exc.format().replace("\n", " ")
    checks = doc.run_checks(inputs, doc.site_context(cfg, error, inputs.env, partition))
    if as_json:
        echo_json(doc.to_json(checks))
    else:
        for c in checks:
            click.echo(c.line())
    raise SystemExit(doc.exit_status(checks))
