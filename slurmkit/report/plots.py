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
                 name: str, colors: Sequence[str] | None = None) -> str:
    """One bar per period, stacked by series (e.g. GPU-hours per account per month); `colors`: one per series."""
    fig, ax = _figure(12, 3.8)  # a full-width figure: wider, so its text keeps the size of the others'
    bottom = [0.0] * len(periods)
    x = list(range(len(periods)))
    for i, (label, values) in enumerate(series.items()):
        color = colors[i] if colors else COLORS[i % len(COLORS)]
        ax.bar(x, values, bottom=bottom, label=label, color=color, width=0.8)
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


OTHER_COLOR = "#7f7f7f"  # the grey of matplotlib's tab10, kept for "other"


def palette(n: int) -> list[str]:
    """`n` distinct colours of matplotlib's qualitative tab10 palette, its grey left out (that is "other"'s):
    at most 9, so a chart never reuses a colour (callers fold the rest into "other")."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    colors = [to_hex(c) for c in colormaps["tab10"].colors if to_hex(c) != OTHER_COLOR]
    if n > len(colors):
        raise ValueError(f"{n} series but only {len(colors)} distinct colours: fold the rest into 'other'")
    return colors[:n]


def bars(labels: Sequence[str], values: Sequence[float], *, title: str, ylabel: str, name: str,
         notes: Sequence[str] | None = None, colors: Sequence[str] | None = None, xlabel: str = "") -> str:
    """Vertical bars, one per label in the given order, each with an optional note above it (e.g. "120 jobs")."""
    fig, ax = _figure()
    x = list(range(len(labels)))
    drawn = ax.bar(x, values, color=list(colors) if colors else COLORS[0], width=0.7)
    if notes:
        ax.bar_label(drawn, labels=list(notes), fontsize=8, padding=2)
        ax.margins(y=0.12)
    ax.set_xticks(x, labels)
    ax.set_ylabel(ylabel)
    if xlabel:
        ax.set_xlabel(xlabel)
    ax.set_title(title, loc="left", fontsize=11)
    return to_svg(fig, name)


def bars_against_lines(periods: Sequence[str], values: Sequence[float], lines: dict[str, Sequence[float]], *,
                       title: str, ylabel: str, name: str, bar_label: str) -> str:
    """Bars per period (e.g. GPU-hours allocated) against step lines of the same unit (e.g. capacity)."""
    fig, ax = _figure(12, 3.8)
    x = list(range(len(periods)))
    ax.bar(x, values, color=COLORS[0], width=0.8, label=bar_label)
    styles = ("-", "--", ":")
    for i, (label, ys) in enumerate(lines.items()):
        ax.stairs(list(ys), [e - 0.5 for e in range(len(periods) + 1)], color=COLORS[3 + i],
                  linestyle=styles[i % len(styles)], linewidth=1.6, label=label, baseline=None)
    step = max(1, len(periods) // 12)
    ax.set_xticks(x[::step], list(periods)[::step], rotation=30 if len(periods) > 6 else 0, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title, loc="left", fontsize=11)
    ax.legend(fontsize=8, frameon=False, ncols=1 + len(lines), loc="upper left", bbox_to_anchor=(0, -0.18))
    return to_svg(fig, name)


def boxes(labels: Sequence[str], stats: Sequence[dict[str, float]], *, title: str, ylabel: str, name: str,
          notes: Sequence[str] = ()) -> str:
    """Box plots from percentiles computed in SQL (p10, p25, p50, p75, p90 per box: whiskers at p10/p90)."""
    fig, ax = _figure()
    ax.bxp([{"label": lab, "whislo": s["p10"], "q1": s["p25"], "med": s["p50"], "q3": s["p75"], "whishi": s["p90"],
             "fliers": []} for lab, s in zip(labels, stats, strict=True)],
           showfliers=False, patch_artist=True, boxprops={"facecolor": "#c6dbef", "edgecolor": COLORS[0]},
           medianprops={"color": COLORS[3], "linewidth": 2})
    for i, note in enumerate(notes, start=1):
        ax.annotate(note, (i, 1), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize=11, pad=16 if notes else 6)
    return to_svg(fig, name)


def heatmap(rows: Sequence[str], columns: Sequence[str], values, *, title: str, label: str, name: str) -> str:
    """A rows x columns matrix (NaN = nothing known: drawn grey, not as 0) with a colour bar."""
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.16 * max(8, len(rows))), dpi=96)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#e6e6e6")
    image = ax.imshow(np.ma.masked_invalid(np.asarray(values, dtype=float)), aspect="auto", cmap=cmap,
                      interpolation="nearest")
    step = max(1, len(columns) // 12)
    ax.set_xticks(range(0, len(columns), step), list(columns)[::step], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=7 if len(rows) > 30 else 8)
    fig.colorbar(image, ax=ax, label=label, fraction=0.04, pad=0.02)
    ax.set_title(title, loc="left", fontsize=11)
    return to_svg(fig, name)


def grouped_bars(labels: Sequence[str], series: dict[str, Sequence[float]], *, title: str, ylabel: str,
                 name: str, fmt: str = "{:.1f}") -> str:
    """Side-by-side bars per label, one per series (e.g. p50 and p90 queue wait per partition), values on top."""
    fig, ax = _figure()
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        x = [k + (i - (len(series) - 1) / 2) * width for k in range(len(labels))]
        drawn = ax.bar(x, values, width=width, label=label, color=COLORS[i % len(COLORS)])
        ax.bar_label(drawn, labels=[fmt.format(v) for v in values], fontsize=7, padding=2)
    ax.margins(y=0.12)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    ax.set_title(title, loc="left", fontsize=11)
    return to_svg(fig, name)
