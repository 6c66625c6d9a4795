"""Backends: how slurmkit talks to Slurm. Built-ins are registered here; third-party backends come from the
entry-point group `slurmkit.backends` and add to, never replace, the built-ins.

Every factory, built-in or entry point, is called with the site config (or None) and returns a Backend:
an entry point may name a Backend subclass whose __init__ takes `site`, or any such callable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slurmkit.backends.base import Backend, Choice
from slurmkit.errors import InputError, Problem, SiteConfigError

Factory = Callable[[Any], Backend]
_BUILTIN: dict[str, Factory] = {}
AUTO = "auto"


def register(name: str) -> Callable[[Factory], Factory]:
    def deco(factory: Factory) -> Factory:
        _BUILTIN[name] = factory
        return factory
    return deco


@register("cli")
def _cli(site: Any = None) -> Backend:
    from slurmkit.backends.cli import CliBackend

    return CliBackend()


@register("rest")
def _rest(site: Any = None) -> Backend:
    from slurmkit.backends.rest import RestBackend

    return RestBackend.from_site(site)


@register("pyslurm")
def _pyslurm(site: Any = None) -> Backend:
    from slurmkit.backends.pyslurm import PyslurmBackend

    return PyslurmBackend()


def available() -> dict[str, Factory]:
    """Every backend this installation can build: the built-ins, then the entry points (which never replace one)."""
    found = dict(_BUILTIN)
    from importlib.metadata import entry_points

    for ep in entry_points(group="slurmkit.backends"):
        found.setdefault(ep.name, lambda site, ep=ep: ep.load()(site))  # imported only when chosen
    return found


def names() -> list[str]:
    """The names `--backend` and the site's `backend:` accept (scans the entry points)."""
    return [AUTO, *available()]


def choose(name: str | None, site: Any = None) -> Choice:
    """By name (`--backend`), else the site config's `backend:`, else auto: pyslurm when it imports and matches
    the running Slurm, else cli. Names are not checked here (get_backend does, when it builds one)."""
    if name and name != AUTO:
        return Choice(name, "named by --backend")
    configured = getattr(site, "backend", None) if site is not None else None
    if not name and configured and configured != AUTO:
        where = getattr(site, "source_file", None) or "the site config"
        return Choice(configured, f"backend: {configured} in {where}")
    from slurmkit.backends.pyslurm import detect

    found = detect()
    asked = "--backend auto" if name else "backend: auto"
    if found.usable:
        return Choice("pyslurm", f"{asked}: {found.reason}")
    return Choice("cli", f"{asked}: cli (sbatch), because {found.reason}")


def _factory(choice: str, site: Any, from_site: bool) -> Factory:
    if choice in _BUILTIN:  # entry points never replace a built-in: skip scanning them (importlib.metadata)
        return _BUILTIN[choice]
    backends = available()
    if choice in backends:
        return backends[choice]
    from slurmkit.config.suggest import did_you_mean

    hint = did_you_mean(choice, names())
    if from_site:
        file = getattr(site, "source_file", None)
        raise SiteConfigError(Problem(f"backend {choice!r} is not a backend installed here", file=file,
                                      key="backend", line=_line_of_backend(file), hint=hint))
    raise InputError(Problem(f"backend {choice!r} is not a backend installed here", key="--backend", hint=hint))


def _line_of_backend(file: str | None) -> int | None:
    """The line of the site file's `backend:` key (read only when its value is wrong)."""
    if not file:
        return None
    from slurmkit.config.source import load
    from slurmkit.errors import SlurmkitError

    try:
        return load(file).line_of(("backend",))
    except SlurmkitError:
        return None


def get_backend(name: str | None, site: Any = None) -> Backend:
    """The backend `choose` picks, built with the site; `.choice` says which and why.
    A name that is not registered is an InputError with a did-you-mean (located in the site file when it
    came from there)."""
    choice = choose(name, site)
    from_site = not name and site is not None and getattr(site, "backend", None) == choice.name
    backend = _factory(choice.name, site, from_site)(site)
    backend.choice = choice
    return backend
