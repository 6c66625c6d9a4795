"""Golden rendered scripts: every example x every shipped site that can run it.

Regenerate after an intended change with `make golden` (= `python -m tests.golden`), then read the diff
(`git diff tests/golden`) by eye before committing it: that diff is the review of what users' scripts become.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent
SITES = sorted((ROOT / "site_config").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def render_case(example: Path, site: Path) -> str | None:
    """The script, or None when the example does not apply to the site (e.g. containers without a runtime)."""
    from slurmkit.errors import InputError
    from slurmkit.plan import make_plan
    from slurmkit.render import render
    from slurmkit.site.model import load_site
    from slurmkit.spec import load_spec

    spec, src = load_spec(str(example))
    src.file = f"examples/{example.name}"
    try:
        plan = make_plan(spec, load_site(site), src)
    except InputError:
        return None
    return render(plan)


def golden_path(example: Path, site: Path) -> Path:
    return GOLDEN / site.stem / (example.stem + ".sh")


def cases() -> list[tuple[Path, Path]]:
    return [(e, s) for s in SITES for e in EXAMPLES]
