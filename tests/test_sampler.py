"""Node side of GPU accounting without Slurm: summaries (hand-computed), the detached sampler's life and death,
the epilog's flagged records, delivery, the simulated source and the AdminComment encoding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from slurmkit import record
from slurmkit.accounting import admin_comment, gpusummary, hooks, sampler, transport
from slurmkit.accounting.metrics import SourceUnavailable
from slurmkit.accounting.metrics.simulated import SimulatedSource, gpu_seed, profile_of, read_trace
from slurmkit.record import IDLE_UTIL_PCT

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _no_sampler_outlives_its_test(tmp_path):
    yield
    for pid_file in tmp_path.glob("state/*/*/" + sampler.PID):
        if sampler.alive(str(pid_file.parent)):
            sampler.stop(str(pid_file.parent), timeout_s=1)

# ------------------------------------------------------------------ summaries (hand-computed)


def test_summary_is_time_weighted():
    # interval 2 s; readings at 100, 102, 104 and a final one at 105 (the epilog's): weights 2, 2, 2, 1.
    pts = [(100.0, [0.0, 100.0, 50.0, 1_000_000]), (102.0, [50.0, 300.0, 150.0, 1_400_000]),
           (104.0, [100.0, 200.0, 250.0, 1_900_000]), (105.0, [10.0, 100.0, 100.0, 2_000_000])]
    s = gpusummary.summarize_gpu(pts, interval_s=2.0, idle_pct=5.0)
    assert s["util_mean"] == round((0 * 2 + 50 * 2 + 100 * 2 + 10 * 1) / 7, 3)  # 44.286
    assert s["util_max"] == 100.0
    assert s["idle_fraction"] == round(2 / 7, 4)  # only the first reading (2 s of 7) is below 5 %
    assert s["mem_max_mib"] == 300
    assert s["power_max_w"] == 250.0
    assert s["energy_j"] == 1000.0  # counter: (2,000,000 - 1,000,000) mJ
    assert s["samples"] == 4


def test_energy_falls_back_to_power_when_the_counter_resets():
    pts = [(0.0, [90.0, 1.0, 100.0, 5_000_000]), (1.0, [90.0, 1.0, 200.0, None]), (3.0, [90.0, 1.0, 300.0, 1_000])]
    s = gpusummary.summarize_gpu(pts, interval_s=1.0)
    assert s["energy_j"] == 150.0 * 1 + 250.0 * 2  # trapezoids: 650 J


def test_summary_without_utilization_is_unknown_not_zero():
    s = gpusummary.summarize_gpu([(0.0, [None, 10.0, None, None])], interval_s=1.0)
    assert s["util_mean"] is None and s["idle_fraction"] is None and s["energy_j"] is None
    assert s["samples"] == 1 and s["mem_max_mib"] == 10


def test_summary_skips_unreadable_gpu_in_a_tick():
    meta = {"interval_s": 1.0, "gpus": [{"index": 0}, {"index": 5}]}
    lines = [{"t": 0, "g": [[10, 1, 1, None], None]}, {"t": 1, "g": [[30, 1, 1, None], [100, 1, 1, None]]}]
    a, b = gpusummary.summarize(meta, lines)
    assert (a["index"], a["samples"], a["util_mean"]) == (0, 2, 20.0)
    assert (b["index"], b["samples"], b["util_mean"]) == (5, 1, 100.0)


def test_idle_threshold_is_the_reports_and_is_stated_in_the_record():
    rec = gpusummary.node_record(cluster="c", job_id=1, run=0, node="n", source="simulated", interval_s=1,
                                 gpus=[], flags=[])
    assert rec["idle_threshold_pct"] == IDLE_UTIL_PCT


def test_read_state_skips_a_torn_last_line(tmp_path):
    (tmp_path / sampler.SAMPLES).write_text('{"t":1,"g":[[1,2,3,4]]}\n{"t":2,"g":[[5,6,7,8]]}\n{"t":3,"g":[[9,')
    _, lines, _ = sampler.read_state(str(tmp_path))
    assert [ln["t"] for ln in lines] == [1, 2]


# ------------------------------------------------------------------ environment


def test_gpu_list_forms():
    assert sampler.parse_gpu_list("4,0,1") == [0, 1, 4]
    assert sampler.parse_gpu_list("0-2,6") == [0, 1, 2, 6]
    assert sampler.parse_gpu_list("") == []
    with pytest.raises(ValueError, match="SLURM_JOB_GPUS"):
        sampler.parse_gpu_list("/dev/nvidia0")


def test_a_gpu_range_past_the_record_bound_is_refused_before_it_is_expanded():
    assert sampler.parse_gpu_list(f"0,{record.MAX_GPUS - 1}") == [0, record.MAX_GPUS - 1]
    for bad in ("0-99999999", f"{record.MAX_GPUS}", "5-2", "1,99999999999999999999"):
        with pytest.raises(ValueError, match=r"SLURM_JOB_GPUS=.*within 0-4095"):
            sampler.parse_gpu_list(bad)


@pytest.mark.parametrize("var, value", [("SLURMD_NODENAME", ".."), ("SLURMD_NODENAME", "."),
                                        ("SLURMD_NODENAME", "a/b"), ("SLURMD_NODENAME", "-x"),
                                        ("SLURMD_NODENAME", "gpu\n01"), ("SLURMD_NODENAME", "x" * 129),
                                        ("SLURM_CLUSTER_NAME", ".."), ("SLURM_CLUSTER_NAME", "../../etc"),
                                        ("SLURM_CLUSTER_NAME", "c\x00")])
def test_hooks_refuse_node_and_cluster_names_that_are_not_names_and_touch_nothing(tmp_path, var, value):
    """The hooks run as root and make paths of these: a name that could leave SK_STATE_DIR starts no sampler,
    writes nothing, and says why (exit 0: a hook failure would drain the node)."""
    env = _env(tmp_path, **{var: value})
    with pytest.raises(ValueError, match=var):
        sampler.JobRun.from_env(env)
    assert hooks.prolog(env) == 0 and hooks.epilog(env) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_job_run_needs_slurm_variables():
    with pytest.raises(ValueError, match="SLURM_JOB_ID"):
        sampler.JobRun.from_env({"SLURMD_NODENAME": "n"})
    with pytest.raises(ValueError, match="SLURMD_NODENAME"):
        sampler.JobRun.from_env({"SLURM_JOB_ID": "5", "SLURMD_NODENAME": "../x"})
    job = sampler.JobRun.from_env({"SLURM_JOB_ID": "5", "SLURMD_NODENAME": "gpu02", "SLURM_CLUSTER_NAME": "c",
                                   "SLURM_JOB_RESTART_COUNT": "2", "SLURM_JOB_GPUS": "3"})
    assert (job.key, job.node, job.gpus) == ("c/5/2", "gpu02", [3])


def test_bad_config_values_fall_back_and_are_reported():
    cfg = sampler.NodeConfig.from_env({"SK_SAMPLE_INTERVAL": "fast", "SK_TRANSPORT": "carrier-pigeon"})
    assert cfg.interval_s == sampler.DEFAULT_INTERVAL_S and cfg.transport == "spool"
    assert len(cfg.problems) == 2
    assert any("SK_SAMPLE_INTERVAL='fast'" in p for p in cfg.problems)
    assert any("SK_TRANSPORT='carrier-pigeon'" in p for p in cfg.problems)


# ------------------------------------------------------------------ the hooks, end to end (no Slurm)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {"SK_STATE_DIR": str(tmp_path / "state"), "SK_SPOOL": str(tmp_path / "spool"),
           "SK_SAMPLE_INTERVAL": "0.05", "SK_METRIC_SOURCE": "simulated", "SLURM_JOB_ID": "4242",
           "SLURMD_NODENAME": "gpu07", "SLURM_CLUSTER_NAME": "testc", "SLURM_JOB_GPUS": "1,6",
           "SLURM_JOB_RESTART_COUNT": "0"}
    return {**env, **extra}


def _spooled(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "spool").glob("gpus-*.json"))]


def _wait_lines(d: Path, n: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and len(sampler.read_state(str(d))[1]) < n:
        time.sleep(0.02)


def test_prolog_returns_with_a_live_sampler_and_epilog_summarizes(tmp_path):
    env = _env(tmp_path)
    assert hooks.prolog(env) == 0
    d = tmp_path / "state" / "gpu07" / "testc-4242-0"
    assert (d / sampler.PID).is_file() and sampler.alive(str(d))  # written before the prolog returned
    pid = int((d / sampler.PID).read_text().split()[0])
    assert os.getsid(pid) not in (os.getsid(0), pid)  # a new session it does not lead: no terminal, no group
    ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert ppid != os.getpid()  # re-parented, never the hook's zombie
    _wait_lines(d, 3)
    assert hooks.epilog(env) == 0
    assert not d.exists()
    [rec] = _spooled(tmp_path)
    assert (rec["kind"], rec["version"], rec["job_id"], rec["run"], rec["node"]) == ("gpus", 1, 4242, 0, "gpu07")
    assert rec["source"] == "simulated" and rec["flags"] is None
    assert [g["index"] for g in rec["gpus"]] == [1, 6]
    assert [g["uuid"] for g in rec["gpus"]] == ["SIMULATED-gpu07-1", "SIMULATED-gpu07-6"]
    assert all(g["samples"] >= 4 for g in rec["gpus"])  # >= 3 readings + the final one


def test_crashed_sampler_still_gives_a_flagged_summary(tmp_path):
    env = _env(tmp_path)
    hooks.prolog(env)
    d = tmp_path / "state" / "gpu07" / "testc-4242-0"
    _wait_lines(d, 2)
    pid = int((d / sampler.PID).read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    while sampler.alive(str(d)):
        time.sleep(0.01)
    n = len(sampler.read_state(str(d))[1])
    hooks.epilog(env)
    [rec] = _spooled(tmp_path)
    assert rec["flags"] == "sampler-died"
    assert [g["samples"] for g in rec["gpus"]] == [n, n] and n >= 2
    assert rec["gpus"][0]["util_mean"] is not None


def _age_before_boot(d: Path) -> float:
    """Give a run directory the times a reboot leaves behind: last written before this host booted."""
    t = sampler.boot_time() - 600
    for p in [*d.iterdir(), d]:
        os.utime(p, (t, t))
    return t


def test_prolog_delivers_what_a_job_that_died_with_the_node_had_sampled(tmp_path):
    # Job 4242 ran, its node lost power (sampler gone, no epilog); after the reboot job 77 starts on the node.
    hooks.prolog(_env(tmp_path))
    dead = tmp_path / "state" / "gpu07" / "testc-4242-0"
    _wait_lines(dead, 2)
    os.kill(int((dead / sampler.PID).read_text().split()[0]), signal.SIGKILL)
    while sampler.alive(str(dead)):
        time.sleep(0.01)
    n = len(sampler.read_state(str(dead))[1])
    last = _age_before_boot(dead)
    hooks.prolog(_env(tmp_path, SLURM_JOB_ID="4300", SLURM_JOB_GPUS="2"))  # a job of this boot: left alone
    live = tmp_path / "state" / "gpu07" / "testc-4300-0"
    assert sampler.alive(str(live))
    [rec] = _spooled(tmp_path)  # delivered by job 4300's prolog, before any epilog
    assert (rec["job_id"], rec["run"], rec["node"], rec["flags"]) == (4242, 0, "gpu07", "node-rebooted")
    assert [g["index"] for g in rec["gpus"]] == [1, 6] and [g["samples"] for g in rec["gpus"]] == [n, n] and n >= 2
    assert rec["ended"] == round(last, 3)  # when the node stopped writing, not when the sweep ran
    assert not dead.exists() and list((tmp_path / "state" / "gpu07").iterdir()) == [live]
    hooks.prolog(_env(tmp_path, SLURM_JOB_ID="4301", SLURM_JOB_GPUS="3"))
    assert len(_spooled(tmp_path)) == 1  # swept once, never delivered twice
    hooks.epilog(_env(tmp_path, SLURM_JOB_ID="4300", SLURM_JOB_GPUS="2"))
    assert sorted((r["job_id"], r["flags"]) for r in _spooled(tmp_path)) == [(4242, "node-rebooted"), (4300, None)]


def test_an_orphan_is_claimed_by_one_prolog_only(tmp_path):
    cfg = sampler.NodeConfig.from_env(_env(tmp_path))
    d = tmp_path / "state" / "gpu07" / "other-cluster-9-2"
    d.mkdir(parents=True)
    (d / sampler.SAMPLES).write_text("")
    _age_before_boot(d)
    booted = sampler.boot_time()
    first, second = sampler.claim_orphans(cfg, "gpu07", booted), sampler.claim_orphans(cfg, "gpu07", booted)
    assert [name for _, name, _ in first] == ["other-cluster-9-2"] and second == []
    assert sampler.parse_run_name("other-cluster-9-2") == ("other-cluster", 9, 2)


def test_a_directory_whose_sampler_runs_is_never_taken_for_an_orphan(tmp_path):
    # A clock stepped forward moves /proc/stat's btime past a running job's last write; its live sampler says no.
    env = _env(tmp_path, SK_SAMPLE_INTERVAL="600")  # one reading, then quiet: the aged times stay aged
    hooks.prolog(env)
    d = tmp_path / "state" / "gpu07" / "testc-4242-0"
    _wait_lines(d, 1)
    _age_before_boot(d)
    assert sampler.alive(str(d))
    assert sampler.claim_orphans(sampler.NodeConfig.from_env(env), "gpu07", sampler.boot_time()) == []
    assert d.is_dir() and _spooled(tmp_path) == []


def test_epilog_without_sampler_records_the_allocation_flagged(tmp_path):
    hooks.epilog(_env(tmp_path))
    [rec] = _spooled(tmp_path)
    assert rec["flags"] == "no-sampler"
    assert [(g["index"], g["samples"], g["util_mean"]) for g in rec["gpus"]] == [(1, 0, None), (6, 0, None)]


def test_no_gpus_no_sampler_no_record(tmp_path):
    env = _env(tmp_path, SLURM_JOB_GPUS="")
    hooks.prolog(env)
    hooks.epilog(env)
    assert not (tmp_path / "state" / "gpu07").exists() or not any((tmp_path / "state" / "gpu07").iterdir())
    assert _spooled(tmp_path) == []


def test_unavailable_source_is_flagged_with_the_reason(tmp_path):
    env = _env(tmp_path, SK_METRIC_SOURCE="dcgm")
    hooks.prolog(env)
    d = tmp_path / "state" / "gpu07" / "testc-4242-0"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (d / sampler.ERROR).exists():
        time.sleep(0.02)
    hooks.epilog(env)
    [rec] = _spooled(tmp_path)
    assert rec["flags"] == "source-unavailable,no-samples"
    assert "DCGM" in rec["note"]
    assert [g["util_mean"] for g in rec["gpus"]] == [None, None]


def test_requeued_run_is_summarized_under_the_run_that_sampled(tmp_path):
    # Slurm 22.05 passes the incremented restart count to the epilog of the requeued run.
    hooks.prolog(_env(tmp_path, SLURM_JOB_RESTART_COUNT="0"))
    _wait_lines(tmp_path / "state" / "gpu07" / "testc-4242-0", 1)
    hooks.epilog(_env(tmp_path, SLURM_JOB_RESTART_COUNT="1"))
    [rec] = _spooled(tmp_path)
    assert rec["run"] == 0


def test_undeliverable_summary_is_kept_and_sent_by_a_later_epilog(tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the spool directory should be")
    hooks.epilog(_env(tmp_path, SK_SPOOL=str(blocked)))
    kept = list((tmp_path / "state" / "gpu07" / "undelivered").glob("*.json"))
    assert len(kept) == 1
    hooks.epilog(_env(tmp_path, SLURM_JOB_ID="4243"))  # spool reachable again
    assert sorted(r["job_id"] for r in _spooled(tmp_path)) == [4242, 4243]
    assert not list((tmp_path / "state" / "gpu07" / "undelivered").glob("*.json"))


def test_admin_comment_failure_falls_back_to_the_spool_flagged(tmp_path, monkeypatch):
    def refuse(rec, **kw):
        raise RuntimeError("Access/permission denied")

    monkeypatch.setattr(admin_comment, "deliver", refuse)
    cfg = sampler.NodeConfig.from_env(_env(tmp_path, SK_TRANSPORT="admin_comment"))
    rec = gpusummary.node_record(cluster="c", job_id=9, run=0, node="gpu07", source="simulated", interval_s=1,
                                 gpus=[], flags=["no-samples"])
    assert transport.deliver(cfg, rec)
    [got] = _spooled(tmp_path)
    assert got["flags"] == "no-samples,admin-comment-failed"


def test_node_hooks_import_no_heavy_modules(tmp_path):
    code = ("import sys, json; from slurmkit.accounting import hooks; env = json.loads(sys.argv[1]); "
            "hooks.prolog(env); hooks.epilog(env); "
            "heavy = {'click', 'pandas', 'yaml', 'pydantic', 'jinja2', 'pyarrow', 'matplotlib', 'pynvml'}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(_env(tmp_path))], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"
    assert len(_spooled(tmp_path)) == 1


# ------------------------------------------------------------------ simulated source


def test_simulated_readings_replay_per_job_and_gpu():
    a = SimulatedSource(key="c/1/0", node="gpu01", interval_s=1)
    b = SimulatedSource(key="c/1/0", node="gpu01", interval_s=1)
    a.open([0, 1])
    b.open([0, 1])
    assert [a.sample() for _ in range(5)] == [b.sample() for _ in range(5)]
    assert gpu_seed("c/1/0", "gpu01", 0) != gpu_seed("c/1/0", "gpu02", 0)
    assert gpu_seed("c/1/0", "gpu01", 0) != gpu_seed("c/2/0", "gpu01", 0)


def test_simulated_profiles_all_occur():
    profiles = {profile_of(gpu_seed("c/1/0", "n", i)) for i in range(64)}
    assert profiles == {"busy", "idle", "bursty", "ramp"}


def test_simulated_gpus_cannot_pass_for_real_ones():
    gpus = SimulatedSource(key="c/1/0", node="gpu01", interval_s=1).open([3])
    assert gpus[0].uuid == "SIMULATED-gpu01-3" and gpus[0].pci_bus_id is None and gpus[0].model == "simulated"


def test_trace_file_is_replayed_from_a_per_gpu_offset(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("util_pct,mem_used_mib,power_w\n0,100,50\n50,200,150\n100,300,250\n")
    src = SimulatedSource(key="c/1/0", node="n", interval_s=1, trace=str(trace))
    src.open([0])
    start = gpu_seed("c/1/0", "n", 0) % 3
    rows = [(0.0, 100.0, 50.0), (50.0, 200.0, 150.0), (100.0, 300.0, 250.0)]
    assert [src.sample()[0].util_pct for _ in range(4)] == [rows[(start + k) % 3][0] for k in range(4)]


def test_trace_errors_name_file_and_line(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("util_pct,mem_used_mib,power_w\n1,2,3\n1,two,3\n")
    with pytest.raises(SourceUnavailable, match=r"trace.csv: line 3: expected three numbers"):
        read_trace(str(trace))
    trace.write_text("util,mem\n1,2\n")
    with pytest.raises(SourceUnavailable, match=r"line 1: trace header lacks util_pct, mem_used_mib, power_w"):
        read_trace(str(trace))


# ------------------------------------------------------------------ AdminComment


def _rec(node: str, run: int = 0, util: float = 42.0) -> dict:
    gpus = [{"index": 2, "uuid": "SIMULATED-x-2", "util_mean": util, "samples": 3}]
    return gpusummary.node_record(cluster="c", job_id=77, run=run, node=node, source="simulated", interval_s=10,
                                  gpus=gpus, flags=[])


def test_admin_comment_round_trip():
    rec = _rec("gpu01")
    text = admin_comment.encode(rec)
    assert text.startswith("sk2:") and " " not in text and "," not in text
    assert admin_comment.parse_admin_comment(text) == [rec]


def test_admin_comment_segment_survives_a_sacctmgr_that_changes_case():
    """Slurm 22.05's sacctmgr lower-cases AdminComment; any case of the written segment reads back the same."""
    rec = _rec("gpu01")
    text = admin_comment.encode(rec)
    assert text == text.lower()
    assert admin_comment.parse_admin_comment(text.upper()) == [rec]


def test_admin_comment_first_format_is_still_read():
    import base64
    import gzip
    import json

    rec = _rec("gpu02")
    legacy = "SK1:" + base64.b64encode(gzip.compress(json.dumps(rec).encode())).decode()
    assert admin_comment.parse_admin_comment("JS1:x," + legacy) == [rec]
    again = admin_comment.merge(legacy, rec)  # a re-run epilog replaces the old segment with the new format
    assert admin_comment.parse_admin_comment(again) == [rec] and "SK1:" not in again


def test_admin_comment_merge_keeps_foreign_text_and_replaces_own_node():
    first = admin_comment.merge("JS1:abc", _rec("gpu01", util=1.0))
    both = admin_comment.merge(first, _rec("gpu02"))
    again = admin_comment.merge(both, _rec("gpu01", util=99.0))  # a re-run epilog on gpu01
    assert again.startswith("JS1:abc,")
    recs = admin_comment.parse_admin_comment(again)
    assert sorted((r["node"], r["gpus"][0]["util_mean"]) for r in recs) == [("gpu01", 99.0), ("gpu02", 42.0)]


def test_admin_comment_bad_segment_is_named():
    with pytest.raises(ValueError, match="AdminComment segment SK1:bm90IGd6aXA="):
        admin_comment.parse_admin_comment("SK1:bm90IGd6aXA=")  # base64 of "not gzip"
    with pytest.raises(ValueError, match="AdminComment segment sk2:nzxxiidhpj"):
        admin_comment.parse_admin_comment("sk2:nzxxiidhpjuxa===")  # base32 of "not gzip"
