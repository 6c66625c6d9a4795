"""Build a /sys/class/infiniband tree from a real recorded `ibstatus` (tests/data/doctor/README.md).

`ibstatus` prints the sysfs port files (state, phys_state, rate, link_layer), so a recorded output is a faithful
source for the tree that `sk doctor` and `sk site discover` read on a node.
"""

from __future__ import annotations

from pathlib import Path

from slurmkit.site.discover import parse_ibstatus

__all__ = ["parse_ibstatus", "write_infiniband_sysfs"]


def write_infiniband_sysfs(ib_root: Path, ibstatus: str) -> None:
    """<ib_root>/<hca>/ports/<n>/{state,phys_state,rate,link_layer}, as ibstatus read them."""
    for (hca, port), info in parse_ibstatus(ibstatus).items():
        d = ib_root / hca / "ports" / port
        d.mkdir(parents=True)
        for name, value in info.items():
            (d / name).write_text(value + "\n")
