"""Durable spool: one JSON file per record, written so that a crash never leaves a half-written record.

Write: temporary file in the same directory, fsync, atomic rename, fsync of the directory. Readers only look at
`*.json`; temporary files start with `.`. Malformed records move to `quarantine/` with a `.reason` file; nothing
is ever deleted except by ingest, after the store committed it.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing or pathlib costs the jobcomp hook ms per job
if TYPE_CHECKING:
    from pathlib import Path


def write(spool_dir: str | Path, name: str, data: dict) -> str:
    d = os.fspath(spool_dir)
    os.makedirs(d, exist_ok=True)
    final = os.path.join(d, f"{name}.json")
    tmp = os.path.join(d, f".{name}.{os.getpid()}.tmp")
    payload = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    try:
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, final)
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return final


def pending(spool_dir: str | Path) -> list[Path]:
    from pathlib import Path

    d = Path(spool_dir)
    return sorted(p for p in d.glob("*.json") if p.is_file()) if d.is_dir() else []


def quarantine(path: Path, reason: str) -> Path:
    qdir = path.parent / "quarantine"
    qdir.mkdir(exist_ok=True)
    dest = qdir / path.name
    (qdir / f"{path.name}.reason").write_text(reason + "\n")
    os.replace(path, dest)
    return dest
