"""docs/architecture.md says what adding a launcher, a fabric, a report column or a metric source takes, as a
"Files:" line per section: every path named there exists, so the list follows the tree when files move."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "architecture.md").read_text()
SECTIONS = ("Adding a launcher", "Adding a fabric", "Adding a per-GPU report column", "Adding a metric source")


def files_line(heading: str) -> str:
    body = re.split(rf"^#+ {re.escape(heading)}\n", DOC, flags=re.M)[1]
    match = re.search(r"^Files: (.*?)(?:\n\n|\n(?=\d\.))", body, flags=re.S | re.M)
    assert match, f"{heading}: no 'Files:' line"
    return match.group(1)


@pytest.mark.parametrize("heading", SECTIONS)
def test_every_file_an_extension_takes_exists(heading):
    paths = re.findall(r"`([\w.-]+/[\w./-]*)`", files_line(heading))
    assert paths, heading
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"{heading}: {missing} named in docs/architecture.md but not in the tree"
