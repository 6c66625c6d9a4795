"""Worked examples: each examples/*.yaml planned and rendered for the site at build time by the real planner and
renderer (the same calls `sk render` makes), so a script in the guide is always what a user would get.

An example that does not fit the site (too many GPUs per node, a container without a runtime, ...) is listed with
the planner's own message instead of a script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from slurmkit.config.source import load
from slurmkit.errors import InputError
from slurmkit.plan import Plan, make_plan
from slurmkit.render import render
from slurmkit.resources import data_dir
from slurmkit.site.model import Site
from slurmkit.spec import spec_from_source

EXAMPLES_DIR = data_dir("examples")


@dataclass
class Example:
    name: str  # file stem
    path: Path
    text: str  # the YAML as shipped
    summary: str  # the leading comment
    script: str | None = None
    plan: Plan | None = None
    warnings: list[str] = field(default_factory=list)
    skipped: str | None = None  # the planner's message when the example does not fit


def example_files(directory: Path = EXAMPLES_DIR) -> list[Path]:
    return sorted(directory.glob("*.yaml"))


def _summary(text: str) -> str:
    lines = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("# ").rstrip())
    return " ".join(lines)


def _placeholder_deps(path: Path) -> dict[str, int]:
    # Same stand-in as `sk render`: dependencies on specs by name get job id 0 (slurmkit/cli/actions.py).
    from slurmkit.inputs import dependency_names

    return dict.fromkeys(dependency_names(load(path).data), 0)


def build_example(path: Path, site: Site) -> Example:
    text = path.read_text()
    ex = Example(name=path.stem, path=path, text=text, summary=_summary(text))
    try:
        src = load(path)
        src.file = path.name  # messages name the file as the reader has it: `sk render sweep.yaml`
        spec = spec_from_source(src)
        ex.plan = make_plan(spec, site, src, _placeholder_deps(path))
        ex.script = render(ex.plan)
    except InputError as exc:
        ex.skipped = exc.format()
        return ex
    ex.warnings = [w.format() for w in ex.plan.warnings]
    return ex


def build_examples(site: Site, directory: Path = EXAMPLES_DIR) -> list[Example]:
    return [build_example(p, site) for p in example_files(directory)]
