"""The DCGM source: the parser against REAL recorded `dcgmi stats -v -j` output (tests/data/dcgm/README.md names
the source), multi-GPU input built from DCGM's documented layout (labelled so), and the prolog/epilog flow with a
FAKE `dcgmi` executable on PATH: no GPU or DCGM host engine exists where this project is tested. The fake replays
the recorded output and logs its arguments, so the tests check the commands slurmkit sends, not DCGM itself."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from slurmkit.accounting import hooks, sampler
from slurmkit.accounting.metrics import SourceUnavailable, dcgm, open_source
from tests.test_sampler import _env as sampler_env
from tests.test_sampler import _no_sampler_outlives_its_test, _spooled  # noqa: F401 (autouse fixture)

DATA = Path(__file__).parent / "data" / "dcgm"
REAL_V_J = (DATA / "stats-v-j-uber-prof-job232.txt").read_text()
REAL_X = (DATA / "stats-x-uber-prof-job232.txt").read_text()


# ------------------------------------------------------------------ parser: real recorded output


def test_real_verbose_output_parses_per_gpu():
    [g] = dcgm.parse_job_stats(REAL_V_J)
    assert g["gpu_id"] == 0
    assert (g["exec_s"], g["processes"], g["energy_j"]) == (47.57, 1, 0)
    assert (g["power_avg_w"], g["power_max_w"]) == (37.8985, 45.874)
    assert g["mem_max_bytes"] == 2628780032
    assert (g["sm_util_avg"], g["sm_util_max"], g["mem_util_avg"], g["mem_util_max"]) == (0, 0, 0, 0)
    assert (g["xid_errors"], g["ecc_dbe"], g["health"]) == (0, 0, "Healthy")
    assert g["start"] == "Fri Dec 10 19:40:36 2021"


def test_real_zero_energy_falls_back_to_power_times_time_flagged():
    # The recorded job drew 37.9 W on average for 47.57 s, yet DCGM printed 0 J.
    summary, flags = dcgm.summarize(dcgm.parse_job_stats(REAL_V_J)[0])
    assert summary["energy_j"] == round(37.8985 * 47.57, 3)
    assert flags == ["energy-from-power"]
    assert summary["mem_max_mib"] == round(2628780032 / 2**20)  # 2507
    assert (summary["util_mean"], summary["util_max"], summary["power_max_w"]) == (0, 0, 45.874)
    assert summary["idle_fraction"] is None and summary["samples"] is None  # DCGM says neither: unknown, not 0


# ------------------------------------------------------------------ parser: documentation-derived input

# DOCUMENTATION-DERIVED, not recorded: no multi-GPU `dcgmi stats -v -j` output was found in public material. Built
# from DCGM's ProcessStats::ViewJobStats layout (one "GPU ID: N" block per GPU; "XID (Hr:Min:Sec since start)"
# followed by continuation rows with an empty name; '*' after a name as in NVIDIA/DCGM issue #268; N/A for
# unsupported values). The numbers are invented for the test.
DOC_TWO_GPUS = """Successfully retrieved statistics for job: sk-c-7-0.
+------------------------------------------------------------------------------+
| GPU ID: 2                                                                    |
+====================================+=========================================+
|-----  Execution Stats  ------------+-----------------------------------------|
| Total Execution Time (sec)         | 100.0                                   |
+-----  Performance Stats  ----------+-----------------------------------------+
| Energy Consumed (Joules)           | 25000                                   |
| Power Usage (Watts)                | Avg: 250, Max: 300.5, Min: 60           |
| Max GPU Memory Used (bytes)    *   | 1073741824                              |
| SM Utilization (%)                 | Avg: 81, Max: 100, Min: 0               |
| Memory Utilization (%)             | Avg: 30, Max: 55, Min: 0                |
+-----  Event Stats  ----------------+-----------------------------------------+
| Critical XID Errors                | 2                                       |
| XID (Hr:Min:Sec since start)       | 0:00:12                                 |
|                                    | 0:01:05                                 |
+------------------------------------------------------------------------------+
| GPU ID: 5                                                                    |
+====================================+=========================================+
| Total Execution Time (sec)         | 100.0                                   |
| Energy Consumed (Joules)           | 9223372036854775792                     |
| Power Usage (Watts)                | Avg: N/A, Max: N/A, Min: N/A            |
| Max GPU Memory Used (bytes)        | 3221225472                              |
| SM Utilization (%)                 | Avg: 5, Max: 9, Min: 0                  |
| Critical XID Errors                | 0                                       |
+------------------------------------------------------------------------------+
"""


def test_documented_multi_gpu_blocks_blanks_and_xids():
    a, b = dcgm.parse_job_stats(DOC_TWO_GPUS)
    assert (a["gpu_id"], a["sm_util_avg"], a["sm_util_max"], a["energy_j"]) == (2, 81, 100, 25000)
    assert a["mem_max_bytes"] == 1073741824  # the '*' marker is not part of the name
    assert a["xid_errors"] == 2
    assert (b["gpu_id"], b["energy_j"], b["power_avg_w"]) == (5, None, None)  # INT64 blank and N/A: unknown
    assert b["mem_max_bytes"] == 3221225472  # above 2^31: a real value, not mistaken for the INT32 blank
    sb, fb = dcgm.summarize(b)
    assert sb["energy_j"] is None and fb == []  # no power either: nothing to fall back on, no number invented
    assert dcgm.summarize(a)[1] == ["xid-errors"]


def test_non_verbose_or_error_output_is_refused_with_the_reason():
    summary = "Successfully retrieved statistics for job: 9. \n+---+\n| Summary                      |\n+===+\n"
    with pytest.raises(ValueError, match="line 3: non-verbose 'Summary'"):
        dcgm.parse_job_stats(summary)
    with pytest.raises(ValueError, match="no 'GPU ID:' block"):
        dcgm.parse_job_stats("Error: Unable to retrieve job statistics. Return: No data is available.\n")


# ------------------------------------------------------------------ prolog/epilog with a FAKE dcgmi


def _fake_dcgmi(bin_dir: Path, log: Path, *, stats_v_j: str = REAL_V_J, fail: str | None = None) -> None:
    """A FAKE dcgmi (shell script): logs its arguments, prints the recorded real output for `stats -x` and
    `stats -v -j`, and DCGM's documented group-creation line. `fail`: an argument string for which it prints
    DCGM's host-engine-down error and exits 255 (as dcgmi does when it cannot connect)."""
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "v_j.txt").write_text(stats_v_j)
    (bin_dir / "x.txt").write_text(REAL_X)
    script = f"""#!/bin/sh
echo "$*" >> {log}
case "$*" in
  "{fail}") echo "Error: unable to establish a connection to the specified host: localhost"; exit 255 ;;
  "group -c "*) echo "Successfully created group \\"$3\\" with a group ID of 7" ;;
  "stats -x "*) cat {bin_dir}/x.txt ;;
  "stats -v -j "*) cat {bin_dir}/v_j.txt ;;
  *) echo "ok" ;;
esac
"""
    exe = bin_dir / "dcgmi"
    exe.write_text(script)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**sampler_env(tmp_path, SK_METRIC_SOURCE="dcgm", SLURM_JOB_GPUS="0"), **extra}


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def _wait_meta(d: Path) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        meta, _, err = sampler.read_state(str(d))
        if meta or err:
            return meta or {"error": err}
        time.sleep(0.02)
    raise AssertionError("the sampler wrote neither meta.json nor sampler.err")


def test_fake_dcgmi_prolog_starts_the_recording_and_epilog_reports_it(tmp_path, fake_path):
    log = tmp_path / "dcgmi.log"
    _fake_dcgmi(fake_path, log)
    env = _env(tmp_path)
    assert hooks.prolog(env) == 0
    d = tmp_path / "state" / "gpu07" / "testc-4242-0"
    meta = _wait_meta(d)
    # No NVML here (no driver): Slurm's index is DCGM's GPU ID, and the record will say it is unverified.
    assert meta["source"] == "dcgm" and meta["recording"] == {"dcgm_job": "sk-testc-4242-0", "dcgm_group": 7,
                                                              "dcgm_gpu_ids": [0], "identity_verified": False}
    assert not (d / sampler.SAMPLES).exists()  # DCGM records; the sampler takes no readings
    assert log.read_text().splitlines() == ["group -c sk-testc-4242-0", "group -g 7 -a 0", "stats -g 7 -e",
                                            "stats -g 7 -s sk-testc-4242-0"]
    assert hooks.epilog(env) == 0
    assert log.read_text().splitlines()[4:] == ["stats -x sk-testc-4242-0", "stats -v -j sk-testc-4242-0",
                                                "stats -r sk-testc-4242-0", "group -d 7"]
    [rec] = _spooled(tmp_path)
    assert rec["source"] == "dcgm" and rec["node"] == "gpu07" and rec["note"] is None
    assert rec["flags"] == "gpu-identity-unverified,energy-from-power"
    [g] = rec["gpus"]
    assert (g["index"], g["uuid"], g["util_mean"], g["util_max"], g["mem_max_mib"], g["power_max_w"]) == (
        0, None, 0, 0, 2507, 45.874)
    assert g["energy_j"] == round(37.8985 * 47.57, 3) and g["samples"] is None
    assert not d.exists()


def test_fake_dcgmi_missing_gpu_in_the_stats_gives_the_flagged_record(tmp_path, fake_path):
    _fake_dcgmi(fake_path, tmp_path / "dcgmi.log")
    env = _env(tmp_path, SLURM_JOB_GPUS="0,3")  # the recording only has GPU ID 0
    hooks.prolog(env)
    _wait_meta(tmp_path / "state" / "gpu07" / "testc-4242-0")
    hooks.epilog(env)
    [rec] = _spooled(tmp_path)
    assert rec["flags"] == "source-unavailable" and "no statistics for GPU ID 3" in rec["note"]
    assert [(g["index"], g["util_mean"], g["energy_j"]) for g in rec["gpus"]] == [(0, None, None), (3, None, None)]


def test_host_engine_down_at_the_epilog_gives_no_numbers(tmp_path, fake_path):
    _fake_dcgmi(fake_path, tmp_path / "dcgmi.log", fail="stats -x sk-testc-4242-0")
    env = _env(tmp_path)
    hooks.prolog(env)
    _wait_meta(tmp_path / "state" / "gpu07" / "testc-4242-0")
    hooks.epilog(env)
    [rec] = _spooled(tmp_path)
    assert rec["flags"] == "source-unavailable"
    assert "unable to establish a connection" in rec["note"]
    assert [g["util_mean"] for g in rec["gpus"]] == [None]


def test_host_engine_down_at_the_prolog_is_recorded_as_unavailable(tmp_path, fake_path):
    log = tmp_path / "dcgmi.log"
    _fake_dcgmi(fake_path, log, fail="stats -g 7 -e")
    env = _env(tmp_path)
    hooks.prolog(env)
    d = tmp_path / "state" / "gpu07" / "testc-4242-0"
    assert "error" in _wait_meta(d)
    assert log.read_text().splitlines()[-1] == "group -d 7"  # the half-made group is removed again
    hooks.epilog(env)
    [rec] = _spooled(tmp_path)
    assert rec["flags"] == "source-unavailable,no-samples" and "stats -g 7 -e failed" in rec["note"]


def test_without_dcgmi_the_source_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dcgmi anywhere
    src = open_source("dcgm", key="c/1/0", node="n", interval_s=1.0)
    with pytest.raises(SourceUnavailable, match="dcgmi is not on PATH"):
        src.open([0])


def test_gpu_map_without_nvml_is_refused_rather_than_guessed(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    src = open_source("dcgm", key="c/1/0", node="n", interval_s=1.0, gpu_map={0: "GPU-aaaa"})
    with pytest.raises(SourceUnavailable, match="SK_GPU_MAP is set but NVML cannot resolve it"):
        src.open([0])


def test_with_nvml_slurm_index_becomes_the_nvml_index_and_the_record_has_uuids(tmp_path, fake_path):
    # FAKE pynvml (tests/test_metrics_nvml.py) + FAKE dcgmi. NVML order differs from Slurm's (device minors):
    # Slurm 0 = minor 0 = NVML index 1, Slurm 3 = minor 3 = NVML index 2; DCGM must be asked for GPU IDs 1,2.
    from tests.test_metrics_nvml import GPUS, fake_pynvml, fresh

    log = tmp_path / "dcgmi.log"
    stats = DOC_TWO_GPUS.replace("GPU ID: 2 ", "GPU ID: 1 ").replace("GPU ID: 5 ", "GPU ID: 2 ")
    _fake_dcgmi(fake_path, log, stats_v_j=stats)
    fakes = fresh()
    nv = fake_pynvml(fakes)
    nv.nvmlDeviceGetIndex = lambda h: fakes.index(h[1])  # type: ignore[attr-defined]
    src = dcgm.DcgmSource(key="c/9/0", nvml=nv)
    gpus = src.open([0, 3])
    assert [g.uuid for g in gpus] == [GPUS[1].uuid, GPUS[2].uuid]
    assert "group -g 7 -a 1,2" in log.read_text().splitlines()
    meta = {"source": "dcgm", "recording": src.recording(), "gpus": [g.as_dict() for g in gpus]}
    got, flags, note = dcgm.finish(meta)
    assert [(g["index"], g["uuid"], g["util_mean"]) for g in got] == [(0, GPUS[1].uuid, 81), (3, GPUS[2].uuid, 5)]
    assert flags == ["xid-errors"] and note == "GPU 0: 2 critical XID error(s)"  # no gpu-identity-unverified


def test_dcgm_job_id_is_per_run_and_fits_dcgm():
    assert dcgm.dcgm_job_id("c/4242/1") == "sk-c-4242-1"
    assert len(dcgm.dcgm_job_id("x" * 100 + "/1/0")) == 64
