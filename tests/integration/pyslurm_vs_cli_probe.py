"""Submit the same specs through the cli and the pyslurm backend as whoever runs this; print what Slurm made of
each as JSON: `scontrol show job -o` fields, the stored batch script, the jobs' output files.

Usage: python pyslurm_vs_cli_probe.py WORKDIR. Used by test_pyslurm_on_devcluster.py (through runuser, as alice).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from slurmkit import inputs
from slurmkit.backends import get_backend
from slurmkit.cli.actions import _plan
from slurmkit.errors import SlurmkitError
from slurmkit.inputs import read_spec
from slurmkit.render import build_request, render
from slurmkit.submission import submit

REPO = Path(__file__).resolve().parents[2]
SITE = str(REPO / "site_config" / "devcluster.yaml")
PRINT = ('echo "RANK=$RANK LOCAL_RANK=$LOCAL_RANK WORLD_SIZE=$WORLD_SIZE GPU=$SK_GPU NUMA=$SK_NUMA CPUS=$SK_CPUS '
         'HCA=$SK_HCA HOST=$SLURMD_NODENAME CVD=${CUDA_VISIBLE_DEVICES:-unset}" | sort')
SPECS = {
    # Every option the planner emits for a multi-node job: nodes, tasks per node, GPUs per node with type, CPUs,
    # memory, time, exclusive, --signal=B:..., requeue, open-mode, output path, comment tag, dependency.
    "ranks": f"""launcher: srun
nodes: 2
gpus_per_node: 8
cpus_per_gpu: 1
mem_per_gpu: 1G
time: "00:03:00"
exclusive: true
preempt: {{signal: USR1, grace: 60, requeue: true, max_restarts: 1}}
dependency: {{afterany: [DEP]}}
command: [bash, -c, '{PRINT}']
""",
    # A 20-task sweep with a throttle (--array=0-19%5).
    "sweep": """launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
array: {grid: {lr: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], seed: [0, 1]}, max_parallel: 5}
command: [bash, -c, 'echo "TASK=$SLURM_ARRAY_TASK_ID LR=$1 SEED=$2 CVD=$CUDA_VISIBLE_DEVICES"',
          sk, "{lr}", "{seed}"]
""",
    # A constraint no node has: both backends must pass it, so Slurm refuses both the same way.
    "constrained": """launcher: none
gpus_per_node: 1
time: "00:01:00"
sbatch_extra: {constraint: no-such-feature}
command: [hostname]
""",
}


def request(workdir: Path, name: str, body: str, dep: str):
    spec = workdir / f"{name}.yaml"
    spec.write_text(f"name: {name}\n{body.replace('DEP', dep)}")
    plan = _plan(read_spec(str(spec), [f"workdir={workdir}"]), SITE)
    return build_request(plan, render(plan))


def scontrol(job_id: str) -> list[dict[str, str]]:
    """`scontrol show job -o` records (one per array task), as key=value dicts (values may hold spaces only
    in the last fields; good enough for comparison: both backends' records split the same way)."""
    out = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True).stdout
    records = []
    for line in out.splitlines():
        rec = {}
        for tok in line.split(" "):
            k, sep, v = tok.partition("=")
            if sep:
                rec[k] = v
        records.append(rec)
    return records


def ended(job_id: str, timeout: float = 240) -> list[dict[str, str]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recs = scontrol(job_id)
        if recs and all(r.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") for r in recs):
            return recs
        time.sleep(1)
    raise TimeoutError(job_id)


def lost_reply(workdir: Path, site) -> dict:
    """The real pyslurm backend, its first reply lost after slurmctld created the job (the fault is injected
    after the real submit): submission.submit must find the job by its tag instead of creating a second."""
    from slurmkit.backends.pyslurm import PyslurmBackend
    from slurmkit.errors import BackendUnavailable

    created: list[int] = []

    class LosesFirstReply(PyslurmBackend):
        def submit(self, request, *, test_only=False):
            result = super().submit(request, test_only=test_only)
            created.append(result.job_id)
            if len(created) == 1:
                raise BackendUnavailable("reply lost (injected after the job was created)")
            return result

    (workdir / "lost").mkdir()
    req = request(workdir / "lost", "lost", SPECS["sweep"].replace("max_parallel: 5", "max_parallel: 1"), "")
    result = submit(LosesFirstReply(), req, wait_s=0.1)
    out = subprocess.run(["squeue", "-h", "-o", "%i %k", "--me"], capture_output=True, text=True).stdout
    tagged = {line.split()[0].split("_")[0] for line in out.splitlines() if line.endswith(f"sk:{req.tag}")}
    subprocess.run(["scancel", str(result.job_id)], check=False)
    return {"result": result.job_id, "reused": result.reused, "created": created, "tagged": sorted(tagged)}


def main(workdir: Path) -> dict:
    site = inputs.load_site(SITE)
    dep = subprocess.run(["sbatch", "--parsable", "-J", "pv-dep", "--time=1", "--mem=10M", "-o", "/dev/null",
                          "--wrap=true"], capture_output=True, text=True, check=True, cwd=workdir).stdout.strip()
    seen: dict = {}
    for backend in sys.argv[2:] or ("cli", "pyslurm"):
        be = get_backend(backend, site)
        out = workdir / backend
        out.mkdir()
        for name, body in SPECS.items():
            req = request(out, name, body, dep)
            key = f"{backend}/{name}"
            try:
                job_id = str(submit(be, req).job_id)
            except SlurmkitError as exc:
                seen[key] = {"refused": exc.message if hasattr(exc, "message") else str(exc),
                             "type": type(exc).__name__}
                continue
            script = subprocess.run(["scontrol", "write", "batch_script", job_id, "-"], capture_output=True,
                                    text=True).stdout
            seen[key] = {"id": job_id, "tag": req.tag, "script": script, "rendered": req.script,
                         "found": be.find_by_tag(req.tag)}
    seen["lost"] = lost_reply(workdir, site)
    for key, v in seen.items():
        if isinstance(v, dict) and "id" in v and "/" in key:
            v["scontrol"] = ended(v["id"])
            v["outputs"] = {p.name: p.read_text() for p in sorted((workdir / key.split("/")[0]).glob("*.out"))}
    return seen


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
