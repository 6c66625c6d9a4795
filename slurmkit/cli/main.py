"""Top-level `sk` group: every subcommand lives in its own module and is imported lazily."""

from __future__ import annotations

import click

from slurmkit import __version__
from slurmkit.cli.lazy import LazyGroup

COMMANDS = {
    # user: spec -> script -> job
    "validate": "slurmkit.cli.jobs:validate",
    "render": "slurmkit.cli.jobs:render",
    "submit": "slurmkit.cli.jobs:submit",
    "templates": "slurmkit.cli.jobs:templates",
    "status": "slurmkit.cli.follow:status",
    "wait": "slurmkit.cli.follow:wait",
    "logs": "slurmkit.cli.follow:logs",
    "cancel": "slurmkit.cli.follow:cancel",
    "history": "slurmkit.cli.follow:history",
    # site: config, discovery, checks; node/rank diagnosis
    "site": "slurmkit.cli.site:site",
    "doctor": "slurmkit.cli.doctor:doctor",
    # admin: accounting and reports
    "admin": "slurmkit.cli.admin:admin",
    "report": "slurmkit.cli.report:report",
    # docs: the site's user guide, generated from its config
    "docs": "slurmkit.cli.docs:docs",
}


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="slurmkit")
def cli() -> None:
    """slurmkit: GPU jobs on Slurm, bound right, accounted for.

    \b
    Users:   sk submit train.yaml   (then: sk status, sk logs, sk wait, sk cancel)
             sk render train.yaml   (the sbatch script, without submitting)
    Admins:  sk site discover|check, sk admin ingest|reconcile|import-sacct, sk report usage
    Nodes:   sk doctor   (on a node or inside a job: driver, NCCL, GPUs, HCAs, binding)
    Hooks:   sk hook prolog|epilog|jobcomp   (run by Slurm; see contrib/slurm/)

    Shell completion: eval "$(_SK_COMPLETE=bash_source sk)"
    """
