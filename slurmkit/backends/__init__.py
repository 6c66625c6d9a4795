"""Backends: how slurmkit talks to Slurm. Built-ins are registered here; third-party backends come from the
entry-point group `slurmkit.backends` and add to, never replace, the built-ins."""

from __future__ import annotations

from collections.abc import Callable

from slurmkit.backends.base import Backend
from slurmkit.errors import InputError, Problem
from slurmkit.request import SubmitRequest

_BUILTIN: dict[str, Callable[[], Backend]] = {}
_NEEDS_SITE: set[str] = set()  # built-ins whose factory takes the site config (rest: its rest_url)


def register(name: str, *, needs_site: bool = False) -> Callable:
    def deco(factory: Callable[..., Backend]) -> Callable[..., Backend]:
        _BUILTIN[name] = factory
        if needs_site:
            _NEEDS_SITE.add(name)
        return factory
    return deco


@register("cli")
def _cli() -> Backend:
    from slurmkit.backends.cli import CliBackend

    return CliBackend()


@register("rest", needs_site=True)
def _rest(site=None) -> Backend:
    from slurmkit.backends.rest import RestBackend

    return RestBackend.from_site(site)


@register("pyslurm")
def _pyslurm() -> Backend:
    from slurmkit.backends.pyslurm import PyslurmBackend

    return PyslurmBackend()


def available() -> dict[str, Callable[[], Backend]]:
    found = dict(_BUILTIN)
    from importlib.metadata import entry_points

    for ep in entry_points(group="slurmkit.backends"):
        found.setdefault(ep.name, ep.load)
    return found


def get_backend(name: str | None, site=None) -> Backend:
    """By name, else the site config's backend, else auto-detect (the cli backend where nothing else fits)."""
    choice = name or (site.backend if site is not None else "auto")
    if choice == "auto":  # pyslurm when it imports and matches the running Slurm, else cli
        from slurmkit.backends.pyslurm import detect

        choice = "pyslurm" if detect().usable else "cli"
    if choice in _BUILTIN:  # entry points never replace a built-in: skip scanning them (importlib.metadata)
        return _BUILTIN[choice](site) if choice in _NEEDS_SITE else _BUILTIN[choice]()
    backends = available()
    if choice not in backends:
        from slurmkit.config.suggest import did_you_mean

        raise InputError(Problem(f"backend {choice!r} is not available here", key="backend",
                                 hint=did_you_mean(choice, backends)))
    return backends[choice](site) if choice in _NEEDS_SITE else backends[choice]()


def describe_submission(name: str | None, request: SubmitRequest, *, test_only: bool = False) -> str:
    return get_backend(name if name != "auto" else None).describe(request, test_only=test_only)
