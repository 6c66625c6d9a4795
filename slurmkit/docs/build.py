"""`sk docs build`: a site's user guide, generated from its site config by the code that builds its jobs.

Layout written under the output directory:
  mkdocs.yml        (material theme, offline: no web fonts, no CDN; rebuild with `mkdocs build`)
  docs/*.md         the pages (Jinja2 templates in slurmkit/docs/templates/ filled from the site, the schema,
                    the planner, the renderer and the validators)
  docs/examples/    each example's YAML and rendered script, downloadable
  site/             the HTML (unless --no-html)
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from slurmkit import __version__
from slurmkit.config.source import load
from slurmkit.docs import examples as ex_mod
from slurmkit.docs import gpu_use, report_samples, schema, topology, troubleshoot, why
from slurmkit.docs.html import SHIM, SHIM_TARGET, build_html, external_assets
from slurmkit.errors import InputError, Problem, SlurmkitError
from slurmkit.launchers import all_launchers
from slurmkit.site.model import Site, load_site
from slurmkit.spec import JobSpec

TEMPLATES = Path(__file__).resolve().parent / "templates"

USER_COMMANDS = [["submit"], ["validate"], ["render"], ["status"], ["logs"], ["wait"], ["cancel"], ["history"],
                 ["templates"]]
ADMIN_COMMANDS = [["admin", "ingest"], ["report", "usage"], ["report", "efficiency"], ["report", "idle"],
                  ["report", "top"], ["report", "occupancy"], ["report", "job"]]


@dataclass
class GuideResult:
    out_dir: Path
    pages: list[str] = field(default_factory=list)
    skipped_examples: dict[str, str] = field(default_factory=dict)
    html_dir: Path | None = None


def cell(value: Any) -> str:
    """Text for a Markdown table cell: no raw HTML, no column breaks, no line breaks."""
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ")


def text(value: Any) -> str:
    """Free text from a config (descriptions): no raw HTML."""
    return ("" if value is None else str(value)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def code(value: Any) -> str:
    """Inline code that survives backticks in the value."""
    s = str(value)
    ticks = "`" * (max((len(r) for r in s.split("`")[1::2]), default=0) + 1) if "`" in s else "`"
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def fence(body: str, lang: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside `body`."""
    longest, run = 0, 0
    for ch in body:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    f = "`" * max(3, longest + 1)
    return f"{f}{lang}\n{body if body.endswith(chr(10)) else body + chr(10)}{f}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters.update(cell=cell, text=text, code=code, fence=fence)
    return env


def _train_spec(site: Site, extra: str = "") -> tuple[str, str, Any, str]:
    """A train.yaml (plus `extra` keys) that fits this site's default partition: (partition, text, plan, script)."""
    from slurmkit.config.source import loads
    from slurmkit.plan import make_plan
    from slurmkit.render import render
    from slurmkit.spec import spec_from_source

    pname = site.default_partition or next(iter(site.partitions))
    part, nt = site.partitions[pname], site.node_type_of(pname)
    nodes = 2 if min(part.max_nodes or part.nodes, part.nodes) >= 2 else 1
    text = (f"name: train\nlauncher: torchrun\nnodes: {nodes}\ngpus_per_node: {nt.gpu.count}\n"
            f'time: "{part.default_time}"\ncommand: [train.py, --epochs, "10"]\n{extra}')
    src = loads(text, "train.yaml")
    plan = make_plan(spec_from_source(src), site, src)
    return pname, text, plan, render(plan)


def _quickstart(site: Site) -> tuple[str, str]:
    """A train.yaml that fits this site's default partition, and the #SBATCH lines it renders to."""
    _, text, _, script = _train_spec(site)
    header = "".join(line + "\n" for line in script.splitlines() if line.startswith(("#!", "#SBATCH")))
    return text, header


LONG_JOB_PREEMPT = "preempt: {signal: USR1, grace: 300, requeue: true, max_restarts: 5}\n"
HANDLER = Path(__file__).resolve().parent / "snippets" / "checkpoint_handler.py"


def _long_jobs(site: Site) -> dict[str, Any]:
    """The long-jobs page: a train.yaml with `preempt:`, and its script from the trap to the end (the step)."""
    pname, text, plan, script = _train_spec(site, LONG_JOB_PREEMPT)
    lines = script.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("# Time limit / preemption"))
    return {"spec_text": text, "script_part": "".join(lines[first:]), "preempt": plan.spec.preempt,
            "watchdog": plan.spec.preempt.requeue_after,
            # every launcher whose agent would die of the signal (the page's example is one of them)
            "agents": [la for la in all_launchers() if la.agent_ignores(plan.spec.preempt.signal)],
            "part_name": pname, "part": site.partitions[pname], "handler": HANDLER.read_text(encoding="utf-8")}


def _nav(site: Site, examples: list[ex_mod.Example]) -> list[Any]:
    return [
        {"Cluster overview": "index.md"},
        {"Quickstart": "quickstart.md"},
        {"Job spec reference": "job-spec.md"},
        {"Commands": "commands.md"},
        {"Worked examples": ["examples/index.md",
                             *[{e.name: f"examples/{e.name}.md"} for e in examples if e.script is not None]]},
        {"Why these settings": [item for name in site.node_types for item in (
            {f"{name}: binding": f"why/{name}-binding.md"}, {f"{name}: NCCL": f"why/{name}-nccl.md"})]},
        {"Long jobs: checkpoint and requeue": "long-jobs.md"},
        {"Is my job using its GPUs?": "gpu-use.md"},
        {"Troubleshooting": "troubleshooting.md"},
        {"For admins": [{"Installing the hooks": "admin/hooks.md"}, {"Reports": "admin/reports.md"}]},
    ]


def mkdocs_config(site: Site, nav: list[Any]) -> dict[str, Any]:
    return {
        "site_name": f"GPU jobs on {site.cluster}",
        "site_description": f"User guide for {site.cluster}, generated by slurmkit {__version__} from its site "
                            "config",
        "docs_dir": "docs", "site_dir": "site",
        "use_directory_urls": False,  # pages open from the file system (file://) too
        "theme": {"name": "material", "font": False,  # no Google Fonts: the guide works without a network
                  "features": ["content.code.copy", "navigation.sections", "navigation.top"]},
        "plugins": ["search", "offline"],
        # The offline plugin would add this shim from unpkg.com; a local copy keeps the build free of CDNs.
        "extra": {"polyfills": [SHIM_TARGET], "generator": False},
        "markdown_extensions": ["admonition", "attr_list", "md_in_html", "tables", {"toc": {"permalink": True}},
                                "pymdownx.highlight", "pymdownx.superfences", "pymdownx.details"],
        "validation": {"links": {"absolute_links": "warn", "unrecognized_links": "warn", "anchors": "warn"}},
        "nav": nav,
    }


MARKER = ".slurmkit-guide"  # in DIR/docs; mkdocs skips dot files
CONFIG_HEADER = "# Generated by `sk docs build`"


def _check_ours(out: Path) -> None:
    """Refuse to replace a docs/ or mkdocs.yml that an earlier `sk docs build` did not write (e.g. `-o .` in a
    project that has its own docs)."""
    docs, config = out / "docs", out / "mkdocs.yml"
    foreign = []
    if docs.exists() and not (docs / MARKER).is_file():
        foreign.append(str(docs))
    if config.exists() and not config.read_text(errors="replace").startswith(CONFIG_HEADER):
        foreign.append(str(config))
    if foreign:
        raise InputError(Problem(f"{' and '.join(foreign)} exist and were not written by sk docs build; "
                                 "they would be replaced", file=str(out),
                                 hint="choose an empty or new output directory with -o"))


def build_guide(site_path: str | Path, out_dir: str | Path, html: bool = True,
                examples_dir: Path | None = None, *, command_help: Callable[[list[str]], str],
                command_output: Callable[[list[str]], str]) -> GuideResult:
    """Write the guide for the site config at `site_path` into `out_dir`; build the HTML unless `html` is False.
    `command_help(["submit"])` is `sk submit --help` and `command_output(argv)` what `sk <argv>` prints
    (slurmkit.cli.docs: passed in, so that the docs do not import the CLI that runs them)."""
    site = load_site(site_path)
    out = Path(out_dir)
    docs = out / "docs"
    _check_ours(out)
    if docs.exists():
        shutil.rmtree(docs)  # pages of node types or examples that no longer exist must not linger
    (docs / "examples").mkdir(parents=True)
    (docs / "why").mkdir()
    (docs / "admin").mkdir()
    result = GuideResult(out)
    env = _env()

    ex_dir = examples_dir or ex_mod.EXAMPLES_DIR
    examples = ex_mod.build_examples(site, ex_dir)
    files = ex_mod.example_files(ex_dir)
    common = {"site": site, "version": __version__, "site_file": Path(site_path).name,
              "examples": examples}

    def page(template: str, target: str, **ctx: Any) -> None:
        (docs / target).write_text(env.get_template(template).render(**common, **ctx), encoding="utf-8")
        result.pages.append(target)

    page("index.md.j2", "index.md",
         figures={name: topology.svg(name, nt) for name, nt in site.node_types.items()})
    qs_spec, qs_header = _quickstart(site)
    page("quickstart.md.j2", "quickstart.md", spec_text=qs_spec, header=qs_header)
    page("job-spec.md.j2", "job-spec.md",
         models=schema.model_docs(JobSpec, schema.spec_examples(files, JobSpec), title="Top-level keys"))
    page("long-jobs.md.j2", "long-jobs.md", **_long_jobs(site))
    page("gpu-use.md.j2", "gpu-use.md", ex=gpu_use.example(site))
    page("commands.md.j2", "commands.md", helps=[(" ".join(p), command_help(p)) for p in USER_COMMANDS])
    for e in examples:
        if e.script is None:
            assert e.skipped is not None
            result.skipped_examples[e.name] = e.skipped
            continue
        (docs / "examples" / f"{e.name}.yaml").write_text(e.text, encoding="utf-8")
        (docs / "examples" / f"{e.name}.sh").write_text(e.script, encoding="utf-8")
        page("example.md.j2", f"examples/{e.name}.md", ex=e)
    page("examples-index.md.j2", "examples/index.md")
    for name in site.node_types:
        w = why.explain(site, name)
        page("why-binding.md.j2", f"why/{name}-binding.md", why=w, sources=why.SOURCES)
        misnamed, debugging = why.lint_tables()
        page("why-nccl.md.j2", f"why/{name}-nccl.md", why=w, sources=why.SOURCES, misnamed=misnamed,
             debugging=debugging)
    site_data = load(site_path).data
    page("troubleshooting.md.j2", "troubleshooting.md", cases=troubleshoot.spec_cases(site),
         site_cases=troubleshoot.site_cases(site, site_data), spec_file=troubleshoot.SPEC_FILE)
    page("admin-hooks.md.j2", "admin/hooks.md", acct=site.accounting)
    page("admin-reports.md.j2", "admin/reports.md", acct=site.accounting,
         helps=[(" ".join(p), command_help(p)) for p in ADMIN_COMMANDS],
         samples=report_samples.samples(site, command_output),
         sample_window=(report_samples.SINCE, report_samples.UNTIL), sample_jobs=len(report_samples.JOBS),
         sample_nodes=report_samples.SAMPLE_NODES, sample_drained=report_samples.DRAINED_HOURS)

    (docs / MARKER).write_text("written by `sk docs build`; the directory is replaced on the next build\n")
    shim = docs / SHIM_TARGET
    shim.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SHIM, shim)
    config = out / "mkdocs.yml"
    config.write_text(f"{CONFIG_HEADER}; rebuild the HTML with `mkdocs build --strict` here.\n"
                      + yaml.safe_dump(mkdocs_config(site, _nav(site, examples)), sort_keys=False),
                      encoding="utf-8")
    if html:
        build_html(config)
        result.html_dir = out / "site"
        remote = external_assets(result.html_dir)
        if remote:
            raise SlurmkitError("docs: the built guide would load assets from the network: " + "; ".join(remote))
    return result
