"""Slurm's gres/gpuutil / gres/gpumem from sacct (slurmkit/accounting/slurm_gpuutil.py).

The parser runs on REAL published sacct output (tests/data/slurm/gpuutil/README.md names the source). The Slurm
>= 24.05.1 multi-GPU case (values summed over GPUs) is DOCUMENTATION-DERIVED input, labelled below: no such real
output was found. The devcluster's real Slurm 22.05 has no NVML, so it records no gres/gpuutil; the integration
test checks that the query is one real sacct accepts and that a job without the TRES gives no figures."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from slurmkit.accounting import slurm_gpuutil as sg

DATA = Path(__file__).parent / "data" / "slurm" / "gpuutil"


def _real_rows() -> list[dict[str, str]]:
    """The two real recordings of job 18194943 (-p, no header, one TRES field each) joined by JobID."""
    mx = sg.parse_rows((DATA / "sacct-pno-JobID-TRESUsageInMax-curc-18194943.txt").read_text(),
                       ("JobID", "TRESUsageInMax"))
    ave = sg.parse_rows((DATA / "sacct-pno-JobID-TRESUsageInAve-noconvert-curc-18194943.txt").read_text(),
                        ("JobID", "TRESUsageInAve"))
    by_id = {r["JobID"]: {**r, "AllocTRES": ""} for r in mx}
    for r in ave:
        by_id[r["JobID"]]["TRESUsageInAve"] = r["TRESUsageInAve"]
    return list(by_id.values())


def test_real_output_parses_with_trailing_bar():
    rows = _real_rows()
    assert [r["JobID"] for r in rows] == ["18194943", "18194943.batch", "18194943.extern"]
    assert rows[0]["TRESUsageInMax"] == "" and rows[0]["TRESUsageInAve"] == ""


def test_real_converted_and_raw_gpumem_agree():
    batch = _real_rows()[1]
    assert sg.tres_value(batch["TRESUsageInMax"], "gres/gpumem") == 38888 * 2**20  # "38888M"
    assert sg.tres_value(batch["TRESUsageInAve"], "gres/gpumem") == 40777023488  # --noconvert: bytes
    assert sg.tres_value(batch["TRESUsageInMax"], "gres/gpuutil") == 100
    assert sg.tres_value(batch["TRESUsageInMax"], "gres/gpu") is None  # absent, and not a prefix match


def test_real_job_figures_are_flagged_last_poll_and_skip_extern():
    one_gpu = sg.job_usage(_real_rows(), summed_over_gpus=True, gpus=1)
    assert one_gpu == {"util_last_poll": 100.0, "util_max": 100.0, "mem_max_mib": 38888, "gpus": 1, "steps": 1,
                       "source": "slurm", "flags": "last-poll-not-average"}
    unknown = sg.job_usage(_real_rows(), summed_over_gpus=True)  # the page does not state the GPU count
    assert unknown["flags"] == "last-poll-not-average,gpu-count-unknown" and unknown["util_max"] == 100.0


# DOCUMENTATION-DERIVED, not recorded: Slurm >= 24.05.1 sums gres/gpuutil and gres/gpumem over a step's GPUs
# (four GPUs at ~99% read "396"); layout of `sacct -P -n --noconvert -o JobID,TRESUsageInAve,TRESUsageInMax,
# AllocTRES` as in the real recordings above. Numbers invented for the test.
DOC_4GPU = (
    "77|||billing=16,cpu=16,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1\n"
    "77.batch|cpu=00:00:01,gres/gpumem=0,gres/gpuutil=0|cpu=00:00:01,gres/gpumem=0,gres/gpuutil=0|"
    "cpu=16,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1\n"
    "77.extern|cpu=00:00:00,gres/gpumem=0,gres/gpuutil=0|cpu=00:00:00,gres/gpumem=0,gres/gpuutil=0|"
    "billing=16,cpu=16,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1\n"
    "77.0|cpu=01:00:00,gres/gpumem=171798691840,gres/gpuutil=396|cpu=01:00:00,gres/gpumem=171798691840,"
    "gres/gpuutil=400|cpu=16,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1\n"
)


def test_documented_summed_values_are_divided_by_the_step_gpus():
    rows = sg.parse_rows(DOC_4GPU)
    got = sg.job_usage(rows, summed_over_gpus=True)
    assert (got["util_last_poll"], got["util_max"], got["mem_max_mib"]) == (99.0, 100.0, 40960)
    assert (got["gpus"], got["steps"], got["flags"]) == (4, 2, "last-poll-not-average")
    older = sg.job_usage(rows, summed_over_gpus=False)  # before 24.05.1: as reported
    assert (older["util_last_poll"], older["util_max"]) == (396.0, 400.0)


def test_no_gpuutil_means_no_figures_not_zero():
    rows = sg.parse_rows("5|||cpu=1,gres/gpu=1\n5.batch|cpu=00:00:01,mem=4K|cpu=00:00:01,mem=4K|cpu=1,gres/gpu=1\n")
    assert sg.job_usage(rows, summed_over_gpus=True) is None


def test_infinite_values_are_unknown():
    # CU Boulder's documentation: unsupported GPUs show "zeros or infinite values".
    assert sg.tres_value("gres/gpuutil=inf,gres/gpumem=0", "gres/gpuutil") is None
    assert sg.tres_value("gres/gpuutil=inf,gres/gpumem=0", "gres/gpumem") == 0


def test_version_rule_and_errors():
    assert sg.sums_over_gpus("slurm 24.05.1") and sg.sums_over_gpus("slurm 25.11.0")
    assert not sg.sums_over_gpus("slurm 24.05.0") and not sg.sums_over_gpus("slurm-wlm 22.05.8")
    with pytest.raises(ValueError, match="cannot read a Slurm version"):
        sg.sums_over_gpus("sacct: command not found")
    with pytest.raises(ValueError, match="sacct line 2: 2 fields, expected 4"):
        sg.parse_rows("1|||\n1.batch|x\n")


@pytest.mark.integration
def test_real_sacct_accepts_the_query_and_22_05_has_no_gpuutil(devcluster):
    from tests.integration.accounting import sbatch, tag, wait_final

    job = sbatch("--gres=gpu:1", "-t", "1", "--wrap", "srun true", name=tag("gpuutil"))
    wait_final([job])
    raw = ""
    for _ in range(30):  # slurmdbd writes the steps shortly after the end
        raw = subprocess.run(sg.command(job), capture_output=True, text=True, check=True).stdout
        if ".0|" in raw:
            break
        time.sleep(1)
    rows = sg.parse_rows(raw)
    assert {r["JobID"] for r in rows} >= {str(job), f"{job}.batch", f"{job}.0"}
    assert "gres/gpu=1" in next(r["AllocTRES"] for r in rows if r["JobID"] == str(job))
    assert sg.fetch(job) is None  # Slurm 22.05 without NVML: no gres/gpuutil, so no figures
