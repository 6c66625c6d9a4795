"""Which NCCL value the rendered script exports when the site profile, env:, nccl: and --set disagree.

The rule (docs/how-it-works.md): site profile < the spec's env: < its nccl: section < --set. The dgx-a100 site's
profile sets NCCL_SOCKET_IFNAME=ibp for a 2-node torchrun job; the tests read the rendered script itself, and run
its export lines in bash to see the value a rank really gets.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from slurmkit.config.source import loads
from slurmkit.plan import make_plan
from slurmkit.render import render
from slurmkit.site.model import load_site
from slurmkit.spec import spec_from_source

ROOT = Path(__file__).resolve().parents[1]
SITE = load_site(ROOT / "site_config" / "dgx-a100.yaml")
BASE = {"name": "t", "launcher": "torchrun", "nodes": 2, "command": ["train.py"]}


def rendered(sets: list[str] | None = None, **extra):
    src = loads(json.dumps({**BASE, **extra}), "t.yaml")
    plan = make_plan(spec_from_source(src, sets), SITE, src)
    return render(plan), [p.format() for p in plan.warnings]


def exported(script: str, name: str) -> tuple[int, str]:
    """(how many lines export `name`, the value bash ends up with after all the script's exports)."""
    lines = [ln for ln in script.splitlines() if re.match(r"export [A-Za-z_]\w*=", ln)]
    count = sum(ln.startswith(f"export {name}=") for ln in lines)
    out = subprocess.run(["bash", "-c", "\n".join(lines) + f'\nprintf %s "${{{name}}}"'], capture_output=True,
                         text=True, check=True, env={"PATH": "/usr/bin:/bin"})
    return count, out.stdout


def test_site_profile_alone_is_exported_once():
    script, warnings = rendered()
    assert exported(script, "NCCL_SOCKET_IFNAME") == (1, "ibp")
    assert not any("NCCL_SOCKET_IFNAME" in w for w in warnings)


def test_env_beats_the_site_profile_with_a_warning_naming_both_values():
    script, warnings = rendered(env={"NCCL_SOCKET_IFNAME": "eth0"})
    assert exported(script, "NCCL_SOCKET_IFNAME") == (1, "eth0")
    [w] = [w for w in warnings if "the script exports" in w]
    assert "t.yaml" in w and "env.NCCL_SOCKET_IFNAME" in w and "'eth0'" in w and "'ibp'" in w


def test_nccl_env_beats_env_and_the_site_profile():
    script, warnings = rendered(env={"NCCL_SOCKET_IFNAME": "eth0"}, nccl={"env": {"NCCL_SOCKET_IFNAME": "enp"}})
    assert exported(script, "NCCL_SOCKET_IFNAME") == (1, "enp")
    conflicts = [w for w in warnings if "the script exports" in w]
    assert len(conflicts) == 2  # against the site's ibp and against env:'s eth0
    assert all("nccl.env.NCCL_SOCKET_IFNAME" in w and "'enp'" in w for w in conflicts)
    assert any("'ibp'" in w for w in conflicts) and any("'eth0'" in w for w in conflicts)


def test_set_of_env_beats_nccl_env_in_the_file():
    script, warnings = rendered(["env.NCCL_SOCKET_IFNAME=eth1"], nccl={"env": {"NCCL_SOCKET_IFNAME": "enp"}})
    assert exported(script, "NCCL_SOCKET_IFNAME") == (1, "eth1")
    assert any(w.startswith("--set env.NCCL_SOCKET_IFNAME=eth1: warning:") and "the script exports 'eth1'" in w
               for w in warnings)


def test_env_value_equal_to_the_site_profile_is_exported_once_without_a_warning():
    script, warnings = rendered(env={"NCCL_SOCKET_IFNAME": "ibp"})
    assert exported(script, "NCCL_SOCKET_IFNAME") == (1, "ibp")
    assert not any("NCCL_SOCKET_IFNAME" in w for w in warnings)


def test_nccl_debug_and_env_nccl_debug_export_one_value():
    script, _ = rendered(env={"NCCL_DEBUG": "WARN"}, nccl={"debug": "INFO"})
    assert exported(script, "NCCL_DEBUG") == (1, "INFO")


def test_a_variable_only_the_user_sets_stays_where_it_was():
    script, _ = rendered(env={"NCCL_IB_TIMEOUT": "22"})
    assert exported(script, "NCCL_IB_TIMEOUT") == (1, "22")
    assert exported(script, "NCCL_IB_HCA")[0] == 1  # the rest of the profile is still there


def test_nccl_debug_beats_nccl_env_nccl_debug_with_a_warning():
    script, warnings = rendered(nccl={"debug": "INFO", "env": {"NCCL_DEBUG": "WARN"}})
    assert exported(script, "NCCL_DEBUG") == (1, "INFO")
    assert any("nccl.debug is 'INFO' and nccl.env.NCCL_DEBUG is 'WARN'" in w for w in warnings), warnings
