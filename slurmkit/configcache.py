"""Validated job specs and site configs, remembered per user and keyed by what they were made from.

Validation is a pure function of the file's name and bytes, the `--set` overrides, slurmkit's model code and
pydantic, so a result can be reused while none of these change. In a fresh `sk` process the first validation
costs ~25 ms of fixed pydantic work (building the validators; pydantic's plugin lookup imports
importlib.metadata and scans every installed package), far more than any file; a repeated `sk render` or
`sk submit` of the same spec on the same site skips it, and also skips PyYAML. The key holds the file's bytes,
not its mtime, so an edit is always seen. Only successes are stored: a failure is recomputed, so its message is
always current. Entries are pickles in a private directory (slurmkit.usercache); one that cannot be read is a
miss.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

from slurmkit import __version__
from slurmkit.usercache import cache_dir

MAX_ENTRIES = 256  # each distinct spec (or --set) adds one; the oldest go first
# The modules whose code decides what a valid spec or site config is (and what validating it returns).
_MODEL_CODE = ("models.py", "spec.py", "site.py", "units.py", "yamlsrc.py")


@functools.cache
def _code_version() -> bytes:
    import pydantic
    import pydantic_core

    here = Path(__file__).parent
    parts = [__version__, sys.version, pydantic.VERSION, pydantic_core.__version__]
    for name in _MODEL_CODE:
        st = os.stat(here / name)  # a development checkout changes these without a version bump
        parts.append(f"{name} {st.st_mtime_ns} {st.st_size}")
    return "\n".join(parts).encode()


def key(kind: str, *parts: str | bytes) -> str:
    """The entry name for a `kind` ("spec", "site") of result made from `parts` by the current code."""
    h = hashlib.sha256(_code_version())
    for part in (kind, *parts):
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def _dir() -> Path | None:
    return cache_dir("validated")


def get(entry: str) -> Any | None:
    """The remembered result, or None."""
    d = _dir()
    if d is None:
        return None
    try:
        with open(d / entry, "rb") as f:
            return pickle.load(f)
    except Exception:  # missing, truncated, or written by code that no longer unpickles: recompute
        return None


def put(entry: str, value: Any) -> None:
    """Remember a result (atomically: readers never see a half-written entry); failures are ignored."""
    d = _dir()
    if d is None:
        return
    with contextlib.suppress(Exception):
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, d / entry)
        except BaseException:
            os.unlink(tmp)
            raise
        _prune(d)


def _prune(d: Path) -> None:
    entries = [e for e in os.scandir(d) if e.is_file() and not e.name.startswith(".tmp-")]
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(key=lambda e: e.stat().st_mtime_ns)
    for e in entries[: len(entries) - MAX_ENTRIES * 3 // 4]:
        with contextlib.suppress(OSError):
            os.unlink(e.path)
