"""The two inputs of `sk render`/`sk submit`, read through the per-user cache (config/cache.py): the site config
and the job spec, each validated by its own model (site/model.py, spec.py) or remembered as a plain copy.

Here rather than in config/ because it needs both models, and the models need config/: in config/cache.py it
was the cycle config -> site/spec -> config.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurmkit.config.cache import get, key, put
from slurmkit.config.modeldata import JobSpecData, SiteData, plain_copy
from slurmkit.config.source import Source, loads, read_text


def load_site(path: str | Path) -> SiteData:
    """The site config at `path`, validated (site.load_site) or remembered, as a plain copy."""
    text = read_text(path)
    entry = key("site", str(path), text)
    site = get(entry)
    if not isinstance(site, SiteData):
        from slurmkit.site.model import site_from_source

        site = plain_copy(site_from_source(loads(text, str(path))))
        put(entry, site)
    return site


@dataclass
class SpecFile:
    """A job spec file, read and parsed (its YAML problems already raised), not yet validated.

    `data` is what the file says, before `--set`. `validate()` applies the overrides and checks the result
    (spec.spec_from_source) unless this exact file and overrides were validated before.
    """

    path: str
    overrides: list[str]
    data: dict[str, Any]
    _entry: str
    _src: Source | None = None  # parsed, on a miss
    _done: tuple[JobSpecData, Source] | None = None  # remembered, on a hit

    def validate(self) -> tuple[JobSpecData, Source]:
        if self._done is None:
            from slurmkit.spec import spec_from_source

            assert self._src is not None
            job = plain_copy(spec_from_source(self._src, self.overrides))
            put(self._entry, (job, self._src, self.data))
            self._done = job, self._src
        return self._done


def read_spec(path: str, overrides: list[str] | None = None) -> SpecFile:
    """Read a spec file: file and YAML problems are raised here, spec problems by `validate()`."""
    overrides = list(overrides or [])
    text = read_text(path)
    entry = key("spec", str(path), text, *overrides)
    hit = get(entry)
    if isinstance(hit, tuple) and len(hit) == 3 and isinstance(hit[0], JobSpecData) and isinstance(hit[1], Source):
        return SpecFile(str(path), overrides, hit[2], entry, _done=(hit[0], hit[1]))
    src = loads(text, str(path))
    data = copy.deepcopy(src.data) if overrides else src.data  # --set edits src.data in place
    return SpecFile(str(path), overrides, data, entry, _src=src)


def dependency_names(data: dict) -> set[str]:
    """Names of other specs that a spec's `dependency` refers to (job ids excluded)."""
    deps = data.get("dependency") or {}
    if not isinstance(deps, dict):
        return set()
    return {r for refs in deps.values() if isinstance(refs, list) for r in refs
            if isinstance(r, str) and not r.isdigit()}
