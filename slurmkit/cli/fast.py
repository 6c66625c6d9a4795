"""`sk render`, `sk submit` and `sk validate` without importing click (~20 ms of every cold start).

Only plain command lines are taken here: the command, its files, and the command's own options, each at most
once (`--set` any number of times), as `--opt VALUE` or `--opt=VALUE`, with no value that is empty or starts
with "-". Anything else (--help, a misspelt option, a missing value, `--`, a file click.Path would refuse,
shell completion) is left to click, which stays the one place that explains usage errors. The parameters are
exactly those click would pass (tests/test_cli_fast.py checks that against the click commands in jobs.py), and
both call the same functions in actions.py, so output and exit status are the same.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slurmkit.cli import actions
from slurmkit.cli.output import handle_errors


@dataclass(frozen=True)
class Command:
    """What the fast path knows of one click command (mirrors its decorators in jobs.py)."""

    action: Callable[..., None]
    files: str  # the positional parameter: click.Path(dir_okay=False)
    many: bool  # nargs=-1, required (a tuple) rather than exactly one (a str)
    values: dict[str, str]  # option -> parameter, for options that take a value
    flags: dict[str, str]  # option -> parameter, for is_flag options
    multiple: frozenset[str] = frozenset({"overrides"})  # parameters collected into a tuple
    writable: frozenset[str] = frozenset()  # value parameters that are click.Path(dir_okay=False, writable=True)
    envvars: dict[str, str] = field(default_factory=lambda: {"site_path": "SK_SITE"})


_SPEC_OPTIONS = {"--site": "site_path", "--set": "overrides"}

COMMANDS = {
    "validate": Command(actions.validate, "specs", True, _SPEC_OPTIONS, {"--json": "as_json"}),
    "render": Command(actions.render, "spec", False, {**_SPEC_OPTIONS, "-o": "output", "--output": "output"},
                      {"--explain": "explain"}, writable=frozenset({"output"})),
    "submit": Command(actions.submit, "specs", True, {**_SPEC_OPTIONS, "--backend": "backend"},
                      {"--dry-run": "dry_run", "--test-only": "test_only", "--parsable": "parsable",
                       "--json": "as_json"}),
}


def parse(argv: list[str]) -> tuple[Callable[..., None], dict[str, Any]] | None:
    """The action and the parameters click would give it for `argv` (after `sk`), or None: leave it to click."""
    if not argv or argv[0] not in COMMANDS:
        return None
    cmd = COMMANDS[argv[0]]
    params: dict[str, Any] = {p: None for p in cmd.values.values()}
    params.update({p: False for p in cmd.flags.values()})
    params.update({p: [] for p in cmd.multiple})
    files: list[str] = []
    given: set[str] = set()
    rest = argv[1:]
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("-"):
            files.append(arg)
            continue
        name, eq, value = arg.partition("=")
        if name in cmd.flags and not eq:
            param, value = cmd.flags[name], True
        elif name in cmd.values and (not eq or name.startswith("--")):  # click reads `-o=F` as the value "=F"
            param = cmd.values[name]
            if not eq:
                if not rest:
                    return None
                value = rest.pop(0)
            if not value or value.startswith("-"):
                return None
        else:  # -h/--help, a typo, `--`, `-oFILE`, a flag given a value: click decides
            return None
        if param in cmd.multiple:
            params[param].append(value)
            continue
        if param in given:
            return None
        given.add(param)
        params[param] = value
    if not files or (len(files) > 1 and not cmd.many):
        return None
    for param, env in cmd.envvars.items():
        if param not in given and os.environ.get(env):
            params[param] = os.environ[env]
    paths = [(f, False) for f in files] + [(params[p], True) for p in cmd.writable if params[p] is not None]
    if not all(_click_path_ok(p, writable) for p, writable in paths):
        return None
    params.update({p: tuple(params[p]) for p in cmd.multiple})
    params[cmd.files] = tuple(files) if cmd.many else files[0]
    return cmd.action, params


def _click_path_ok(path: str, writable: bool) -> bool:
    """click.Path(dir_okay=False[, writable]): a path that does not exist is fine; else not a directory and
    readable (and writable)."""
    try:
        st = os.stat(path)
    except OSError:
        return True
    return (not stat.S_ISDIR(st.st_mode) and os.access(path, os.R_OK)
            and (not writable or os.access(path, os.W_OK)))


def run_if_plain(argv: list[str]) -> None:
    """Run `argv` here and exit if it is a plain render/submit/validate; otherwise return for click."""
    if os.environ.get("_SK_COMPLETE"):
        return  # shell completion is click's
    parsed = parse(argv)
    if parsed is None:
        return
    action, params = parsed
    try:
        handle_errors(action)(**params)
    except BrokenPipeError:  # `sk render x | head`: quiet, exit 1, as click does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    sys.exit(0)
