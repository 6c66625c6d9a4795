"""Output formats: table (terminal), csv, json, parquet, markdown, html. Text formats carry the notes and
definitions with the numbers; csv/parquet carry only the numbers (plus a `#` header in csv) for tools.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import textwrap
from pathlib import Path
from typing import Any

from slurmkit.errors import InputError, Problem
from slurmkit.quoting import for_terminal
from slurmkit.report.build import COUNTS, Report, simulated
from slurmkit.report.figures import BY_COLUMN, NARROW_DROPS

FORMATS = ("table", "csv", "json", "parquet", "markdown", "html")
BINARY = ("parquet", "html")
WHOLE = {*COUNTS, "idle_gpus_in_multi"}  # counts, printed without decimals


def _cells(values: list[Any], column: str) -> list[str]:
    """A column's values as printed: one loop per column (pandas' iterrows built a Series per row: 11 s of a
    year of users x days), each distinct name made terminal-safe once."""
    number = "{:.1f}".format if column.endswith("_pct") else "{:.2f}".format
    whole = column in WHOLE
    names: dict[str, str] = {}
    out = []
    for value in values:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            out.append("-")
        elif isinstance(value, float):
            # a count summed as float (pandas) is still a count
            out.append(str(int(value)) if whole and value.is_integer() else number(value))
        elif type(value) is str:  # users' names reach an admin's terminal: no control characters
            text = names.get(value)
            if text is None:
                text = names[value] = for_terminal(value)
            out.append(text)
        else:
            out.append(for_terminal(value))
    return out


def _cell(value: Any, column: str) -> str:
    return _cells([value], column)[0]


def _rows(report: Report) -> tuple[list[str], list[list[str]]]:
    cols = [*report.group_columns, *report.columns]
    headers = [BY_COLUMN[c].label if c in BY_COLUMN else c for c in cols]
    table = report.table
    rows = [list(r) for r in zip(*(_cells(table[c].tolist(), c) for c in cols), strict=True)] if len(table) else []
    if len(table) > 1:  # one row is its own total (a report "by total" printed it twice)
        total = ["TOTAL", *[""] * (len(report.group_columns) - 1)] if report.group_columns else []
        rows.append(total + [_cell(report.totals.get(c), c) for c in report.columns])
    return headers, rows


def _widths(headers: list[str], rows: list[list[str]]) -> list[int]:
    return [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]


def terminal_width() -> int:
    """The terminal's width, $COLUMNS, or 100 where there is neither (a pipe, a file, CI); never under 60."""
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def fit(report: Report, headers: list[str], rows: list[list[str]], width: int) -> list[str]:
    """Leave out figure columns (figures.NARROW_DROPS, in order) until the table is at most `width` wide, in
    place; returns what it changed, in words. Not when --columns chose them, and never the metric source column
    while rows differ in it (then no single note can say where the numbers came from)."""
    cols = [*report.group_columns, *report.columns]
    widths = _widths(headers, rows)
    dropped: list[str] = []
    shortened: list[str] = []
    for col in NARROW_DROPS:
        if report.columns_chosen or sum(widths) + 2 * (len(widths) - 1) <= width:
            break
        if col not in cols or col in report.group_columns:
            continue
        i = cols.index(col)
        if col == "sources" and len({r[i] for r in rows[:-1] or rows}) > 1:
            continue
        dropped.append(headers[i])
        for seq in (cols, headers, widths, *rows):
            del seq[i]
    # Still too wide: shorten the longest names of the --by columns in the middle (both ends stay, so two
    # similar names stay apart), never below MIN_NAME; csv and json keep them whole.
    while not report.columns_chosen and sum(widths) + 2 * (len(widths) - 1) > width:
        keys = [i for i in range(len(report.group_columns)) if widths[i] > MIN_NAME]
        if not keys:
            break
        i = max(keys, key=lambda k: widths[k])
        widths[i] = max(MIN_NAME, widths[i] - (sum(widths) + 2 * (len(widths) - 1) - width))
        for r in rows:
            r[i] = _elide(r[i], widths[i])
        shortened.append(f"{headers[i]} names shortened to {widths[i]} characters (~ marks the cut)")
    return (["left out " + ", ".join(dropped)] if dropped else []) + shortened


MIN_NAME = 12


def _elide(text: str, n: int) -> str:
    if len(text) <= n:
        return text
    head = (n - 1) // 2
    return text[:head] + "~" + text[len(text) - (n - 1 - head):]


def _text_table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """Names (the first `left` columns) to the left, numbers to the right."""
    widths = _widths(headers, rows)
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.rjust(w) if i >= left else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False)))
            for r in rows]
    return "\n".join(line.rstrip() for line in out)


def _md_table(headers: list[str], rows: list[list[str]]) -> str:
    esc = [h.replace("|", "\\|") for h in headers]
    out = ["| " + " | ".join(esc) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def _idle_jobs_text(report: Report, md: bool) -> str:
    jobs = report.extra.get("jobs")
    if jobs is None or not len(jobs):
        return "no multi-GPU jobs with idle GPUs in this window"
    headers = ["job", "user", "account", "partition", "GPUs", "idle GPUs", "hours", "idle GPU-h", "mean util %"]
    rows = [[_jobref(r), *(for_terminal(r[k]) for k in ("user", "account", "partition")), str(r["gpus"]),
             f"{r['idle_gpus']} of {r['gpus_measured']}", f"{r['hours']:.2f}", f"{r['idle_gpu_hours']:.2f}",
             f"{r['mean_util_pct']:.1f}"] for _, r in jobs.iterrows()]
    return _md_table(headers, rows) if md else _text_table(headers, rows, left=4)  # job and names left


def _jobref(r: Any) -> str:
    ref = str(r["job_id"])
    if r.get("run"):
        ref += f" (run {r['run']})"
    return ref


def title(report: Report) -> str:
    by = ", ".join(report.group_columns) or "total"
    return f"GPU {report.kind} report by {by}"


def render_text(report: Report, fmt: str, width: int | None = None) -> str:
    """The table or Markdown text of `report`; a table fits `width` columns (default: the terminal's)."""
    md = fmt == "markdown"
    if report.empty:
        return report.empty_message()
    headers, rows = _rows(report)
    if md:  # Markdown reflows its prose and scrolls its tables: every column, no wrapping
        parts = [f"# {title(report)}", *("> " + n for n in report.notes), _md_table(headers, rows)]
        if report.kind == "idle":
            parts += ["## Jobs with idle GPUs", _idle_jobs_text(report, md)]
        parts += ["## Definitions", *("- " + d for d in report.definitions)]
        return "\n\n".join(parts)
    width = width or terminal_width()
    changed = fit(report, headers, rows, width)
    notes = [*report.notes]
    if changed:
        notes.append(f"to fit {width} columns: {'; '.join(changed)} (--columns chooses the columns; --format csv "
                     "or json has them all, whole)")
    parts = [title(report), *(textwrap.fill(n, width, subsequent_indent="  ") for n in notes),
             _text_table(headers, rows, left=len(report.group_columns))]
    if report.kind == "idle":
        parts += ["jobs with idle GPUs:", _idle_jobs_text(report, md)]
    parts.append("definitions:")
    parts += [textwrap.fill(d, width, initial_indent="  ", subsequent_indent="    ") for d in report.definitions]
    return "\n".join(parts)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):  # numpy scalar
        return _clean(value.item())
    return value


def _header(report: Report) -> dict[str, Any]:
    return {
        "report": report.kind,
        "since": report.window.fmt(report.window.since), "until": report.window.fmt(report.window.until),
        "since_epoch": report.window.since, "until_epoch": report.window.until, "tz": report.window.tz_name,
        "by": report.keys, "period": report.period,
        "user_scope": report.scope.user or "all",
    }


def _footer(report: Report) -> dict[str, Any]:
    out = {
        "notes": report.notes, "definitions": report.definitions,
        "simulated_metrics": simulated(report.totals),
        "data_source": "slurm-accounting (allocation only)" if report.source == "sacct" else "accounting-store",
        "empty": report.empty,
    }
    if report.empty:
        out["message"] = report.empty_message()
    if "freshness" in report.extra:
        out["freshness"] = report.extra["freshness"]
    return out


def metadata(report: Report) -> dict[str, Any]:
    """What a table means (window, zone, scope, definitions, sources, notes): JSON's header, the CSV's sidecar
    file and the Parquet file's schema metadata, so no file loses it."""
    cols = [*report.group_columns, *report.columns]
    return {**_header(report), **_footer(report),
            "columns": {c: BY_COLUMN[c].label if c in BY_COLUMN else c for c in cols}}


def as_dict(report: Report) -> dict[str, Any]:
    cols = [*report.group_columns, *report.columns]
    rows = [{c: _clean(v) for c, v in r.items()} for r in report.table[cols].to_dict("records")]
    out = {**_header(report), "rows": rows, "totals": {c: _clean(report.totals.get(c)) for c in report.columns},
           **_footer(report)}
    if "jobs" in report.extra:
        out["idle_jobs"] = [{k: _clean(v) for k, v in r.items()} for r in report.extra["jobs"].to_dict("records")]
    return out


def write(report: Report, fmt: str, output: str | None, *, html_builder=None) -> str | None:
    """Write the report; returns the text for the terminal (None when written to a file)."""
    try:
        return _write(report, fmt, output, html_builder)
    except OSError as exc:
        raise InputError(Problem(f"cannot write the report to {output}: {exc.strerror or exc}", key="-o",
                                 hint="give a path in a directory you can write to")) from exc


def _write(report: Report, fmt: str, output: str | None, html_builder) -> str | None:
    if fmt not in FORMATS:
        raise InputError(Problem(f"unknown format {fmt!r}", key="--format", hint=f"one of {', '.join(FORMATS)}"))
    if fmt in BINARY and not output:
        raise InputError(Problem(f"--format {fmt} writes a file: give -o FILE", key="-o",
                                 hint=f"e.g. -o report.{fmt}"))
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = [*report.group_columns, *report.columns]
        table = pa.Table.from_pandas(report.table[cols], preserve_index=False)
        meta = {**(table.schema.metadata or {}), b"slurmkit": json.dumps(metadata(report), default=str).encode()}
        pq.write_table(table.replace_schema_metadata(meta), output)
        return None
    if fmt == "html":
        assert html_builder is not None
        Path(output).write_text(html_builder(report), encoding="utf-8")
        return None
    if fmt == "json":
        text = json.dumps(as_dict(report), indent=2, default=str)
    elif fmt == "csv":
        # Plain CSV that pandas.read_csv and spreadsheets open as is; what it means goes beside it (FILE.meta.json)
        # or, on a terminal, to stderr.
        cols = [*report.group_columns, *report.columns]
        text = report.table[cols].to_csv(index=False, float_format="%.6g")
        if output:
            Path(f"{output}.meta.json").write_text(json.dumps(metadata(report), indent=2, default=str) + "\n",
                                                   encoding="utf-8")
        else:
            sys.stderr.write("".join(f"# {n}\n" for n in report.notes))
    else:
        text = render_text(report, fmt)
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        return None
    return text

