"""Validated job specs and site configs for `sk render`/`sk submit`, remembered per user by what they came from.

Validation is a pure function of the file's name and bytes, the `--set` overrides, slurmkit's model code and
pydantic, so its result can be reused while none of these change. What is kept is a plain copy of the validated
model (modeldata.py), so a repeated `sk render` or `sk submit` of the same spec on the same site imports neither
pydantic nor PyYAML: about 100 ms of a cold start. The key holds the file's bytes, not its mtime, so an edit is
always seen. Only successes are stored: a failure is recomputed, so its message is always current. Entries are
pickles in a private directory (usercache.py); one that cannot be read is a miss.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from slurmkit import __version__
from slurmkit.config.userdirs import cache_dir

MAX_ENTRIES = 512  # each distinct spec (or --set) adds one (a few KiB); the least recently used go first
_TOUCH_AFTER_S = 3600  # a hit marks its entry used (mtime) at most this often: no write on every render
# The modules whose code decides what a valid spec or site config is, and what its copy holds.
_MODEL_CODE = ("config/strict.py", "spec.py", "site/model.py", "config/units.py", "config/source.py",
               "config/modeldata.py", "config/cache.py")


@functools.cache
def _code_version() -> bytes:
    package = Path(__file__).parents[1]
    files = [package / name for name in _MODEL_CODE]
    for lib in ("pydantic", "pydantic_core"):  # located, not imported: importing pydantic is what we avoid
        with contextlib.suppress(ImportError, ValueError):
            spec = find_spec(lib)
            files += [Path(spec.origin)] if spec and spec.origin else []
    parts = [__version__, sys.version]
    for f in files:
        try:
            st = os.stat(f)  # a development checkout, or an upgrade, changes these
            parts.append(f"{f} {st.st_mtime_ns} {st.st_size}")
        except OSError:
            parts.append(f"{f} unknown")
    return "\n".join(parts).encode()


def key(kind: str, *parts: str | bytes) -> str:
    """The entry name for a `kind` ("spec", "site") of result made from `parts` by the current code."""
    h = hashlib.sha256(_code_version())
    for part in (kind, *parts):
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def get(entry: str) -> Any | None:
    """The remembered result, or None."""
    d = cache_dir("validated")
    if d is None:
        return None
    try:
        with open(d / entry, "rb") as f:
            value = pickle.load(f)
            if time.time() - os.fstat(f.fileno()).st_mtime > _TOUCH_AFTER_S:
                os.utime(f.fileno())
            return value
    except Exception:  # missing, truncated, or written by code that no longer unpickles: recompute
        return None


def put(entry: str, value: Any) -> None:
    """Remember a result (atomically: readers never see a half-written entry); failures are ignored."""
    d = cache_dir("validated")
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
