"""The site-aware NCCL warnings reach the planner: `sk validate/render/submit` pass the node type's fabric facts
(rail_optimized, sharp, socket_ifname) to the lint, so they fire before the job runs, not only in `sk doctor`.
The shipped dgx-a100 config is rail-optimized InfiniBand without SHARP, socket_ifname `ibp` (DGX OS 5+ IPoIB)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from slurmkit.config.source import loads
from slurmkit.nccl import ifnames_outside
from slurmkit.plan import make_plan
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source

ROOT = Path(__file__).resolve().parents[1]
DGX = ROOT / "site_config" / "dgx-a100.yaml"


def plan_warnings(text: str, site: Path = DGX) -> list[str]:
    src = loads("name: t\nlauncher: torchrun\nnodes: 2\ncommand: [train.py]\n" + text, "t.yaml")
    return [p.format() for p in make_plan(spec_from_source(src), load_site(site), src).warnings]


@pytest.mark.parametrize(("where", "name", "value", "fragment"), [
    ("nccl", "NCCL_CROSS_NIC", "1", "rail-optimized"),
    ("env", "NCCL_CROSS_NIC", "1", "rail-optimized"),
    ("nccl", "NCCL_COLLNET_ENABLE", "1", "declares no SHARP"),
    ("nccl", "NCCL_SOCKET_IFNAME", "ib0", "can match no interface the node type has"),
    ("env", "NCCL_SOCKET_IFNAME", "eth0", "can match no interface the node type has"),
])
def test_plan_warns_with_the_node_types_fabric(where, name, value, fragment):
    text = f"nccl:\n  env: {{{name}: '{value}'}}\n" if where == "nccl" else f"env: {{{name}: '{value}'}}\n"
    key = f"nccl.env.{name}" if where == "nccl" else f"env.{name}"
    assert any("t.yaml:" in w and key in w and fragment in w for w in plan_warnings(text)), plan_warnings(text)


@pytest.mark.parametrize("value", ["ibp", "ib", "=ibp12s0", "ibp12s0,ibp18s0", "^docker,lo"])
def test_socket_ifnames_the_node_type_can_have_do_not_warn(value):
    assert not any("can match no interface" in w for w in plan_warnings(f"env: {{NCCL_SOCKET_IFNAME: '{value}'}}\n"))


def test_sharp_and_non_rail_sites_do_not_warn(tmp_path):
    text = DGX.read_text().replace("rail_optimized: true", "rail_optimized: false\n      sharp: true")
    site = tmp_path / "dgx-sharp.yaml"
    site.write_text(text)
    warnings = plan_warnings("nccl:\n  env: {NCCL_CROSS_NIC: '1', NCCL_COLLNET_ENABLE: '1'}\n", site)
    assert not any("rail-optimized" in w or "SHARP" in w for w in warnings), warnings


def test_ifnames_outside_follows_nccls_prefix_rule():
    assert ifnames_outside("ib0", "ibp") == ["ib0"]  # DGX OS 5+ has ibp12s0..., no ib0
    assert ifnames_outside("ib0,ibp", "ibp") == ["ib0"]
    assert ifnames_outside("=ibp12s0", "ibp") == [] and ifnames_outside("=eth0", "=eth1") == ["eth0"]
    assert ifnames_outside("ens", "=ens1f0np0") == [] and ifnames_outside("ens2", "=ens1f0np0") == ["ens2"]
    assert ifnames_outside("docker0", "^docker,lo") == ["docker0"] and ifnames_outside("eth", "^docker,lo") == []
    assert ifnames_outside("^lo", "ibp") == []  # an exclusion list names no interface


def test_sk_validate_prints_the_warning_and_exits_0(tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: t\nlauncher: torchrun\nnodes: 2\ncommand: [train.py]\nenv:\n  NCCL_SOCKET_IFNAME: ib0\n")
    run = subprocess.run([str(Path(sys.executable).parent / "sk"), "validate", str(spec), "--site", str(DGX)],
                         capture_output=True, text=True, env=os.environ.copy())
    assert run.returncode == 0, run.stderr
    expected = f"{spec}:6: warning: env.NCCL_SOCKET_IFNAME: NCCL_SOCKET_IFNAME=ib0: ib0 can match no interface"
    assert expected in run.stderr, run.stderr
