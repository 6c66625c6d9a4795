"""Where the site config is: --site, $SK_SITE, ~/.config/slurmkit/site.yaml, /etc/slurmkit/site.yaml.

Apart from the models (site.py) so that the render/submit path can find the file without importing pydantic.
"""

from __future__ import annotations

import os
from pathlib import Path

from slurmkit.errors import Problem, SiteConfigError

SITE_ENV = "SK_SITE"


def candidate_paths(explicit: str | None = None) -> list[tuple[str, Path]]:
    """Lookup order: --site, $SK_SITE, ~/.config/slurmkit/site.yaml, /etc/slurmkit/site.yaml."""
    out: list[tuple[str, Path]] = []
    if explicit:
        # click passes $SK_SITE as the --site value (envvar=); name what the user actually set
        out.append(("$SK_SITE" if explicit == os.environ.get(SITE_ENV) else "--site", Path(explicit)))
    if os.environ.get(SITE_ENV) and explicit != os.environ[SITE_ENV]:
        out.append(("$SK_SITE", Path(os.environ[SITE_ENV])))
    out.append(("user config", Path("~/.config/slurmkit/site.yaml").expanduser()))
    out.append(("system config", Path("/etc/slurmkit/site.yaml")))
    return out


def _exists(path: Path) -> bool | None:
    """True/False, or None when the path cannot be looked at (a directory on the way is not ours to read)."""
    try:
        return path.exists()
    except PermissionError:
        return None


def find_site_file(explicit: str | None = None) -> Path:
    found = find_site_file_if_any(explicit)
    if found is None:
        tried = candidate_paths(explicit)
        raise SiteConfigError(Problem(
            "no site configuration found; looked at " + ", ".join(str(p) for _, p in tried),
            hint="pass --site FILE, set SK_SITE, or ask your admins for /etc/slurmkit/site.yaml "
                 "(examples in site_config/)"))
    return found


def find_site_file_if_any(explicit: str | None = None) -> Path | None:
    """The site config file, or None when none exists (one named by --site or $SK_SITE must exist)."""
    tried = candidate_paths(explicit)
    for how, path in tried:
        found = _exists(path)
        if how in ("--site", "$SK_SITE"):
            if found is None:
                raise SiteConfigError(Problem(f"site config given by {how} cannot be read: permission denied",
                                              file=str(path), hint="ask its owner for read access, or copy it"))
            if not found:
                raise SiteConfigError(Problem(f"site config given by {how} does not exist", file=str(path)))
            return path
        if found:
            return path
    return None
