"""An inline SVG of one node type: CPUs <-> NUMA node <-> GPU <-> nearest HCA, drawn from the site config.

Plain SVG text (no matplotlib): boxes and lines are all it needs, and it keeps the guide offline and small. Every
GPU box carries data-gpu/data-numa/data-hca attributes so a test can check the figure against the config.
"""

from __future__ import annotations

from html import escape

from slurmkit.site.model import NodeType

ROW = 34  # height of one GPU row
TOP = 56  # room for the column headings
COLS = {"cpus": (8, 200), "numa": (228, 92), "gpu": (350, 170), "hca": (560, 120)}
WIDTH = 700

_STYLE = {
    "cpus": "fill:#eef3fb;stroke:#4a6fa5", "numa": "fill:#dfe9f7;stroke:#4a6fa5",
    "gpu": "fill:#e4f4e4;stroke:#3d8b3d", "hca": "fill:#fbefdc;stroke:#b7791f",
    "storage": "fill:#eeeeee;stroke:#888888;stroke-dasharray:4 3", "idle": "fill:#f6f6f6;stroke:#aaaaaa",
}


def _box(kind: str, x: int, y: float, w: int, h: float, label: str, attrs: str = "", style: str | None = None) -> str:
    return (f'<g class="sk-{kind}"{attrs}><rect x="{x}" y="{y:.0f}" width="{w}" height="{h:.0f}" rx="5" '
            f'style="{style or _STYLE[kind]}"/><text x="{x + w / 2:.0f}" y="{y + h / 2 + 4:.0f}" '
            f'text-anchor="middle">{escape(label)}</text></g>')


def _line(x1: float, y1: float, x2: float, y2: float) -> str:
    return f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" style="stroke:#777;stroke-width:1.2"/>'


def _groups(nt: NodeType) -> list[tuple[int, list[int]]]:
    """(NUMA node, GPU indices) runs in GPU index order; a NUMA node's GPUs that are not adjacent get two runs."""
    runs: list[tuple[int, list[int]]] = []
    for g in sorted(nt.gpus, key=lambda g: g.index):
        if runs and runs[-1][0] == g.numa:
            runs[-1][1].append(g.index)
        else:
            runs.append((g.numa, [g.index]))
    return runs


def svg(name: str, nt: NodeType) -> str:
    """The figure as one line-free block of SVG (Markdown ends a raw HTML block at a blank line)."""
    gpus = sorted(nt.gpus, key=lambda g: g.index)
    row_of = {g.index: i for i, g in enumerate(gpus)}
    ymid = {g.index: TOP + row_of[g.index] * ROW + ROW / 2 for g in gpus}
    parts: list[str] = []
    heads = {"cpus": "CPUs (kernel cpulist)", "numa": "NUMA node", "gpu": f"GPU ({nt.gpu.model})",
             "hca": "nearest HCA"}
    for kind, (x, w) in COLS.items():
        parts.append(f'<text x="{x + w / 2:.0f}" y="{TOP - 14}" text-anchor="middle" '
                     f'style="font-weight:bold">{escape(heads[kind])}</text>')
    for numa, idx in _groups(nt):
        y0, h = TOP + row_of[idx[0]] * ROW + 3, len(idx) * ROW - 6
        cpus = sorted({nt.gpu_by_index(i).cpus for i in idx})
        (cx, cw), (nx, nw) = COLS["cpus"], COLS["numa"]
        parts.append(_box("cpus", cx, y0, cw, h, " + ".join(cpus)))
        parts.append(_box("numa", nx, y0, nw, h, f"NUMA {numa}", f' data-numa="{numa}"'))
        parts.append(_line(cx + cw, y0 + h / 2, nx, y0 + h / 2))
        gx = COLS["gpu"][0]
        parts.extend(_line(nx + nw, y0 + h / 2, gx, ymid[i]) for i in idx)
    gx, gw = COLS["gpu"]
    hx, hw = COLS["hca"]
    hcas: dict[str, list[int]] = {}
    for g in gpus:
        if g.hca:
            hcas.setdefault(g.hca, []).append(g.index)
    hca_y = {h: sum(ymid[i] for i in idx) / len(idx) for h, idx in hcas.items()}
    for g in gpus:
        attrs = f' data-gpu="{g.index}" data-numa="{g.numa}" data-hca="{escape(g.hca or "")}"'
        parts.append(_box("gpu", gx, ymid[g.index] - ROW / 2 + 3, gw, ROW - 6, f"GPU {g.index}", attrs))
        if g.hca:
            parts.append(_line(gx + gw, ymid[g.index], hx, hca_y[g.hca]))
    for h, y in hca_y.items():
        parts.append(_box("hca", hx, y - ROW / 2 + 5, hw, ROW - 10, h, f' data-hca-box="{escape(h)}"'))
    y = TOP + len(gpus) * ROW + 12
    idle = sorted(set(range(nt.numa_nodes)) - {g.numa for g in gpus})
    if idle:
        label = "NUMA " + ", ".join(map(str, idle)) + ": no GPU attached"
        parts.append(_box("idle", COLS["cpus"][0], y, COLS["numa"][0] + COLS["numa"][1] - COLS["cpus"][0], 26,
                          label))
    if nt.storage_hcas:
        parts.append(_box("storage", gx, y, hx + hw - gx, 26,
                          "storage HCAs " + ", ".join(nt.storage_hcas) + ": never used by NCCL"))
    if idle or nt.storage_hcas:
        y += 38
    link = f"NVLink {nt.gpu.nvlink} between GPUs" if nt.gpu.nvlink != "none" else "no NVLink: GPUs talk over PCIe"
    parts.append(f'<text x="8" y="{y + 10}" style="font-size:12px;fill:#555">{escape(link)}; fabric '
                 f'{escape(nt.fabric.kind)}; {nt.sockets} sockets x {nt.cores_per_socket} cores x '
                 f'{nt.threads_per_core} threads = {nt.cpus} CPUs.</text>')
    height = y + 24
    title = f"Topology of node type {name}: which CPUs, NUMA node and HCA belong to each GPU"
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="sk-topology" data-node-type="{escape(name)}" '
            f'role="img" aria-label="{escape(title)}" viewBox="0 0 {WIDTH} {height:.0f}" width="{WIDTH}" '
            f'style="max-width:100%;height:auto;font-family:sans-serif;font-size:13px"><title>{escape(title)}</title>'
            + "".join(parts) + "</svg>")
