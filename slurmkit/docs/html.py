"""Markdown -> HTML with mkdocs (material theme), strict, and the check that the result needs no network.

mkdocs is called through its Python API (mkdocs.config.load_config + mkdocs.commands.build.build) so one
process builds the guide; its warnings are collected and, in strict mode, turned into one SlurmkitError that
lists them (a broken link in a generated page is a bug, never a shrug).
"""

from __future__ import annotations

import logging
import re
from html.parser import HTMLParser
from pathlib import Path

from slurmkit.errors import SlurmkitError

# iframe-worker shim (MIT, by Material's author, 1.4 kB): lets the search worker run from file:// pages. The
# material `offline` plugin would otherwise add it from unpkg.com, the one external asset of an offline build.
SHIM = Path(__file__).resolve().parent / "assets" / "iframe-worker-shim.js"
SHIM_TARGET = "assets/javascripts/iframe-worker-shim.js"


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def build_html(config_file: Path, site_dir: Path | None = None, strict: bool = True) -> None:
    """Build the site described by `config_file` (mkdocs.yml); warnings are errors when `strict`."""
    try:
        import material  # noqa: F401  (the theme; mkdocs alone would fail later with a less helpful message)
        from mkdocs.commands.build import build
        from mkdocs.config import load_config
        from mkdocs.exceptions import MkDocsException
    except ImportError as exc:
        raise SlurmkitError(f"building HTML needs mkdocs-material ({exc.name} is not installed)",
                            hint="pip install 'slurmkit[docs]', or pass --no-html for the Markdown only") from exc

    handler = _Collect()
    log = logging.getLogger("mkdocs")
    log.addHandler(handler)
    try:
        overrides = {"site_dir": str(site_dir)} if site_dir else {}
        config = load_config(config_file=str(config_file), strict=strict, **overrides)
        build(config)
    except MkDocsException as exc:
        detail = "; ".join(handler.messages) or str(exc)
        raise SlurmkitError(f"mkdocs could not build {config_file}: {detail}") from exc
    finally:
        log.removeHandler(handler)


class _Assets(HTMLParser):
    """Every URL a browser would fetch by itself: script/img/iframe/source src, link href, inline CSS url()."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed") and a.get("src"):
            self.urls.append(a["src"] or "")
        if tag == "link" and a.get("href"):
            self.urls.append(a["href"] or "")
        if a.get("style"):
            self.urls.extend(_CSS_URL.findall(a["style"] or ""))


_CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)""")
_EXTERNAL = re.compile(r"^(https?:)?//", re.IGNORECASE)


def external_assets(site_dir: Path) -> list[str]:
    """'file: url' for each asset of the built site that would be fetched from another host."""
    found = []
    for page in sorted(site_dir.rglob("*.html")):
        parser = _Assets()
        parser.feed(page.read_text(encoding="utf-8"))
        found += [f"{page.relative_to(site_dir)}: {u}" for u in parser.urls if _EXTERNAL.match(u)]
    for css in sorted(site_dir.rglob("*.css")):
        found += [f"{css.relative_to(site_dir)}: {u}" for u in _CSS_URL.findall(css.read_text(encoding="utf-8"))
                  if _EXTERNAL.match(u)]
    return found
