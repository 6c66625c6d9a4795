"""Options and output helpers shared by the command modules (the output helpers live in output.py, free of click)."""

from __future__ import annotations

import click

from slurmkit.cli.output import echo_json, handle_errors

__all__ = ["echo_json", "handle_errors", "json_option", "site_option"]

site_option = click.option(
    "--site", "site_path", metavar="FILE", envvar="SK_SITE",
    help="Site config (default: $SK_SITE, ~/.config/slurmkit/site.yaml, /etc/slurmkit/site.yaml).")

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
