"""Plots for the HTML report as self-contained inline SVG (matplotlib, Agg backend, imported only here).

Text is drawn as paths (svg.fonttype=path), so the page needs no font files; every element id in a plot is
prefixed with the plot's name, so several inline SVGs in one HTML document never share an id.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

_ID = re.compile(r'\bid="([^"]+)"')
_PREFIX = re.compile(r"^.*?(?=<svg\b)", re.S)  # the XML declaration and DOCTYPE before <svg>
COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974",
          "#64b5cd")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def to_svg(fig, name: str) -> str:
    """The figure as an <svg> element with ids namespaced by `name`, ready to paste into HTML."""
    import matplotlib

    plt = _pyplot()
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": name}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    svg = _PREFIX.sub("", buf.getvalue(), count=1)
    for old in set(_ID.findall(svg)):
        new = f"{name}-{old}"
        svg = svg.replace(f'id="{old}"', f'id="{new}"').replace(f"#{old})", f"#{new})") \
                 .replace(f'"#{old}"', f'"#{new}"')
    return svg.replace("<svg ", f'<svg role="img" aria-label="{name}" class="plot" ', 1)


def _figure(width: float = 7.5, height: float = 3.6):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(width, height), dpi=96)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y" if height < 4 else "x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    return fig, ax


def stacked_bars(periods: Sequence[str], series: dict[str, Sequence[float]], *, title: str, ylabel: str,
                 name: str) -> str:
    """One bar per period, stacked by series (e.g. GPU-hours per account per month)."""
    fig, ax = _figure(8.5, 3.8)
    bottom = [0.0] * len(periods)
    x = list(range(len(periods)))
    for i, (label, values) in enumerate(series.items()):
        ax.bar(x, values, bottom=bottom, label=label, color=COLORS[i % len(COLORS)], width=0.8)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    step = max(1, len(periods) // 12)
    ax.set_xticks(x[::step], list(periods)[::step], rotation=30 if len(periods) > 6 else 0, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11)
    ax.legend(fontsize=8, frameon=False, ncols=min(len(series), 5), loc="upper left", bbox_to_anchor=(0, -0.18))
    return to_svg(fig, name)


def histogram(labels: Sequence[str], values: Sequence[float], *, title: str, ylabel: str, name: str) -> str:
    """Pre-binned values (the bins come from SQL) as bars."""
    fig, ax = _figure()
    ax.bar(range(len(labels)), values, color=COLORS[0], width=0.9)
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11)
    return to_svg(fig, name)


def hbars(labels: Sequence[str], values: Sequence[float], *, title: str, xlabel: str, name: str,
          color: str = COLORS[0], overlay: Sequence[float] | None = None, overlay_label: str = "") -> str:
    """Horizontal bars, largest on top; `overlay` (e.g. used GPU-hours) is drawn inside each bar."""
    fig, ax = _figure(7.5, 0.6 + 0.32 * max(3, len(labels)))
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.grid(axis="y", visible=False)
    y = list(range(len(labels)))[::-1]
    ax.barh(y, values, color=color, height=0.7, label=xlabel if overlay is not None else None)
    if overlay is not None:
        ax.barh(y, overlay, color=COLORS[2], height=0.4, label=overlay_label)
        ax.legend(fontsize=8, frameon=False, loc="lower right")
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlabel(xlabel)
    ax.set_title(title, loc="left", fontsize=11)
    return to_svg(fig, name)
