"""The NCCL lint's site-aware warnings: values NCCL accepts that are wrong for the site's fabric or for a
production job (NCCL's environment-variable documentation). One case each, and the same value where it is fine."""

from __future__ import annotations

from slurmkit.nccl import lint_env


def warnings(env: dict[str, str], **site) -> list[str]:
    return [p.message for p in lint_env(env, **site) if p.severity == "warning"]


def test_ib_disable_on_an_rdma_site_warns_only_there():
    assert any("all inter-node traffic over IP sockets" in m
               for m in warnings({"NCCL_IB_DISABLE": "1"}, fabric="infiniband"))
    assert any("NCCL_IB_DISABLE=1 on a roce site" in m for m in warnings({"NCCL_IB_DISABLE": "1"}, fabric="roce"))
    assert warnings({"NCCL_IB_DISABLE": "1"}, fabric="tcp") == []
    assert warnings({"NCCL_IB_DISABLE": "0"}, fabric="infiniband") == []


def test_debug_info_and_subsys_all_left_in_a_job_warn():
    assert any("left in a job" in m for m in warnings({"NCCL_DEBUG": "INFO"}))
    assert any("left in a job" in m for m in warnings({"NCCL_DEBUG": "trace"}))
    assert warnings({"NCCL_DEBUG": "WARN"}) == []
    assert any("logs every subsystem" in m for m in warnings({"NCCL_DEBUG_SUBSYS": "INIT,ALL"}))
    assert warnings({"NCCL_DEBUG_SUBSYS": "INIT,NET"}) == []


def test_cross_nic_on_a_rail_optimized_fabric_warns():
    assert any("rail-optimized" in m for m in warnings({"NCCL_CROSS_NIC": "1"}, rail_optimized=True))
    assert warnings({"NCCL_CROSS_NIC": "1"}, rail_optimized=False) == []
    assert warnings({"NCCL_CROSS_NIC": "1"}) == []  # unknown site: no claim


def test_gid_index_on_infiniband_has_no_effect():
    assert any("no effect" in m for m in warnings({"NCCL_IB_GID_INDEX": "3"}, fabric="infiniband"))
    assert warnings({"NCCL_IB_GID_INDEX": "3"}, fabric="roce") == []


def test_collnet_without_sharp_warns():
    assert any("declares no SHARP" in m
               for m in warnings({"NCCL_COLLNET_ENABLE": "1"}, fabric="infiniband", sharp=False))
    assert warnings({"NCCL_COLLNET_ENABLE": "1"}, fabric="infiniband", sharp=True) == []


def test_doctor_passes_the_node_types_fabric_to_the_lint(tmp_path):
    # sk doctor inside a job on the (12-port) DGX A100 config: rail-optimized, InfiniBand, no SHARP declared
    from pathlib import Path

    from slurmkit.site import doctor as doc
    from slurmkit.site.model import load_site

    nt = load_site(Path(__file__).resolve().parents[1] / "site_config" / "dgx-a100.yaml").node_types["dgx-a100"]
    inp = doc.Inputs(env={"NCCL_CROSS_NIC": "1", "NCCL_IB_GID_INDEX": "3", "NCCL_COLLNET_ENABLE": "1"},
                     proc=tmp_path, sys=tmp_path, run=lambda cmd: (None, "not here"), python_nccl=list)
    c = doc.check_nccl_env(inp, nt, None)
    assert c.status == "WARN"
    assert "rail-optimized" in c.reason and "no effect" in c.reason and "declares no SHARP" in c.reason


def errors(env: dict[str, str], **site) -> list[str]:
    return [p.message for p in lint_env(env, **site) if p.severity == "error"]


def test_ib_defaults_that_became_automatic_are_named_with_their_release():
    # NVIDIA/nccl net_ib.cc NCCL_PARAM defaults: IB_GID_INDEX 0 -> -1 at v2.21.5-1, IB_SL/IB_TC 0 -> -1 at v2.26.2-1
    [gid] = warnings({"NCCL_IB_GID_INDEX": "-1"}, fabric="roce")
    assert "NCCL's default" in gid and "since NCCL 2.21" in gid and "0 in older releases" in gid
    for name in ("NCCL_IB_SL", "NCCL_IB_TC"):
        [w] = warnings({name: "-1"}, fabric="roce")
        assert "since NCCL 2.26" in w and "trafficClass" in w and "0 in older releases" in w
    assert warnings({"NCCL_IB_TC": "106", "NCCL_IB_SL": "3", "NCCL_IB_GID_INDEX": "3"}, fabric="roce") == []


def test_ib_values_out_of_range_are_errors():
    assert any("NCCL_IB_SL must be 0-15" in m for m in errors({"NCCL_IB_SL": "16"}))
    assert any("NCCL_IB_TC must be 0-255" in m for m in errors({"NCCL_IB_TC": "256"}))
    assert any("NCCL_IB_GID_INDEX must be 0-255" in m for m in errors({"NCCL_IB_GID_INDEX": "-2"}))
    assert errors({"NCCL_IB_SL": "15", "NCCL_IB_TC": "255"}) == []


def test_gid_index_on_infiniband_says_why_it_is_ignored():
    [w] = warnings({"NCCL_IB_GID_INDEX": "3"}, fabric="infiniband")
    assert "RoCE (Ethernet) link layer" in w and "LID" in w and "2.22" in w


def test_site_guide_reasons_give_the_versioned_defaults_not_zero():
    from pathlib import Path

    from slurmkit.docs.why import nccl_settings
    from slurmkit.site.model import load_site

    nt = load_site(Path(__file__).resolve().parents[1] / "site_config" / "pcie-roce.yaml").node_types
    reasons = {s.name: s.reason for t in nt.values() for s in nccl_settings(t)}
    assert "since NCCL 2.26" in reasons["NCCL_IB_TC"] and "default is 0" not in reasons["NCCL_IB_TC"]
    assert "since NCCL 2.21" in reasons["NCCL_IB_GID_INDEX"]
