"""Where the data that ships with slurmkit lives: job templates, example site configs, example job specs.

In the repository they are top-level directories beside the package (`job_templates/`, `site_config/`,
`examples/`); a wheel maps them into the package (`slurmkit/job_templates/`, ...; see `package-dir` in
pyproject.toml). The installed copy is preferred, the source tree is the fallback (an editable install or a
checkout on `sys.path`). Plain paths, no importlib.resources: this is on the `sk render` fast path.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
SHIPPED = ("job_templates", "site_config", "examples")


def data_dir(name: str) -> Path:
    """The directory of shipped data `name` (one of SHIPPED)."""
    if name not in SHIPPED:
        raise ValueError(f"unknown shipped data directory {name!r} (one of {', '.join(SHIPPED)})")
    installed = PACKAGE / name
    return installed if installed.is_dir() else PACKAGE.parent / name


TEMPLATES_DIR = data_dir("job_templates")
