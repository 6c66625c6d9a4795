"""The wheel is what sites install: it must carry every package and the data slurmkit reads at run time.

The first wheel could not render (its templates were a symlink outside the package). These tests build the wheel
from this tree and look inside it; tests/integration/test_wheel_install.py installs it and uses it.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

from slurmkit.resources import SHIPPED

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_in_the_tree_is_listed_in_pyproject():
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    in_tree = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "slurmkit").rglob("__init__.py")}
    assert in_tree - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    data = {f"slurmkit.{name}" for name in SHIPPED}
    assert listed - in_tree == data, "listed packages that are neither in the tree nor shipped data"
    mapped = _pyproject()["tool"]["setuptools"]["package-dir"]
    assert mapped == {f"slurmkit.{name}": name for name in SHIPPED}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                          str(ROOT), "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    (whl,) = out.glob("slurmkit-*.whl")
    return zipfile.ZipFile(whl)


def test_wheel_carries_templates_site_configs_examples_and_migrations(wheel):
    names = set(wheel.namelist())
    for name in SHIPPED:
        src = ROOT / name
        expected = {f"slurmkit/{name}/{p.relative_to(src).as_posix()}" for p in src.rglob("*")
                    if p.is_file() and p.suffix in (".j2", ".yaml")}
        assert expected and expected <= names, f"{name}/ missing from the wheel: {sorted(expected - names)}"
    pkg = ROOT / "slurmkit"
    data = {f"slurmkit/{p.relative_to(pkg).as_posix()}" for p in pkg.rglob("*")
            if p.is_file() and p.suffix in (".sql", ".j2", ".js") and "__pycache__" not in p.parts}
    assert data <= names, f"package data missing from the wheel: {sorted(data - names)}"
    assert "slurmkit/py.typed" in names


def test_wheel_does_not_carry_the_tests_or_a_symlinked_tree(wheel):
    assert not [n for n in wheel.namelist() if n.startswith("tests/") or "/tests/" in n]
    assert not [i.filename for i in wheel.infolist() if (i.external_attr >> 16) & 0o170000 == 0o120000]


def test_extras_separate_what_a_site_installs_from_the_test_tools():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert {"report", "nvml", "postgres", "docs", "pyslurm", "all", "test"} <= set(extras)
    assert not any("pytest" in dep or "hypothesis" in dep for dep in extras["all"] + extras["report"])
    build = _pyproject()["build-system"]["requires"]
    assert any(req.startswith("setuptools>=77") for req in build), "license = 'SPDX' needs setuptools >= 77"
