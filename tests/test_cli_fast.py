"""The click-free fast path for plain `sk render|submit|validate` (slurmkit/cli/fast.py) must mean exactly what
click means: the same parameters for every command line it takes, click for everything else, same output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from slurmkit.cli import actions, fast, jobs

ROOT = Path(__file__).resolve().parents[1]
DGX = str(ROOT / "site_config" / "dgx-a100.yaml")
EXAMPLE = str(ROOT / "examples" / "torchrun-2node.yaml")
SWEEP = str(ROOT / "examples" / "sweep.yaml")
SK = str(Path(sys.executable).parent / "sk")


def click_params(argv: list[str]) -> dict:
    cmd = getattr(jobs, argv[0])
    with cmd.make_context("sk", list(argv[1:])) as ctx:
        return ctx.params


TAKEN = [
    ["render", EXAMPLE],
    ["render", EXAMPLE, "--site", DGX],
    ["render", "--site=" + DGX, EXAMPLE, "--set", "nodes=4", "--set=name=x y"],
    ["render", EXAMPLE, "-o", "/tmp/out.sbatch", "--explain"],
    ["render", EXAMPLE, "--output=/tmp/out.sbatch"],
    ["render", "not-there.yaml"],
    ["validate", EXAMPLE, SWEEP, "--json", "--site", DGX],
    ["submit", EXAMPLE, "--backend", "cli", "--json"],
    ["submit", EXAMPLE, SWEEP, "--dry-run", "--test-only", "--backend=rest", "--set", "time=10"],
]


@pytest.mark.parametrize("argv", TAKEN, ids=lambda a: " ".join(Path(x).name for x in a))
@pytest.mark.parametrize("sk_site", ["", "/elsewhere/site.yaml"])
def test_the_fast_path_passes_exactly_what_click_passes(argv, sk_site, monkeypatch):
    monkeypatch.setenv("SK_SITE", sk_site)
    parsed = fast.parse(argv)
    assert parsed is not None, "a plain command line must not need click"
    action, params = parsed
    assert action is getattr(actions, argv[0])
    assert params == click_params(argv)


@pytest.mark.parametrize("argv", [
    ["render", EXAMPLE, "--help"], ["render", "-h"], ["submit"], ["render"], ["render", EXAMPLE, SWEEP],
    ["render", EXAMPLE, "--sit", DGX], ["render", EXAMPLE, "--site"], ["render", EXAMPLE, "--site", "--explain"],
    ["render", EXAMPLE, "--site", DGX, "--site", DGX], ["render", EXAMPLE, "-o=x.sbatch"],
    ["render", EXAMPLE, "-ox.sbatch"], ["render", "--", EXAMPLE], ["render", "-"], ["render", str(ROOT)],
    ["render", EXAMPLE, "-o", str(ROOT)], ["render", EXAMPLE, "--explain=yes"], ["render", EXAMPLE, "--site="],
    ["submit", EXAMPLE, "--json", "--json"], ["templates"], [],
    ["--version"], ["render", EXAMPLE, "--json"], ["validate", EXAMPLE, "--explain"],
], ids=lambda a: " ".join(Path(x).name for x in a) or "(none)")
def test_anything_unusual_is_left_to_click(argv):
    assert fast.parse(argv) is None


def _option_table(cmd: click.Command) -> dict[str, tuple[str, str]]:
    table = {}
    for p in cmd.params:
        if isinstance(p, click.Option) and p.name != "help":
            kind = "flag" if p.is_flag else "multiple" if p.multiple else "value"
            table.update({o: (p.name, kind) for o in p.opts})
    return table


@pytest.mark.parametrize("name", sorted(fast.COMMANDS))
def test_the_fast_path_knows_every_option_of_the_click_command(name):
    cmd, known = getattr(jobs, name), fast.COMMANDS[name]
    mine = {o: (p, "multiple" if p in known.multiple else "value") for o, p in known.values.items()}
    mine.update({o: (p, "flag") for o, p in known.flags.items()})
    assert mine == _option_table(cmd)
    (arg,) = [p for p in cmd.params if isinstance(p, click.Argument)]
    assert (arg.name, arg.nargs == -1) == (known.files, known.many)
    for p in cmd.params:
        # The fast path checks no value lists: a click.Choice would be refused by click alone.
        assert not isinstance(p.type, click.Choice), p.name
        if p.envvar:
            assert known.envvars[p.name] == p.envvar


def _via_click(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    code = "import sys; from slurmkit.cli.main import cli; cli.main(args=sys.argv[1:], prog_name='sk')"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def _via_sk(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SK, *args], capture_output=True, text=True, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("args", [
    ("render", EXAMPLE, "--site", DGX),
    ("render", SWEEP, "--site", DGX, "--explain"),
    ("validate", EXAMPLE, SWEEP, "--site", DGX),
    ("render", EXAMPLE, "--site", DGX, "--set", "nodez=3"),
    ("render", EXAMPLE, "--site", DGX, "--set", "nccl.env.NCCL_TOPO=1"),
    ("render", EXAMPLE, "--site", "/nonexistent/site.yaml"),
    ("submit", EXAMPLE, "--site", DGX, "--set", "nodes=99", "--backend", "cli"),
    ("submit", EXAMPLE, "--site", DGX, "--dry-run", "--backend", "clii"),  # not registered: did you mean
], ids=lambda a: " ".join(Path(x).name for x in a))
def test_output_and_exit_status_are_the_same_as_through_click(args):
    fast_run, click_run = _via_sk(*args), _via_click(*args)
    assert (fast_run.returncode, fast_run.stdout, fast_run.stderr) == \
        (click_run.returncode, click_run.stdout, click_run.stderr)
    assert "Traceback" not in fast_run.stderr


def test_writing_the_script_to_a_file(tmp_path):
    out = tmp_path / "job.sbatch"
    run = _via_sk("render", EXAMPLE, "--site", DGX, "-o", str(out))
    assert run.returncode == 0 and run.stderr == f"wrote {out}\n"
    assert out.read_text() == _via_sk("render", EXAMPLE, "--site", DGX).stdout
