"""Build a /sys/class/infiniband tree from a real recorded `ibstatus` (tests/data/doctor/README.md).

`ibstatus` prints the sysfs port files (state, phys_state, rate, link_layer), so a recorded output is a faithful
source for the tree that `sk doctor` and `sk site discover` read on a node.
"""

from __future__ import annotations

import re
from pathlib import Path


def parse_ibstatus(text: str) -> dict[tuple[str, str], dict[str, str]]:
    """{(hca, port): {state, phys_state, rate, link_layer}}."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    cur: dict[str, str] | None = None
    for ln in text.splitlines():
        m = re.match(r"Infiniband device '(\S+)' port (\d+) status:", ln)
        if m:
            cur = out.setdefault((m.group(1), m.group(2)), {})
            continue
        k, sep, v = ln.partition(":")
        if cur is not None and sep:
            key = k.strip().replace(" ", "_")
            if key in ("state", "phys_state", "rate", "link_layer"):
                cur[key] = v.strip()
    return out


def write_infiniband_sysfs(ib_root: Path, ibstatus: str) -> None:
    """<ib_root>/<hca>/ports/<n>/{state,phys_state,rate,link_layer}, as ibstatus read them."""
    for (hca, port), info in parse_ibstatus(ibstatus).items():
        d = ib_root / hca / "ports" / port
        d.mkdir(parents=True)
        for name, value in info.items():
            (d / name).write_text(value + "\n")
