"""The launchers: one module per launcher (its file name is its name), each registering a `Launcher`.

Looking a launcher up imports only its module, and listing the names only lists this directory, so `sk render`
pays for the one launcher it uses. Every launcher: `all_launchers()` (the docs, `--explain` tables).
"""

from __future__ import annotations

import os

from slurmkit.launchers.base import REGISTRY, Launcher, register_launcher

__all__ = ["Launcher", "all_launchers", "get", "launcher_names", "register_launcher"]

_HERE = os.path.dirname(__file__)


def launcher_names() -> tuple[str, ...]:
    """Every built-in launcher's name, sorted: the choices of the job spec's `launcher` key."""
    return tuple(sorted(f[:-3] for f in os.listdir(_HERE)
                        if f.endswith(".py") and not f.startswith("_") and f != "base.py"))


def get(name: str) -> Launcher:
    """The launcher called `name`. KeyError for a name that is no launcher module."""
    if name not in REGISTRY:
        if name not in launcher_names():
            raise KeyError(name)
        __import__(f"slurmkit.launchers.{name}")  # registers it (no importlib: ~1 ms of a cold render)
        if name not in REGISTRY:
            raise KeyError(f"slurmkit/launchers/{name}.py registers no launcher named {name!r}")
    return REGISTRY[name]


def all_launchers() -> list[Launcher]:
    return [get(n) for n in launcher_names()]
