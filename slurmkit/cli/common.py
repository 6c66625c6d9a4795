"""Options and output helpers shared by the command modules."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any

import click

from slurmkit.errors import SlurmkitError


def handle_errors(fn: Callable) -> Callable:
    """Print SlurmkitError as a message (never a traceback) and exit with its status (2 for bad input)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SlurmkitError as exc:
            click.echo(exc.format(), err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


site_option = click.option(
    "--site", "site_path", metavar="FILE", envvar="SK_SITE",
    help="Site config (default: $SK_SITE, ~/.config/slurmkit/site.yaml, /etc/slurmkit/site.yaml).")

json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
