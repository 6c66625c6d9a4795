"""Printing results and errors without click, so the click commands and the click-free fast path (fast.py) print
exactly alike."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from slurmkit.errors import SlurmkitError


def echo(message: str = "", err: bool = False) -> None:
    """One line to stdout (or stderr), flushed, like click.echo."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{message}\n")
    stream.flush()


def echo_json(data: Any) -> None:
    import json

    echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def handle_errors(fn: Callable) -> Callable:
    """Print SlurmkitError as a message (never a traceback) and exit with its status (2 for bad input)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SlurmkitError as exc:
            echo(exc.format(), err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            echo("interrupted", err=True)
            sys.exit(130)

    return wrapper
