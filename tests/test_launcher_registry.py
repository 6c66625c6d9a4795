"""Launcher names come from the registry: the built-in modules plus the `slurmkit.launchers` entry points, found by
importlib.metadata in a real (temporary) installed distribution that brings its own template directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DGX = str(ROOT / "site_config" / "dgx-a100.yaml")
SK = str(Path(sys.executable).parent / "sk")

# A third-party launcher as a plugin author would ship it: a module, its template directory, an entry point.
PLUGIN = '''
from pathlib import Path

from slurmkit.launchers import Launcher


class Hostfile(Launcher):
    name = "hostfile"
    summary = "one task per node that writes a hostfile and starts the ranks itself"
    explanation = "srun starts one task per node; the command reads SK_HOSTFILE_MARKER and starts its ranks."
    task_per = "node"
    local_rank_var = "LOCAL_RANK"
    template_dir = Path(__file__).parent / "sk_hostfile_templates"
'''
TEMPLATE = ("# SK_HOSTFILE_MARKER {{ plan.tasks_per_node }} task(s) per node\n"
            "{{ run }}srun {{ srun|words }} {{ command|words }}\n")
SPEC = "name: hf\nlauncher: {launcher}\nnodes: 2\ncommand: train.py --lr 1\n"


@pytest.fixture
def plugin(tmp_path):
    (tmp_path / "sk_hostfile.py").write_text(PLUGIN)
    (tmp_path / "sk_hostfile_templates" / "launchers").mkdir(parents=True)
    (tmp_path / "sk_hostfile_templates" / "launchers" / "hostfile.sh.j2").write_text(TEMPLATE)
    dist = tmp_path / "sk_hostfile-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sk-hostfile\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[slurmkit.launchers]\nhostfile = sk_hostfile:Hostfile\n")
    return {"PYTHONPATH": str(tmp_path), "SK_SITE": "", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}


def sk(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SK, *args], capture_output=True, text=True, env={**os.environ, **(env or {})})


def spec(tmp_path: Path, launcher: str) -> str:
    path = tmp_path / f"{launcher}.yaml"
    path.write_text(SPEC.format(launcher=launcher))
    return str(path)


def test_an_entry_point_launcher_is_chosen_by_name_and_renders_with_its_own_template(plugin, tmp_path):
    run = sk("render", spec(tmp_path, "hostfile"), "--site", DGX, env=plugin)
    assert run.returncode == 0, run.stderr
    assert "# SK_HOSTFILE_MARKER 1 task(s) per node" in run.stdout  # its template, its task layout
    assert "#SBATCH --ntasks-per-node=1" in run.stdout and "#SBATCH --nodes=2" in run.stdout
    assert "launcher hostfile (one task per node that writes a hostfile" in run.stdout


def test_a_misspelt_launcher_is_a_usage_error_with_a_suggestion_from_the_registry(plugin, tmp_path):
    run = sk("render", spec(tmp_path, "hostfle"), "--site", DGX, env=plugin)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "launcher: 'hostfle' is not a launcher installed here; did you mean 'hostfile'?" in run.stderr
    run = sk("render", spec(tmp_path, "torchrn"), "--site", DGX)  # without the plugin: the built-ins
    assert run.returncode == 2 and "did you mean 'torchrun'?" in run.stderr
    without = sk("render", spec(tmp_path, "hostfile"), "--site", DGX, env={**plugin, "PYTHONPATH": ""})
    assert without.returncode == 2 and "'hostfile' is not a launcher installed here" in without.stderr


def test_sk_templates_lists_every_launcher_with_its_explanation_and_the_plugins_template(plugin):
    run = sk("templates", "--site", DGX, env=plugin)
    assert run.returncode == 0, run.stderr
    assert "launchers/hostfile.sh.j2" in run.stdout and "launcher hostfile" in run.stdout
    for name in ("accelerate", "mpi", "none", "srun", "torchrun", "hostfile"):
        assert f"\n  {name} " in run.stdout
    assert "the command reads SK_HOSTFILE_MARKER" in run.stdout
    shown = sk("templates", "--site", DGX, "--show", "launchers/hostfile.sh.j2", env=plugin)
    assert shown.returncode == 0 and shown.stdout == TEMPLATE
