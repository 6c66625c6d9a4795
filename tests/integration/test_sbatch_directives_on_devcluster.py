"""sbatch itself reads every #SBATCH option of a rendered script back exactly as planned (devcluster).

The oracle is sbatch's own parser: with -vvv it logs each argument it took from the script ("Found in script,
argument ...", src/sbatch/opt.c _opt_batch_script) before it processes any, and --test-only creates no job.
Held jobs (--hold) show what slurmctld stored, read back with `scontrol show job --json`.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings

from slurmkit.config.source import loads
from slurmkit.plan import make_plan
from slurmkit.render import render
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source
from tests.integration.jobs import DEVSITE
from tests.test_quoting import field_text, planned_argv

pytestmark = pytest.mark.integration
PREFIX = b'sbatch: debug2: Found in script, argument "'


def plan_for(spec: dict):
    src = loads(yaml.safe_dump(spec, allow_unicode=True), "t.yaml")
    return make_plan(spec_from_source(src), load_site(DEVSITE), src)


def sbatch_read_back(script: str, cwd) -> list[str]:
    run = subprocess.run(["sbatch", "-vvv", "--test-only"], input=script.encode(), capture_output=True, cwd=cwd,
                         timeout=30)
    return [line[len(PREFIX):-1].decode() for line in run.stderr.split(b"\n") if line.startswith(PREFIX)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(name="x y\tz", workdir="/scratch/my project", output="#o \"q\" \\", user="a\tb",
         constraint="c d")
@given(name=field_text, workdir=field_text, output=field_text, user=field_text, constraint=field_text)
def test_sbatch_reads_back_the_planned_options_for_any_values(tmp_path, name, workdir, output, user, constraint):
    plan = plan_for({"name": name, "launcher": "none", "gpus_per_node": 1, "command": ["true"],
                     "workdir": workdir, "output": output, "mail": {"user": user},
                     "sbatch_extra": {"constraint": constraint}})
    argv = sbatch_read_back(render(plan), tmp_path)
    assert argv and argv == planned_argv(plan)


def held_job(job_id: str) -> dict[str, str]:
    """What slurmctld stored. `scontrol show job --json` where scontrol has it (25.11: exact values, %j unexpanded);
    Slurm 22.05's scontrol has no --json, and its multi-line text form is exact for these fields: JobName is the
    rest of the first line, WorkDir/StdOut are lines of their own (25.11's text form drops backslashes, so it is not
    used there)."""
    run = subprocess.run(["scontrol", "show", "job", job_id, "--json"], capture_output=True, text=True, timeout=30)
    if run.returncode == 0:
        j = json.loads(run.stdout)["jobs"][0]
        return {"JobName": j["name"], "WorkDir": j["current_working_directory"], "StdOut": j["standard_output"],
                "OverSubscribe": "OK" if j["shared"] == [] else str(j["shared"]),  # [none] when exclusive
                "TresPerTask": j.get("tres_per_task", "")}
    assert "unrecognized option" in run.stderr, run.stderr
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    first, *rest = out.splitlines()
    job = {"JobName": first.split(" JobName=", 1)[1]}
    for line in rest:
        line = line.strip()
        key, _, value = line.partition("=")
        if key in ("WorkDir", "StdOut", "StdErr", "Command"):
            job[key] = value
        else:
            job.update(pair.split("=", 1) for pair in line.split(" ") if "=" in pair)
    job["StdOut"] = job["StdOut"].replace(job_id, "%j")  # the text form expands %j
    return job


def test_a_held_job_keeps_a_name_and_workdir_with_spaces_quotes_and_hashes(tmp_path):
    workdir = tmp_path / 'my project #1 "x" \\ it\'s'
    workdir.mkdir()
    name = 'train "big" \\ #2\tü a --exclusive --gpus-per-task=1'
    plan = plan_for({"name": name, "launcher": "none", "gpus_per_node": 1, "command": ["true"],
                     "workdir": str(workdir), "output": "out #%j.log", "time": "00:01:00",
                     "cpus_per_gpu": 1, "mem_per_gpu": "100M"})
    run = subprocess.run(["sbatch", "--hold", "--parsable"], input=render(plan), capture_output=True, text=True,
                         cwd=tmp_path, timeout=30)
    assert run.returncode == 0, run.stderr
    job_id = run.stdout.strip().split(";")[0]
    try:
        job = held_job(job_id)
        assert job["JobName"] == name
        assert job["WorkDir"] == str(workdir)
        assert job["StdOut"] == str(workdir / "out #%j.log")
        # the options inside the name were not read as options: not exclusive (OverSubscribe=NO would be), and no
        # per-task GPUs (a TresPerTask with gpu)
        assert job["OverSubscribe"] == "OK" and "gpu" not in job.get("TresPerTask", "")
    finally:
        subprocess.run(["scancel", job_id], check=False, timeout=30)


def test_a_sweep_parameter_in_an_env_value_is_each_tasks_value(tmp_path):
    from tests.integration.jobs import SPEC, render_and_sbatch, wait

    spec = SPEC.format(name="envsweep", cmd="echo -n $RUN_TAG > tag-$SLURM_ARRAY_TASK_ID")
    spec += 'env: {RUN_TAG: "run-{p}"}\narray: {grid: {p: [a, "b c"]}}\n'
    job_id = render_and_sbatch(spec, tmp_path)
    assert wait(job_id) == "COMPLETED"
    assert [(tmp_path / f"tag-{i}").read_text() for i in range(2)] == ["run-a", "run-b c"]
