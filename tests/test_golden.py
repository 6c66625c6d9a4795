"""Rendered scripts match the reviewed golden files, and every one passes bash -n and shellcheck."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.golden import cases, golden_path, render_case

CASES = cases()
IDS = [f"{s.stem}/{e.stem}" for e, s in CASES]
# Examples that do not apply to a site (a container job where the site has no runtime) have no golden file.
RENDERED = [(e, s, t) for e, s in CASES if (t := render_case(e, s)) is not None]


@pytest.mark.parametrize(("example", "site"), CASES, ids=IDS)
def test_rendered_script_matches_golden(example, site):
    text = render_case(example, site)
    path = golden_path(example, site)
    if text is None:
        assert not path.exists(), f"{path} exists but the example no longer renders for this site"
        return
    assert path.exists(), f"no golden file {path}: run `make golden` and review the new file"
    assert text == path.read_text(), f"{path} differs: run `make golden` and review `git diff tests/golden`"


@pytest.mark.parametrize(("example", "site", "text"), RENDERED, ids=[f"{s.stem}/{e.stem}" for e, s, _ in RENDERED])
def test_rendered_script_passes_bash_n_and_shellcheck(example, site, text, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(text)
    subprocess.run(["bash", "-n", str(script)], check=True)
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is required (Debian package shellcheck; .ci/run installs it)"
    run = subprocess.run([shellcheck, "--severity=style", str(script)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
