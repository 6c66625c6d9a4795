"""The README's commands run as shown. Every ```console block in README.md and docs/*.md is executed here, line
by line (`$ sk ...`), from a directory holding the files the page defines (a ```yaml block whose first line is
`# NAME`) and the repository's shipped `site_config/` and `examples/`; each must exit 0 and print what its
comment promises in kind (a script, JSON). Blocks that need a cluster are plain ``` blocks, not console."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(page.read_text())]


def _commands() -> list[tuple[Path, str]]:
    found = []
    for page in PAGES:
        for lang, body in _blocks(page):
            if lang != "console":
                continue
            for line in body.splitlines():
                if line.startswith("$ "):
                    found.append((page, line[2:].split("  #")[0].strip()))
    return found


def test_the_readme_has_console_examples():
    assert [c for p, c in _commands() if p.name == "README.md"], "README.md lost its tested examples"


@pytest.mark.parametrize(("page", "command"), _commands(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_console_example_runs_as_shown(page: Path, command: str, tmp_path: Path):
    for lang, body in _blocks(page):
        first = body.partition("\n")[0]
        if lang == "yaml" and first.startswith("# ") and re.fullmatch(r"[\w.-]+\.ya?ml", first[2:].strip()):
            (tmp_path / first[2:].strip()).write_text(body)
    for shipped in ("site_config", "examples"):
        (tmp_path / shipped).symlink_to(ROOT / shipped)
    argv = shlex.split(command)
    assert argv[0] == "sk", f"{page.name}: console examples are sk commands: {command}"
    run = subprocess.run([SK, *argv[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert run.returncode == 0, f"{page.name}: `{command}` exited {run.returncode}: {run.stderr}"
    if "--explain" in argv or "--json" in argv:
        json.loads(run.stdout)
    elif argv[1] == "render":
        assert run.stdout.startswith("#!/bin/bash\n")
    elif "--dry-run" in argv:
        assert "#!/bin/bash" in run.stdout and "would run:" in run.stdout
    else:
        assert run.stdout.strip() or run.stderr.strip()
