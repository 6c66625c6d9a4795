"""The launchers: one module per built-in launcher (its file name is its name), each registering a `Launcher`;
third-party launchers come from the entry-point group `slurmkit.launchers` and add to, never replace, them.

Looking a built-in up imports only its module, and listing the built-in names only lists this directory, so
`sk render` pays for the one launcher it uses; the entry points are read only for a name that is no built-in
(or for a full list: the docs, `sk templates`). An entry point names a `Launcher` subclass (or instance) whose
`name` is the entry point's name; it may bring its own templates (`Launcher.template_dir`).
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

from slurmkit.launchers.base import REGISTRY, Launcher, register_launcher

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["GROUP", "Launcher", "all_launchers", "builtin_names", "get", "launcher_names", "register_launcher"]

GROUP = "slurmkit.launchers"
_HERE = os.path.dirname(__file__)


def builtin_names() -> tuple[str, ...]:
    """The built-in launchers' names, sorted (this directory's modules)."""
    return tuple(sorted(f[:-3] for f in os.listdir(_HERE)
                        if f.endswith(".py") and not f.startswith("_") and f != "base.py"))


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    builtin = builtin_names()
    return {ep.name: ep for ep in entry_points(group=GROUP) if ep.name not in builtin}


def launcher_names() -> tuple[str, ...]:
    """Every launcher this installation has: the built-ins, then the entry points (the spec's `launcher` choices)."""
    return (*builtin_names(), *sorted(_entry_points()))


def _load(name: str, ep: EntryPoint) -> None:
    obj = ep.load()
    where = f"entry point {name!r} ({ep.value}) of group {GROUP}"
    if isinstance(obj, type) and issubclass(obj, Launcher):
        if obj.name in REGISTRY and type(REGISTRY[obj.name]) is obj:
            return  # its module used @register_launcher
        if obj.name != name:
            raise KeyError(f"{where} is a launcher named {obj.name!r}")
        register_launcher(obj)
    elif isinstance(obj, Launcher) and obj.name == name:
        REGISTRY.setdefault(name, obj)
    else:
        raise KeyError(f"{where} is not a Launcher subclass named {name!r}")


def get(name: str) -> Launcher:
    """The launcher called `name`. KeyError for a name that is neither a launcher module nor an entry point."""
    if name not in REGISTRY:
        if name in builtin_names():
            __import__(f"slurmkit.launchers.{name}")  # registers it (no importlib: ~1 ms of a cold render)
        elif name in _entry_points():
            _load(name, _entry_points()[name])
        else:
            raise KeyError(name)
        if name not in REGISTRY:
            raise KeyError(f"slurmkit/launchers/{name}.py registers no launcher named {name!r}")
    return REGISTRY[name]


def all_launchers() -> list[Launcher]:
    return [get(n) for n in launcher_names()]
