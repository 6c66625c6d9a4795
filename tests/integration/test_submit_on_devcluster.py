"""`sk submit` against the real devcluster: ids, dependencies by spec name, tags for idempotent retries."""

from __future__ import annotations

import json
import subprocess
import uuid

import pytest

from slurmkit.backends.cli import CliBackend
from slurmkit.request import SubmitRequest
from slurmkit.submission import submit
from tests.integration.jobs import DEVSITE, SK, SPEC, wait

pytestmark = pytest.mark.integration



def test_submit_two_specs_with_dependency_by_name(tmp_path):
    (tmp_path / "a.yaml").write_text(SPEC.format(name="prep", cmd="sleep 2; date +%s.%N > prep.txt"))
    (tmp_path / "b.yaml").write_text(SPEC.format(name="train", cmd="date +%s.%N > train.txt")
                                     + "dependency: {afterok: [prep]}\n")
    run = subprocess.run([SK, "submit", "b.yaml", "a.yaml", "--site", DEVSITE, "--json"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    jobs = {j["name"]: j for j in json.loads(run.stdout)}
    dep = subprocess.run(["scontrol", "show", "job", str(jobs["train"]["job_id"])], capture_output=True,
                         text=True).stdout
    assert f"afterok:{jobs['prep']['job_id']}" in dep
    assert wait(jobs["train"]["job_id"]) == "COMPLETED"
    assert float((tmp_path / "train.txt").read_text()) > float((tmp_path / "prep.txt").read_text())


def test_tag_is_in_the_comment_and_a_retry_reuses_the_job(tmp_path):
    script = "#!/bin/bash\n#SBATCH --time=1\n#SBATCH --gpus-per-node=a100:1\n#SBATCH --mem=100M\nsleep 30\n"
    req = SubmitRequest(name="tagged", script=script, options={}, tag="test" + uuid.uuid4().hex[:12],
                        workdir=str(tmp_path))
    be = CliBackend()
    first = be.submit(req)
    try:
        assert be.find_by_tag(req.tag) == first.job_id
        # A retry of the same request (as after a timeout whose job was created anyway) finds the job.
        class Flaky(CliBackend):
            calls = 0

            def submit(self, request, *, test_only=False):
                self.calls += 1
                if self.calls == 1:
                    from slurmkit.errors import BackendUnavailable

                    raise BackendUnavailable("Socket timed out on send/recv operation")
                return super().submit(request, test_only=test_only)

        again = submit(Flaky(), req, wait_s=0)
        assert again.reused and again.job_id == first.job_id
    finally:
        be.cancel([first.job_id])


def test_test_only_asks_slurm_and_submits_nothing(tmp_path):
    (tmp_path / "a.yaml").write_text(SPEC.format(name="probe", cmd="true"))
    before = subprocess.run(["squeue", "-h", "-n", "probe"], capture_output=True, text=True).stdout
    run = subprocess.run([SK, "submit", "a.yaml", "--site", DEVSITE, "--test-only"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "to start at" in run.stdout and "gpu0" in run.stdout
    assert subprocess.run(["squeue", "-h", "-n", "probe"], capture_output=True, text=True).stdout == before


def test_invalid_account_is_a_clear_usage_error(tmp_path):
    (tmp_path / "a.yaml").write_text(SPEC.format(name="acct", cmd="true") + "account: nosuch\n")
    run = subprocess.run([SK, "submit", "a.yaml", "--site", DEVSITE], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 2 and "Invalid account" in run.stderr and "Traceback" not in run.stderr
