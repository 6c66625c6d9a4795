"""mkdocs hook for the project's own docs (mkdocs.yml at the repository root): the site-config reference in
docs/site-config.md is generated from the Site model, like the job-spec reference of a site guide, so the guide
to writing a site config cannot drift from the loader that checks it.
"""

from __future__ import annotations

from typing import Any

import yaml

from slurmkit.resources import data_dir

MARKER = "<!-- sk:site-config-reference -->"
EXAMPLE_SITE = data_dir("site_config") / "dgx-a100.yaml"


def _examples(data: Any, prefix: str = "") -> dict[str, tuple[Any, str | None]]:
    """Dotted key -> (value, file) from a site config, with node type/partition names written as NAME."""
    out: dict[str, tuple[Any, str | None]] = {}
    if not isinstance(data, dict):
        return out
    for k, v in data.items():
        key = f"{prefix}{k}"
        out.setdefault(key, (v, EXAMPLE_SITE.name))
        if k in ("node_types", "partitions") and not prefix and isinstance(v, dict):
            first = next(iter(v.values()), None)
            out.update(_examples(first, f"{k}.NAME."))
        elif isinstance(v, dict) and k != "nccl_env":
            out.update(_examples(v, key + "."))
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            out.update(_examples(v[0], key + "."))
    return out


def reference_markdown() -> str:
    from slurmkit.docs.build import _env
    from slurmkit.docs.schema import model_docs
    from slurmkit.site.model import NodeType, Partition, Site

    ex = _examples(yaml.safe_load(EXAMPLE_SITE.read_text()))
    models = [*model_docs(Site, ex, title="Top-level keys"),
              *model_docs(NodeType, ex, key="node_types.NAME"),
              *model_docs(Partition, ex, key="partitions.NAME")]
    return _env().get_template("_model_table.md.j2").render(models=models)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, reference_markdown())
    return markdown
