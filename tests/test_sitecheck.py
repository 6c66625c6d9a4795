"""`sk site check` logic on recorded real Slurm output (tests/data/slurm/, recorded on the devcluster; see its
README) against the shipped devcluster site config and deliberately wrong copies of it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from slurmkit.config.source import loads
from slurmkit.site import check as sc
from slurmkit.site.discover import parse_slurmd_g
from slurmkit.site.model import site_from_source

ROOT = Path(__file__).resolve().parents[1]
SLURM = ROOT / "tests" / "data" / "slurm"
DEVSITE = ROOT / "site_config" / "devcluster.yaml"


@pytest.fixture
def state() -> sc.SlurmState:
    return sc.SlurmState(
        config=sc.parse_show_config((SLURM / "scontrol-show-config.txt").read_text()),
        partitions=sc.parse_show_lines((SLURM / "scontrol-show-partition-o.txt").read_text(), "PartitionName"),
        nodes=sc.parse_show_lines((SLURM / "scontrol-show-node-o.txt").read_text(), "NodeName"),
        gres_conf={"gpu01": parse_slurmd_g((SLURM / "slurmd-G-gpu01.txt").read_text())})


def check(state: sc.SlurmState, edit=None) -> sc.Report:
    data = yaml.safe_load(DEVSITE.read_text())
    data["slurm_version"] = "22.05"  # the recorded outputs are the devcluster's on Slurm 22.05.8
    if edit:
        edit(data)
    text = yaml.safe_dump(data, sort_keys=False)
    src = loads(text, "wrong.yaml")
    return sc.check_site(site_from_source(src), src, state)


def only(report: sc.Report, check_id: str) -> sc.Finding:
    found = [f for f in report.findings if f.check == check_id]
    assert len(found) == 1, [f.format() for f in report.findings]
    return found[0]


def test_recorded_outputs_parse_into_what_slurm_said(state):
    assert state.config["ClusterName"] == "devcluster" and state.config["SLURM_VERSION"] == "22.05.8"
    assert state.slurm_conf == "/run/slurmkit-devcluster/etc/slurm.conf"
    assert state.gres_conf_path == "/run/slurmkit-devcluster/etc/gres.conf"
    assert set(state.nodes) == {"gpu01", "gpu02"}
    assert state.nodes["gpu01"]["Gres"] == "gpu:a100:8(S:0-1)" and state.nodes["gpu01"]["RealMemory"] == "256000"
    # a value with spaces (OS=) does not swallow the next key
    assert state.nodes["gpu02"]["OS"].startswith("Linux ") and state.nodes["gpu02"]["RealMemory"] == "256000"
    gpu = state.partitions["gpu"]
    assert (gpu["MaxTime"], gpu["MaxNodes"], gpu["Nodes"]) == ("1-00:00:00", "2", "gpu[01-02]")
    assert sc._job_defaults(gpu["JobDefaults"]) == {"DefCpuPerGPU": "4", "DefMemPerGPU": "8192"}
    assert [(ln["minors"], ln["cores"][0], ln["cores"][-1]) for ln in state.gres_conf["gpu01"]] == \
        [([0, 1, 2, 3], 0, 31), ([4, 5, 6, 7], 32, 63)]


def test_shipped_devcluster_config_matches_recorded_slurm(state):
    report = check(state)
    assert report.findings == [], [f.format() for f in report.findings]
    assert report.checked == {"partitions": ["gpu"], "nodes": ["gpu01", "gpu02"], "gres_conf_nodes": ["gpu01"]}


def test_gpu_count_mismatch_names_key_line_both_values_and_the_fix(state):
    def edit(d):
        nt = d["node_types"]["devnode"]
        nt["gpu"]["count"], nt["gpus"] = 4, nt["gpus"][:4]

    report = check(state, edit)
    f = only(report, "gres.count")
    assert f.severity == "error" and f.key == "node_types.devnode.gpu.count" and f.line is not None
    assert (f.config_value, f.slurm_value, f.nodes) == ("4", "8", "gpu[01-02]")
    assert "site config says 4 GPUs per node; Slurm has 8 gpu:a100 on gpu[01-02]" in f.message
    assert f.fix.startswith("set node_types.devnode.gpu.count: 8")
    # gres.conf lists /dev/nvidia4-7, which the shortened config no longer describes
    assert "/dev/nvidia[4-7]" in only(report, "gres_conf.file").message


def test_wrong_gres_type_and_untyped_gres(state):
    f = only(check(state, lambda d: d["node_types"]["devnode"]["gpu"].update(slurm_type="h100")), "gres.type")
    assert f.severity == "error" and "'h100' is not on the nodes of partition gpu: Slurm has gpu:a100:8" in f.message
    assert f.fix.startswith("set node_types.devnode.gpu.slurm_type: a100")
    # The untyped form `Gres=gpu:8` is from NVIDIA/deepops docs/slurm-cluster/nvml.md (a DGX A100 slurm.conf line).
    state.nodes["gpu01"]["Gres"] = state.nodes["gpu02"]["Gres"] = "gpu:8"
    f = only(check(state), "gres.type")
    assert "have no type (Gres=gpu:8)" in f.message and "Type=a100" in f.fix


def test_mig_gres_string_from_a_published_dgx_a100(state):
    # `scontrol show node dgx01 | grep Gres` from NVIDIA/deepops docs/slurm-cluster/nvml.md (MIG profiles as types)
    gres = "gpu:3g.40gb:8(S:0-1),gpu:2g.20gb:8(S:0-1),gpu:1g.10gb:16(S:0-1)"
    assert sc.parse_gres(gres) == [("gpu", "3g.40gb", 8), ("gpu", "2g.20gb", 8), ("gpu", "1g.10gb", 16)]
    assert sc.parse_gres("(null)") == [] and sc.parse_gres("gpu:a100:8(S:0-1),shard:16") == \
        [("gpu", "a100", 8), ("shard", None, 16)]
    state.nodes["gpu01"]["Gres"] = state.nodes["gpu02"]["Gres"] = gres
    f = only(check(state), "gres.type")
    assert "set node_types.devnode.gpu.slurm_type to one of 1g.10gb, 2g.20gb, 3g.40gb" in f.fix


def test_partition_that_slurm_does_not_have_suggests_the_closest(state):
    def edit(d):
        d["partitions"]["gpux"] = d["partitions"].pop("gpu")
        d["default_partition"] = "gpux"

    report = check(state, edit)
    f = only(report, "partition.exists")
    assert f.severity == "error" and f.key == "partitions.gpux"
    assert "partition 'gpux' does not exist in Slurm (Slurm has: gpu)" in f.message and f.fix == \
        "rename partitions.gpux to 'gpu'"
    assert only(report, "partition.unlisted").severity == "warning"
    assert "Slurm's default partition is 'gpu'" in only(report, "cluster.default_partition").message


def test_cores_sockets_threads_memory_each_reported(state):
    def edit(d):
        nt = d["node_types"]["devnode"]
        nt.update(cores_per_socket=16, memory="300G")
        for g in nt["gpus"]:
            g["cpus"] = "0-15" if g["numa"] == 0 else "16-31"

    report = check(state, edit)
    f = only(report, "node.cores_per_socket")
    assert (f.severity, f.config_value, f.slurm_value) == ("error", "16", "32")
    assert "site cores_per_socket 16 vs Slurm CoresPerSocket=32 on gpu[01-02]" in f.message
    m = only(report, "node.memory")
    assert m.severity == "error" and "RealMemory=256000" in m.message and m.fix == \
        "set node_types.devnode.memory: 250G"
    # GPUs 4-7 moved to cores 16-31 while gres.conf says 32-63: one finding for the four GPUs
    g = only(report, "gres_conf.cores")
    assert g.severity == "error" and g.message.startswith("GPUs 4-7: the site config puts them next to CPUs 16-31")
    assert "gres.conf on gpu01 says Cores=32-63" in g.message and g.key == "node_types.devnode.gpus[4].cpus"


def test_less_memory_than_slurm_is_only_a_warning(state):
    f = only(check(state, lambda d: d["node_types"]["devnode"].update(memory="200G")), "node.memory")
    assert f.severity == "warning"


def test_partition_limits_above_slurms_are_errors_below_are_warnings(state):
    def edit(d):
        d["partitions"]["gpu"].update(max_time="2-00:00:00", max_nodes=1, default_cpus_per_gpu=8)

    report = check(state, edit)
    t = only(report, "partition.max_time")
    assert t.severity == "error" and "pend forever (Reason=PartitionTimeLimit)" in t.message
    assert t.fix.startswith('set partitions.gpu.max_time: "1-00:00:00"')
    n = only(report, "partition.max_nodes")
    assert n.severity == "warning" and n.fix == "set partitions.gpu.max_nodes: 2"
    c = only(report, "partition.default_cpus_per_gpu")
    assert c.severity == "warning" and c.fix == "set partitions.gpu.default_cpus_per_gpu: 4"


def test_gres_conf_coarser_than_site_is_fine_partial_is_warning_missing_cores_is_warning(state):
    def narrow(d):  # GPU0 on CPUs 0-7 only: inside gres.conf's per-socket Cores=0-31, so no finding
        d["node_types"]["devnode"]["gpus"][0]["cpus"] = "0-7"

    assert check(state, narrow).findings == []

    def straddle(d):
        d["node_types"]["devnode"]["gpus"][0]["cpus"] = "24-39"

    assert only(check(state, straddle), "gres_conf.cores").severity == "warning"
    for ln in state.gres_conf["gpu01"]:
        ln["cores"] = None
    found = [f for f in check(state).findings if f.check == "gres_conf.cores"]
    assert [(f.severity, f.message.split(":")[0], f.fix.split(" to ")[0]) for f in found] == [
        ("warning", "gres.conf on gpu01 gives GPUs 0-3 no Cores=", "add Cores=0-31"),
        ("warning", "gres.conf on gpu01 gives GPUs 4-7 no Cores=", "add Cores=32-63")]


def test_site_cores_maps_smt_siblings_to_their_core():
    # DGX A100: 2 x 64 cores x 2 threads; CPU 176 is the sibling of CPU 48 (tests/data/topo dgx-a100 fixture).
    from slurmkit.site.model import load_site

    nt = load_site(ROOT / "site_config" / "dgx-a100.yaml").node_types["dgx-a100"]
    assert sc.site_cores(nt, nt.gpu_by_index(0).cpu_list) == set(range(48, 64))


def test_version_and_cluster_name(state):
    def edit(d):
        d.update(slurm_version="23.11", cluster="prod")

    report = check(state, edit)
    v = only(report, "cluster.slurm_version")
    assert v.severity == "error" and "the cluster runs 22.05.8" in v.message and v.fix == 'set slurm_version: "22.05"'
    assert only(report, "cluster.name").fix == "set cluster: devcluster"


def test_down_node_is_a_warning(state):
    state.nodes["gpu02"]["State"] = "DOWN+DRAIN"
    f = only(check(state), "node.state")
    assert f.severity == "warning" and "gpu02 (DOWN+DRAIN)" in f.message


def test_finding_format_and_json_shape(state):
    report = check(state, lambda d: d["node_types"]["devnode"].update(sockets=1, cores_per_socket=64))
    f = only(report, "node.sockets")
    text = f.format()
    assert text.startswith(f"ERROR   wrong.yaml:{f.line}: node_types.devnode.sockets: site sockets 1 vs Slurm ")
    assert "\n        fix: set node_types.devnode.sockets: 2" in text
    out = report.to_json()
    assert out["errors"] == len(report.errors) >= 2 and out["findings"][0]["severity"] == "error"
    assert {"check", "key", "line", "config_value", "slurm_value", "slurm_where", "fix"} <= set(out["findings"][0])
