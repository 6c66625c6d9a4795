"""Slingshot's profile sets NCCL_NET_GDR_LEVEL, a variable of NCCL's debugging section that the lint warns users
about: the profile says why and cites HPE's recommended environment, and the lint does not warn a Slingshot user
whose value is the profile's (a different value still gets the precedence warning naming both)."""

from __future__ import annotations

from pathlib import Path

from slurmkit.config.source import loads
from slurmkit.docs import why
from slurmkit.docs.build import _env
from slurmkit.nccl import SLINGSHOT_SOURCE, lint_env
from slurmkit.plan import make_plan
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source

ROOT = Path(__file__).resolve().parents[1]


def slingshot_site(tmp_path: Path) -> Path:
    text = (ROOT / "site_config" / "dgx-a100.yaml").read_text()
    text = text.replace("kind: infiniband", "kind: slingshot").replace("socket_ifname: ibp", "socket_ifname: hsn")
    path = tmp_path / "slingshot.yaml"
    path.write_text(text)
    return path


def plan(site: Path, extra: str = ""):
    src = loads("name: t\nlauncher: torchrun\nnodes: 2\ncommand: [train.py]\n" + extra, "t.yaml")
    return make_plan(spec_from_source(src), load_site(site), src)


def test_the_profile_exports_gdr_level_phb_with_its_reason_and_source(tmp_path):
    site = load_site(slingshot_site(tmp_path))
    settings = {s.name: s for nt in site.node_types.values() for s in why.nccl_settings(nt)}
    gdr = settings["NCCL_NET_GDR_LEVEL"]
    assert gdr.value == "PHB" and "PXB" in gdr.reason and "host memory" in gdr.reason
    assert gdr.source == SLINGSHOT_SOURCE and "HewlettPackard/shs-ccl-docs" in gdr.source
    script_plan = plan(slingshot_site(tmp_path))
    assert script_plan.nccl_env.get("NCCL_NET_GDR_LEVEL") == "PHB", script_plan.nccl_env


def test_a_users_gdr_level_is_a_debugging_warning_except_where_the_profile_sets_it():
    assert any("debugging section" in p.message for p in lint_env({"NCCL_NET_GDR_LEVEL": "PHB"}, fabric="infiniband"))
    assert not any("debugging section" in p.message
                   for p in lint_env({"NCCL_NET_GDR_LEVEL": "PHB"}, fabric="slingshot"))


def test_a_slingshot_user_who_repeats_the_profile_gets_no_warning_and_another_value_names_both(tmp_path):
    site = slingshot_site(tmp_path)
    same = [w.format() for w in plan(site, "env: {NCCL_NET_GDR_LEVEL: PHB}\n").warnings]
    assert not any("NCCL_NET_GDR_LEVEL" in w for w in same), same
    other = [w.format() for w in plan(site, "env: {NCCL_NET_GDR_LEVEL: SYS}\n").warnings]
    assert any("NCCL_NET_GDR_LEVEL" in w and "PHB" in w and "SYS" in w for w in other), other


def test_the_guide_page_cites_the_source_and_does_not_call_the_variable_unset(tmp_path):
    site = load_site(slingshot_site(tmp_path))
    misnamed, debugging = why.lint_tables()
    page = _env().get_template("why-nccl.md.j2").render(
        why=why.explain(site, next(iter(site.node_types))), sources=why.SOURCES, misnamed=misnamed,
        debugging=debugging)
    row = next(line for line in page.splitlines() if line.startswith("| `NCCL_NET_GDR_LEVEL` | `PHB`"))
    assert "shs-ccl-docs" in row
    unset = next(line for line in page.splitlines() if line.startswith("* `NCCL_ALGO`"))
    assert "NCCL_NET_GDR_LEVEL" not in unset
    assert "profile sets `NCCL_NET_GDR_LEVEL` on purpose" in page.replace("\n  ", " ")
