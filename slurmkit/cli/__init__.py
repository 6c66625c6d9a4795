"""The `sk` command. Thin: parses arguments and calls the library; turns SlurmkitError into message + exit code.

`sk hook ...` is dispatched before click is imported: Slurm runs the hooks once per job (jobcomp one at a time,
on the controller), so that path must stay light (see slurmkit/accounting/hooks.py). Plain `sk render`,
`sk submit` and `sk validate` command lines also run without click (slurmkit/cli/fast.py).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "hook":
        from slurmkit.accounting.hooks import main as hook_main

        sys.exit(hook_main(args[1:]))
    from slurmkit.cli.fast import run_if_plain

    run_if_plain(args)  # returns when the command line is click's
    from slurmkit.cli.main import cli

    cli.main(args=args, prog_name="sk")
