"""Options and output helpers shared by the command modules (the output helpers live in output.py, free of click)."""

from __future__ import annotations

import click

from slurmkit.cli.output import echo_json, handle_errors

__all__ = ["backend_option", "echo_json", "handle_errors", "json_option", "site_option"]

site_option = click.option(
    "--site", "site_path", metavar="FILE", envvar="SK_SITE",
    help="Site config (default: $SK_SITE, ~/.config/slurmkit/site.yaml, /etc/slurmkit/site.yaml).")

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")


def _complete_backend(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    from slurmkit.backends import names

    return [n for n in names() if n.startswith(incomplete)]


# A plain name, checked against the registry (built-ins + slurmkit.backends entry points) when the backend is
# built: a click.Choice would fix the list and need the entry points scanned on every start.
backend_option = click.option(
    "--backend", metavar="NAME", default=None, shell_complete=_complete_backend,
    help="How to talk to Slurm: auto, cli, rest, pyslurm or an installed backend "
         "(default: the site config's backend, else auto-detect).")
