"""`sk admin exporter`: the node collector reads the running samplers' own files (a real sampler started by the
real prolog, simulated source), the store collector gives `sk report usage`'s figures. Parsed with
prometheus-client's own exposition parser. A real Prometheus server scrapes it in
tests/integration/test_exporter_prometheus.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurmkit import exporter
from slurmkit.accounting import hooks, sampler
from tests.report_store import H, scenario

SK = str(Path(sys.executable).parent / "sk")


@pytest.fixture(autouse=True)
def _no_sampler_outlives_its_test(tmp_path):
    yield
    for pid_file in tmp_path.glob("state/*/*/" + sampler.PID):
        if pid_file.read_text().split()[0] != str(os.getpid()) and sampler.alive(str(pid_file.parent)):
            sampler.stop(str(pid_file.parent), timeout_s=1)


def samples(text: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"SK_STATE_DIR": str(tmp_path / "state"), "SK_SPOOL": str(tmp_path / "spool"),
            "SK_SAMPLE_INTERVAL": "0.05", "SK_METRIC_SOURCE": "simulated", "SLURM_JOB_ID": "4242",
            "SLURMD_NODENAME": "gpu07", "SLURM_CLUSTER_NAME": "testc", "SLURM_JOB_GPUS": "1,6",
            "SLURM_JOB_RESTART_COUNT": "0", "SLURM_JOB_USER": "alice", "SLURM_JOB_ACCOUNT": "phys",
            "SLURM_JOB_PARTITION": "gpu", **extra}


def test_a_running_jobs_gpus_are_exported_with_its_labels_and_dropped_when_it_ends(tmp_path):
    env = _env(tmp_path)
    assert hooks.prolog(env) == 0
    d = tmp_path / "state" / "gpu07" / "testc-4242-0"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(sampler.read_state(str(d))[1]) < 3:
        time.sleep(0.02)
    collector = exporter.NodeCollector(str(tmp_path / "state"))
    got = samples(exporter.exposition([collector]))
    util = got["slurmkit_job_gpu_utilization_percent"]
    assert sorted(s.labels["gpu"] for s in util) == ["1", "6"]
    for s in util:
        assert s.labels | {"gpu": "-", "uuid": "-"} == {
            "cluster": "testc", "jobid": "4242", "run": "0", "user": "alice", "account": "phys", "partition": "gpu",
            "node": "gpu07", "gpu": "-", "uuid": "-", "source": "simulated"}
        assert s.labels["uuid"] == f"SIMULATED-gpu07-{s.labels['gpu']}" and 0 <= s.value <= 100
    # The value is the sampler's last reading for that GPU, as written in samples.jsonl.
    lines = [json.loads(x) for x in (d / sampler.SAMPLES).read_text().splitlines()]
    assert {s.value for s in util} <= {float(line["g"][i][0]) for line in lines for i in (0, 1)}
    assert len(got["slurmkit_job_gpu_info"]) == 2 and got["slurmkit_node_sampled_jobs"][0].value == 1
    assert {s.name for fam in got.values() for s in fam} >= {
        "slurmkit_job_gpu_memory_used_bytes", "slurmkit_job_gpu_power_watts", "slurmkit_job_gpu_idle_seconds_total",
        "slurmkit_job_gpu_last_sample_timestamp_seconds"}
    assert hooks.epilog(env) == 0
    got = samples(exporter.exposition([collector]))
    assert "slurmkit_job_gpu_utilization_percent" not in got and got["slurmkit_node_sampled_jobs"][0].value == 0


def _fake_live_run(tmp_path: Path, interval: float = 10.0) -> Path:
    """A run directory whose pid file names this test process: alive, with readings the test writes itself."""
    d = tmp_path / "state" / "n1" / "c-7-0"
    d.mkdir(parents=True)
    (d / sampler.PID).write_text(f"{os.getpid()} {sampler._proc_start(os.getpid())}\n")
    (d / sampler.META).write_text(json.dumps({
        "version": 1, "cluster": "c", "job_id": 7, "run": 0, "node": "n1", "source": "nvml", "interval_s": interval,
        "labels": {"user": "bob"}, "gpus": [{"index": 0, "uuid": "GPU-a", "mem_total_mib": 81920},
                                            {"index": 1, "uuid": "GPU-b", "mem_total_mib": 81920}]}))
    return d


def _append(d: Path, text: str) -> None:
    with open(d / sampler.SAMPLES, "a") as fh:
        fh.write(text)


def test_idle_seconds_follow_the_summarys_weighting_and_are_read_incrementally(tmp_path):
    d = _fake_live_run(tmp_path)
    # GPU 0: idle (2 %) at t=100 (first reading: one interval, 10 s), idle at 110 (10 s), busy at 130.
    # GPU 1: busy, then unreadable (None), then idle at 130 (30 s since its last reading at 100).
    _append(d, '{"t":100,"g":[[2,100,50,null],[90,2000,300,null]]}\n{"t":110,"g":[[2,100,50,null],null]}\n')
    collector = exporter.NodeCollector(str(tmp_path / "state"))

    def idle() -> dict[str, float]:
        got = samples(exporter.exposition([collector]))
        return {s.labels["gpu"]: s.value for s in got["slurmkit_job_gpu_idle_seconds_total"]}

    assert idle() == {"0": 20.0, "1": 0.0}
    _append(d, '{"t":130,"g":[[80,100,50,null],[1,2000,300,null]]}\n{"t":140,"g":[[3,1')  # the last line is torn
    assert idle() == {"0": 20.0, "1": 30.0}
    _append(d, '00,50,null],null]}\n')  # completed: read now, once
    assert idle() == {"0": 30.0, "1": 30.0}
    got = samples(exporter.exposition([collector]))
    mem = {s.labels["gpu"]: s.value for s in got["slurmkit_job_gpu_memory_used_bytes"]}
    assert mem == {"0": 100 * 2**20, "1": 2000 * 2**20}  # GPU 1: its last readable reading (t=130)
    assert {s.labels["user"] for s in got["slurmkit_job_gpu_info"]} == {"bob"}


def test_a_run_whose_sampler_is_gone_is_not_exported(tmp_path):
    d = _fake_live_run(tmp_path)
    _append(d, '{"t":100,"g":[[2,100,50,null],[90,2000,300,null]]}\n')
    (d / sampler.PID).write_text("999999999 1\n")  # a pid that does not run
    got = samples(exporter.exposition([exporter.NodeCollector(str(tmp_path / "state"))]))
    assert "slurmkit_job_gpu_info" not in got


def _store_figures(text: str) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if "account" in s.labels:
                out.setdefault((s.labels["account"], s.labels["partition"]), {})[s.name] = s.value
    return out


def test_store_counters_are_the_hand_computed_all_time_figures(tmp_path):
    store = scenario(tmp_path / "acct.db")
    store.execute("UPDATE jobs SET ingested_at = job_id * 1000")  # as `sk admin ingest` stamps them
    store.close()
    spool = tmp_path / "spool"
    spool.mkdir()
    for name in ("job-1.json", "gpus-2.json", ".tmp-3.json"):
        (spool / name).write_text("{}")
    text = exporter.exposition([exporter.StoreCollector(str(tmp_path / "acct.db"), None, str(spool))])
    fig = _store_figures(text)
    # All time: alice/phys jobs 1 (4 GPUs x 2 h), 2 (1 x 2 h) and 5 (8 x 1 h) = 18 GPU-h; bob/chem 3 (2 x 3 h) and
    # 4 (two runs, 1 x 1 h + 1 x 2 h) = 9 GPU-h.
    assert fig[("phys", "gpu")]["slurmkit_gpu_hours_allocated_total"] == pytest.approx(18.0)
    assert fig[("chem", "gpu")]["slurmkit_gpu_hours_allocated_total"] == pytest.approx(9.0)
    assert fig[("phys", "gpu")]["slurmkit_jobs_total"] == 3 and fig[("chem", "gpu")]["slurmkit_jobs_total"] == 3
    # used: job 1 (0.8 + 0.8) x 2 h + job 2 0.5 x 2 h = 4.2; bob's measured runs at 100 %: 3 h.
    assert fig[("phys", "gpu")]["slurmkit_gpu_hours_used_total"] == pytest.approx(4.2)
    assert fig[("chem", "gpu")]["slurmkit_gpu_hours_used_total"] == pytest.approx(3.0)
    got = samples(text)
    assert got["slurmkit_store_up"][0].value == 1
    assert got["slurmkit_spool_backlog_records"][0].value == 2  # the temporary dot file is not a record
    assert got["slurmkit_store_last_ingest_timestamp_seconds"][0].value == 5000


def test_store_counters_equal_sk_report_usage_for_the_same_window(tmp_path):
    store = scenario(tmp_path / "acct.db")
    store.close()
    text = exporter.exposition([exporter.StoreCollector(str(tmp_path / "acct.db"), None, None)])
    res = subprocess.run([SK, "report", "usage", "--db", str(tmp_path / "acct.db"), "--since", "1970-01-01",
                          "--until", "now", "--tz", "UTC", "--by", "account,partition", "--format", "json"],
                         capture_output=True, text=True, check=True)
    rows = json.loads(res.stdout)["rows"]
    fig = _store_figures(text)
    assert len(rows) == len(fig)
    for row in rows:
        got = fig[(row["account"], row["partition"])]
        compared = [(s, c) for s, c, _ in exporter.STORE_SERIES if row.get(c) is not None]
        assert {c for _, c in compared} >= {"jobs", "gpu_hours", "gpu_hours_used", "gpu_hours_wasted"}
        for suffix, column in compared:
            assert got[f"slurmkit_{suffix}_total"] == pytest.approx(row[column]), (suffix, row)


def test_a_store_that_cannot_be_read_is_store_up_0_not_a_failed_scrape(tmp_path):
    text = exporter.exposition([exporter.StoreCollector(str(tmp_path / "missing.db"), None, None)])
    assert samples(text)["slurmkit_store_up"][0].value == 0


def test_the_store_is_read_at_most_every_refresh_seconds(tmp_path):
    store = scenario(tmp_path / "acct.db")
    collector = exporter.StoreCollector(str(tmp_path / "acct.db"), None, None, refresh_s=3600)
    before = _store_figures(exporter.exposition([collector]))
    store.execute("DELETE FROM jobs WHERE account = 'chem'")
    store.close()
    assert _store_figures(exporter.exposition([collector])) == before
    fresh = _store_figures(exporter.exposition([exporter.StoreCollector(str(tmp_path / "acct.db"), None, None)]))
    assert ("chem", "gpu") not in fresh and H > 0


@pytest.mark.parametrize(("args", "fragment"), [
    ([], "Missing argument"),
    (["nodes"], "'nodes' is not one of"),
    (["node", "--state-dir", "/tmp", "--listen", "host:99999"], "--listen"),
])
def test_usage_errors_exit_2(args, fragment):
    res = subprocess.run([SK, "admin", "exporter", *args], capture_output=True, text=True)
    assert res.returncode == 2 and fragment in res.stderr and "Traceback" not in res.stderr, res.stderr
