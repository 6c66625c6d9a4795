"""Out-of-range and mistyped spec values are one located error (exit 2), never a traceback or a wrong job:
booleans as counts, impossible job ids, environment names `export` refuses, empty sweeps, sweep parameters
inside env values, an --output that cannot be written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from slurmkit.config.source import loads
from slurmkit.errors import SpecError
from slurmkit.plan import make_plan
from slurmkit.render import render
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source

MAX_JOB_ID = 0xFFFFFFFD  # uint32 minus NO_VAL and INFINITE (slurm.h)

ROOT = Path(__file__).resolve().parents[1]
SK = str(Path(sys.executable).parent / "sk")
SITE = load_site(ROOT / "site_config" / "devcluster.yaml")
BASE = {"name": "x", "launcher": "none", "gpus_per_node": 1, "command": ["true"]}


def spec(**extra):
    return spec_from_source(loads(yaml.safe_dump({**BASE, **extra}, allow_unicode=True), "t.yaml"))


def error_of(**extra) -> str:
    with pytest.raises(SpecError) as err:
        spec(**extra)
    return err.value.format()


def script(**extra) -> str:
    src = loads(yaml.safe_dump({**BASE, **extra}, allow_unicode=True), "t.yaml")
    return render(make_plan(spec_from_source(src), SITE, src))


@pytest.mark.parametrize(("extra", "key"), [
    ({"nodes": True}, "nodes"), ({"gpus_per_node": True}, "gpus_per_node"), ({"gpus_per_node": None, "gpus": True},
                                                                             "gpus"),
    ({"cpus_per_gpu": True}, "cpus_per_gpu"), ({"master_port": True}, "master_port"),
    ({"preempt": {"grace": True}}, "preempt.grace"), ({"preempt": {"max_restarts": False}}, "preempt.max_restarts"),
    ({"array": {"grid": {"p": [1]}, "max_parallel": True}}, "array.max_parallel"), ({"nodes": 2.0}, "nodes"),
    ({"dependency": {"afterok": [True]}}, "dependency.afterok[0]"),
    ({"sbatch_extra": {"hold": True}}, "sbatch_extra.hold"),
])
def test_booleans_and_floats_are_not_counts(extra, key):
    assert f"error: {key}:" in error_of(**extra)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_JOB_ID + 1)), st.booleans())
def test_impossible_job_ids_are_refused_as_dependencies(job_id, as_text):
    ref = str(job_id) if as_text and job_id >= 0 else job_id
    assert "dependency.afterok[0]: " in error_of(dependency={"afterok": [ref]})


@settings(max_examples=50, deadline=None)
@given(st.integers(1, MAX_JOB_ID))
def test_possible_job_ids_reach_the_dependency_option(job_id):
    assert f"#SBATCH --dependency=afterok:{job_id}\n" in script(dependency={"afterok": [job_id]})


def test_digits_that_are_not_ascii_are_not_a_job_id():
    assert "neither a job id nor a spec name" in error_of(dependency={"afterok": ["١٢"]})


def run_script(text: str, command: str, **env: str) -> str:
    """The rendered batch script run by bash, with its final command replaced by `command`."""
    body, _, last = text.rstrip("\n").rpartition("\n")
    assert last.startswith("true")
    out = subprocess.run(["bash", "-c", body + "\n" + command], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", **env})
    return out.stdout


# Text YAML can carry (no C0/C1 controls but tab, no surrogates or non-characters).
yaml_text = st.characters(blacklist_categories=("Cs", "Cc", "Cn"), whitelist_characters="\t")
names = st.text(st.one_of(st.sampled_from("_ -=$.1"), yaml_text), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(names, st.text(yaml_text, max_size=12))
@example("\u2028", "")  # a line separator: YAML's line break, so the spec text is written with JSON escapes
def test_nccl_env_names_are_refused_unless_bash_exports_them(name, value):
    key = "X" + name  # not NCCL_*: the NCCL lint has its own opinion on those names
    try:
        text = script(nccl={"env": {key: value}})
    except SpecError as err:
        assert "error: nccl.env" in err.format() and f"{key!r} is not an environment variable name" in err.format()
        # bash (C locale) agrees: no variable of exactly that name can be exported ("X=" would export X)
        assert subprocess.run(["bash", "-c", 'export -- "$1=1" && declare -p -- "$1"', "_", key], capture_output=True,
                              env={"PATH": "/usr/bin:/bin"}).returncode != 0
        return
    assert run_script(text, f'printf %s "${{{key}}}"') == value


@pytest.mark.parametrize("array", [{"grid": {}}, {"tasks": [{}]}])
def test_a_sweep_without_parameters_is_refused(array):
    assert "has no parameters" in error_of(array=array)


def test_no_rendered_sweep_has_a_bare_export():
    for golden in (ROOT / "tests" / "golden").glob("*/*.sh"):
        assert "\nexport\n" not in golden.read_text(), golden


@pytest.mark.parametrize(("array", "tags"), [
    ({"grid": {"lr": [0.1, "a b"], "seed": [1, 2]}}, ["run-0.1-1", "run-0.1-2", "run-a b-1", "run-a b-2"]),
    ({"tasks": [{"lr": "x"}, {"lr": "$(id)"}]}, ["run-x-{seed}", "run-$(id)-{seed}"]),
])
def test_sweep_parameters_in_env_values_are_the_task_values(array, tags):
    seed = "{seed}" if "grid" in array else "{{seed}}"
    text = script(array=array, env={"RUN_TAG": "run-{lr}-" + seed})
    got = [run_script(text, 'printf %s "$RUN_TAG"', SLURM_ARRAY_TASK_ID=str(i)) for i in range(len(tags))]
    assert got == tags


def test_render_to_a_directory_that_does_not_exist_is_a_located_error(tmp_path):
    out = tmp_path / "no" / "such" / "x.sh"
    run = subprocess.run([SK, "render", str(ROOT / "examples" / "single-gpu.yaml"), "--site",
                          str(ROOT / "site_config" / "devcluster.yaml"), "-o", str(out)], capture_output=True,
                         text=True)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.splitlines()[0].startswith(f"{out}: error: --output: cannot write the script"), run.stderr
