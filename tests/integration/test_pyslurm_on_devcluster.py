"""The pyslurm backend with the real pyslurm 25.11 against the devcluster's real Slurm 25.11, as alice: the same
specs submitted through pyslurm and through cli give the same stored script, the same `scontrol show job`
fields (minus what must differ) and the same rank/GPU/NUMA output; a lost reply does not become a second job.

pyslurm 25.11 links against libslurm 25.11 only: on the 22.05 devcluster (CI's second pass) it cannot load, and
these tests skip, saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import as_user

pytestmark = pytest.mark.integration
PROBE = str(Path(__file__).with_name("pyslurm_vs_cli_probe.py"))
# Fields that must differ between two submissions, or that sbatch (not Slurm) fills in: sbatch records its command
# line and turns --cpus-per-task into TresPerTask=cpu=N, pyslurm 25.11.2 does neither; OOMKillStep is shown only for
# pyslurm's jobs (an unset field it sends as 0).
DIFFER = {"JobId", "ArrayJobId", "Comment", "--comment", "SubmitTime", "EligibleTime", "AccrueTime", "StartTime",
          "EndTime", "LastSchedEval", "RunTime", "BatchHost", "NodeList", "SchedNodeList", "SubmitLine",
          "TresPerTask", "OOMKillStep", "Command", "StdOut", "StdErr", "StdIn", "WorkDir", "Dependency",
          "Reason", "JobName", "Scheduler"}


def _skip_unless_pyslurm_matches() -> None:
    from slurmkit.backends.pyslurm import detect

    d = detect()
    if not d.usable:
        pytest.skip(f"pyslurm backend not usable on this devcluster ({d.reason}): pyslurm 25.11 is an optional "
                    "extra that supports Slurm 25.11 only")


@pytest.fixture(scope="module")
def seen(devcluster):
    _skip_unless_pyslurm_matches()
    work = Path(tempfile.mkdtemp(prefix="sk-pyslurm-", dir="/tmp"))
    os.chmod(work, 0o777)
    try:
        run = as_user("alice", [sys.executable, PROBE, str(work)], timeout=600)
        assert run.returncode == 0, run.stderr
        yield json.loads(run.stdout.splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _same_place(text: str, backend: str) -> str:
    return text.replace(f"/{backend}/", "/X/").replace(f"/{backend}\n", "/X\n")


@pytest.mark.parametrize("name", ["ranks", "sweep"])
def test_same_script_and_job_properties_as_cli(seen, name):
    cli, ps = seen[f"cli/{name}"], seen[f"pyslurm/{name}"]
    assert _same_place(ps["script"], "pyslurm") == _same_place(cli["script"], "cli")
    assert ps["script"] == ps["rendered"]  # Slurm stored exactly the rendered script
    assert (cli["found"], ps["found"]) == (int(cli["id"]), int(ps["id"]))  # find_by_tag on each
    assert len(ps["scontrol"]) == len(cli["scontrol"]) == (20 if name == "sweep" else 1)
    for a, b in zip(cli["scontrol"], ps["scontrol"], strict=True):
        diff = {k: (a.get(k), b.get(k)) for k in set(a) | set(b) if k not in DIFFER and a.get(k) != b.get(k)}
        assert diff == {}, diff
        assert b["Comment"] == f"sk:{ps['tag']}"
        assert b["WorkDir"].endswith("/pyslurm") and b["StdOut"].startswith(b["WorkDir"] + "/")
    first = ps["scontrol"][0]
    if name == "ranks":
        assert (first["NumNodes"], first["NumTasks"], first["Requeue"]) == ("2", "16", "1")
        assert first["OverSubscribe"] == "NO" and first["TresPerNode"] == "gres/gpu:a100:8"
    else:
        assert first["ArrayTaskThrottle"] == "5"


def test_same_rank_gpu_numa_output(seen):
    def ranks(backend):
        (text,) = [t for n, t in seen[f"{backend}/ranks"]["outputs"].items() if n.startswith("ranks-")]
        return sorted(line for line in text.splitlines() if line.startswith("RANK="))

    assert ranks("pyslurm") == ranks("cli")
    assert len(ranks("pyslurm")) == 16
    assert {re.search(r"HOST=(\S+)", r).group(1) for r in ranks("pyslurm")} == {"gpu01", "gpu02"}


def test_same_sweep_task_output(seen):
    def tasks(backend):
        outs = seen[f"{backend}/sweep"]["outputs"]
        # which physical GPU a one-GPU task gets is the scheduler's choice: compare everything else
        return sorted(re.sub(r" CVD=\S*", "", line) for n, t in outs.items() if n.startswith("sweep-")
                      for line in t.splitlines() if line.startswith("TASK="))

    assert tasks("pyslurm") == tasks("cli") and len(tasks("pyslurm")) == 20


def test_slurms_refusal_is_the_same(seen):
    cli, ps = seen["cli/constrained"], seen["pyslurm/constrained"]
    assert "Invalid feature specification" in cli["refused"] and "Invalid feature specification" in ps["refused"]
    assert cli["type"] == ps["type"]


def test_a_lost_reply_does_not_become_a_second_job(seen):
    lost = seen["lost"]
    assert lost["reused"] is True
    assert lost["created"] == [lost["result"]]  # submitted once; the retry found it by tag
    assert lost["tagged"] == [str(lost["result"])]
