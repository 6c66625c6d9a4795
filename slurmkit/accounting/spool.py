"""Durable spool: one JSON file per record, written so that a crash never leaves a half-written record.

Write: temporary file in the same directory, fsync, atomic rename, fsync of the directory. Readers only look at
`*.json`; temporary files start with `.`. Malformed records move to `quarantine/` with a `.reason` file; nothing
is ever deleted except by ingest, after the store committed it.
"""

from __future__ import annotations

import os
import stat as _stat

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing or pathlib costs the jobcomp hook ms per job
if TYPE_CHECKING:
    from pathlib import Path

# JSON of a flat record without the json module: `import json` (and the `re` it imports) is ~13 ms of the
# jobcomp hook's ~40 under python -S, paid for every job, one job at a time. The output is byte for byte what
# json.dumps(data, sort_keys=True, separators=(",", ":")) writes (tests/test_jobcomp.py compares them); anything
# but str/int/bool/None values (a node record's GPU list) goes to json.dumps itself.
_ESCAPE = {**{i: f"\\u{i:04x}" for i in (*range(0x20), 0x7F)}, ord("\\"): "\\\\", ord('"'): '\\"', ord("\b"): "\\b",
           ord("\f"): "\\f", ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"}


def _non_ascii(c: str) -> str:
    o = ord(c)
    if o < 0x80:
        return c
    if o > 0xFFFF:  # a surrogate pair, as json.dumps writes it
        o -= 0x10000
        return f"\\u{0xD800 | (o >> 10):04x}\\u{0xDC00 | (o & 0x3FF):04x}"
    return f"\\u{o:04x}"


def _string(s: str) -> str:
    s = s.translate(_ESCAPE)
    return '"' + (s if s.isascii() else "".join(map(_non_ascii, s))) + '"'


def dumps(data: dict) -> str:
    """`data` as compact JSON with sorted keys (json.dumps for anything not flat)."""
    if not all(type(k) is str and (v is None or type(v) in (str, int, bool)) for k, v in data.items()):
        import json

        return json.dumps(data, sort_keys=True, separators=(",", ":"))
    values = {None: "null", True: "true", False: "false"}
    return "{" + ",".join(
        f"{_string(k)}:{_string(v) if type(v) is str else values[v] if v is None or type(v) is bool else v}"
        for k, v in sorted(data.items())) + "}"


def write(spool_dir: str | Path, name: str, data: dict) -> str:
    d = os.fspath(spool_dir)
    os.makedirs(d, exist_ok=True)
    final = os.path.join(d, f"{name}.json")
    tmp = os.path.join(d, f".{name}.{os.getpid()}.tmp")
    payload = dumps(data).encode()
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


MAX_RECORD = 16 << 20  # bytes of one spool file: a node record of thousands of GPUs is far below


class NotARecord(Exception):
    """A spool entry that is not a record file (a link, a FIFO, a directory, too large): quarantined."""


def read(path: str | Path) -> bytes:
    """The bytes of one spool file, never following a link nor blocking on a FIFO or device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise NotARecord(f"cannot open it ({exc.strerror}; a symbolic link is never followed)") from None
    try:
        st = os.fstat(fd)
        if not _stat.S_ISREG(st.st_mode):
            raise NotARecord("not a regular file")
        if st.st_size > MAX_RECORD:
            raise NotARecord(f"{st.st_size} bytes, more than a record can be ({MAX_RECORD})")
        chunks, left = [], MAX_RECORD + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise NotARecord(f"more than a record can be ({MAX_RECORD} bytes)")
        return b"".join(chunks)
    finally:
        os.close(fd)


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
