"""Run the backend contract against the devcluster as whoever runs this script; print what was seen as JSON.

Usage: python backend_probe.py BACKEND WORKDIR [FOREIGN_JOB_ID]. Used by test_backend_contract_on_devcluster.py,
as root and (through runuser) as alice, so it imports only slurmkit and the standard library.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

from slurmkit import inputs
from slurmkit.backends import get_backend
from slurmkit.backends.base import JobQuery
from slurmkit.cli.actions import _plan
from slurmkit.inputs import read_spec
from slurmkit.render import build_request, render
from slurmkit.submission import submit

REPO = Path(__file__).resolve().parents[2]
SITE = str(REPO / "site_config" / "devcluster.yaml")
BASE = """launcher: none
gpus_per_node: 1
cpus_per_gpu: 1
mem_per_gpu: 100M
time: "00:02:00"
"""


def request(workdir: Path, name: str, body: str):
    spec = workdir / f"{name}.yaml"
    spec.write_text(f"name: {name}\n{BASE}{body}")
    plan = _plan(read_spec(str(spec), [f"workdir={workdir}"]), SITE)
    return build_request(plan, render(plan))


def until_ended(be, job_id: str, timeout: float = 120) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks = be.job(job_id)
        if tasks and all(t.terminal for t in tasks):
            return tasks
        time.sleep(0.5)
    raise TimeoutError(f"job {job_id}: {[(t.job_id, t.state) for t in be.job(job_id)]}")


def main(backend: str, workdir: Path, foreign: str | None) -> dict:
    be = get_backend(backend, inputs.load_site(SITE))
    suffix = uuid.uuid4().hex[:6]
    arr = request(workdir, f"ct-arr-{suffix}", 'array:\n  tasks: [{code: 0}, {code: 3}, {code: 0}]\n'
                                               'command: [bash, -c, "echo task $SLURM_ARRAY_TASK_ID; exit {code}"]\n')
    long = request(workdir, f"ct-long-{suffix}", 'command: [bash, -c, "sleep 100"]\n')
    array_id = str(submit(be, arr).job_id)
    long_id = str(submit(be, long).job_id)
    seen: dict = {"array_id": array_id, "long_id": long_id, "backend": be.name}
    live = be.jobs(JobQuery(finished=False))
    seen["live_units"] = sorted({j.unit for j in live})
    seen["by_name"] = sorted(j.job_id for j in be.jobs(JobQuery(name=long.name, finished=False)))
    seen["find_by_tag"] = [be.find_by_tag(arr.tag), be.find_by_tag(long.tag), be.find_by_tag("no-such-" + suffix)]
    tasks = until_ended(be, array_id)
    seen["array"] = sorted((t.job_id, t.state, t.exit_code, t.array_task) for t in tasks)
    seen["array_stdout"] = {t.array_task: t.stdout for t in tasks}
    seen["mine_all"] = sorted({j.unit for j in be.jobs(JobQuery(since=int(time.time()) - 600))})
    ids = [long_id, "999999999", array_id] + ([foreign] if foreign else [])
    seen["cancel"] = [(r.job_id, r.outcome, r.ok) for r in be.cancel(ids)]
    seen["long_after"] = [t.state for t in until_ended(be, long_id)]
    seen["cancel_again"] = [(r.job_id, r.outcome) for r in be.cancel([long_id])]
    seen["limitations"] = list(be.limitations)
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)))
