"""A click group whose subcommands are imported only when used, so `sk render` does not pay for `sk report`."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    """Subcommands given as {"name": "module.path:attribute"}; imported on first use (click's documented recipe)."""

    def __init__(self, *args, lazy: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            modname, attr = self.lazy[name].split(":")
            return getattr(importlib.import_module(modname), attr)
        return super().get_command(ctx, name)

    def resolve_command(self, ctx, args):
        # Suggest the closest command for a typo instead of click's bare "No such command".
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            if args and args[0] not in self.list_commands(ctx):
                from slurmkit.config.suggest import did_you_mean

                raise click.UsageError(f"no such command {args[0]!r}; "
                                       f"{did_you_mean(args[0], self.list_commands(ctx))}", ctx) from exc
            raise
