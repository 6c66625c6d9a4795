"""Load YAML files keeping the line of every key, so errors can point at `file:line: key.path`.

Also refuses, with a clear message, what is not a YAML mapping: empty, huge, binary or malformed files.
PyYAML is imported only when text is parsed: a spec or site config remembered by slurmkit.config.cache is not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slurmkit.errors import InputError, Problem

MAX_BYTES = 1 << 20  # a job spec or site config larger than 1 MiB is a mistake, not a config

KeyPath = tuple[str | int, ...]
_SEXAGESIMAL_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")

if TYPE_CHECKING:
    import yaml


def _loader_class() -> type[yaml.SafeLoader]:
    import yaml

    # libyaml's C loader is several times faster; fall back to the pure-Python one
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Source:
    """A parsed YAML document plus where each key came from."""

    data: dict[str, Any]
    file: str
    lines: dict[KeyPath, int] = field(default_factory=dict)
    # Keys a `--set key=value` replaced -> that argument: a problem there names it, not a line of the file.
    overridden: dict[KeyPath, str] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> int | None:
        """Line of `path`, or of its nearest parent that we know."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def problem(self, path: KeyPath, message: str, hint: str | None = None, severity: str = "error") -> Problem:
        path = tuple(path)
        for n in range(len(path), 0, -1):
            if path[:n] in self.overridden:
                return Problem(message, file=f"--set {self.overridden[path[:n]]}", key=dotted(path) or None,
                               hint=hint, severity=severity)
        return Problem(
            message, file=self.file, key=dotted(path) or None, line=self.line_of(path), hint=hint,
            severity=severity,
        )


def dotted(path: KeyPath) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


MAX_VALUES = 100_000  # values in a document after aliases and merge keys are expanded (a spec has < 1000)
MAX_DEPTH = 64  # nesting of mappings and lists
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class _Walk:
    """Bounds for one document: aliases share nodes, so a small file can expand exponentially ("billion
    laughs"); counting values as they are built stops that, and `active` catches an alias inside itself."""

    lines: dict[KeyPath, int]
    values: int = 0
    active: set[int] = field(default_factory=set)


def _construct(node: yaml.Node, loader: yaml.Loader, path: KeyPath, walk: _Walk, depth: int = 0) -> Any:
    import yaml

    walk.values += 1
    line = node.start_mark.line + 1
    if walk.values > MAX_VALUES:
        raise InputError(Problem(f"the document expands to more than {MAX_VALUES} values (through YAML aliases?)",
                                 key=dotted(path) or None, line=line,
                                 hint="a job spec or site config needs far fewer; remove the repeated aliases"))
    if depth > MAX_DEPTH:
        raise InputError(Problem(f"nested more than {MAX_DEPTH} levels deep", key=dotted(path) or None, line=line))
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if id(node) in walk.active:
            raise InputError(Problem("a YAML alias refers to the mapping or list that contains it",
                                     key=dotted(path) or None, line=line))
        walk.active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return _mapping(node, loader, path, walk, depth)
            items = []
            for i, child in enumerate(node.value):
                walk.lines[(*path, i)] = child.start_mark.line + 1
                items.append(_construct(child, loader, (*path, i), walk, depth + 1))
            return items
        finally:
            walk.active.discard(id(node))
    if node.tag in _SEXAGESIMAL_TAGS and ":" in node.value:
        # YAML 1.1 reads an unquoted `time: 12:00:00` as the base-60 integer 43200 (YAML 1.2 dropped that);
        # keep what the user wrote, so Slurm times need no quotes.
        return node.value
    try:
        return loader.construct_object(node, deep=True)
    except (ValueError, OverflowError) as exc:  # e.g. an integer of 5000 digits, a timestamp 2024-13-45
        raise InputError(Problem(f"cannot read the value {node.value[:40]!r}: {exc}", key=dotted(path) or None,
                                 line=line, hint="quote it to keep it as text")) from None


def _mapping(node: yaml.MappingNode, loader: yaml.Loader, path: KeyPath, walk: _Walk, depth: int) -> dict:
    """A mapping; YAML merge keys (`<<: *defaults`) add the keys the mapping does not set itself, as PyYAML's
    flatten_mapping would (the first of several merged mappings wins), but through the same bounded walk."""
    import yaml

    out: dict[str, Any] = {}
    merged: list[yaml.Node] = []
    for knode, vnode in node.value:
        kline = knode.start_mark.line + 1
        if knode.tag == _MERGE_TAG:
            subs = vnode.value if isinstance(vnode, yaml.SequenceNode) else [vnode]
            if not all(isinstance(n, yaml.MappingNode) for n in subs):
                raise InputError(Problem("`<<` (merge) needs a mapping or a list of mappings",
                                         key=dotted(path) or None, line=kline))
            merged.extend(subs)
            continue
        if not isinstance(knode, yaml.ScalarNode):
            raise InputError(Problem("a key must be a plain value, not a mapping or list", line=kline))
        key = loader.construct_object(knode, deep=True)
        if not isinstance(key, str | int | float | bool) or key is None:
            raise InputError(Problem(f"unsupported key {key!r}", line=kline))
        key = str(key)
        if key in out:
            raise InputError(Problem(f"duplicate key {key!r}", key=dotted((*path, key)), line=kline,
                                     hint="remove one of the two"))
        walk.lines[(*path, key)] = kline
        out[key] = _construct(vnode, loader, (*path, key), walk, depth + 1)
    for sub in merged:
        lines = walk.lines
        walk.lines = {}
        try:
            values = _construct(sub, loader, path, walk, depth)
        finally:
            merged_lines, walk.lines = walk.lines, lines
        for k, v in values.items():
            if k not in out:
                out[k] = v
                for p, n in merged_lines.items():
                    if p[:len(path) + 1] == (*path, k):
                        walk.lines.setdefault(p, n)
    return out


def loads(text: str, file: str = "<string>") -> Source:
    """Parse YAML text into a Source; raise InputError naming the file and line on any problem."""
    if "\x00" in text:
        raise InputError(Problem("this is a binary file, not YAML", file=file,
                                 hint="pass the job spec (a .yaml text file)"))
    if not text.strip():
        raise InputError(Problem("the file is empty", file=file, hint="see examples/ for a minimal job spec"))
    import yaml

    loader = _loader_class()(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise InputError(Problem("nested too deeply to be a job spec or site config", file=file)) from None
        if node is None:
            raise InputError(Problem("the file holds no YAML document", file=file))
        walk = _Walk(lines={})
        data = _construct(node, loader, (), walk)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise InputError(Problem(
            f"malformed YAML: {exc.problem}" + (f" ({exc.context})" if exc.context else ""),
            file=file, line=mark.line + 1 if mark else None,
            hint="check indentation and quoting near this line")) from exc
    except yaml.YAMLError as exc:
        raise InputError(Problem(f"malformed YAML: {exc}", file=file)) from exc
    except InputError as exc:
        for p in exc.problems:
            p.file = p.file or file
        raise
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise InputError(Problem(f"expected a mapping of keys to values at the top, found {type(data).__name__}",
                                 file=file, line=1, hint="a job spec starts with e.g. `name: train`"))
    return Source(data=data, file=file, lines=walk.lines)


def load(path: str | Path) -> Source:
    """Read and parse a YAML file with the checks of `loads` plus size and encoding checks."""
    return loads(read_text(path), str(path))


def read_text(path: str | Path) -> str:
    """The text of a YAML file, refusing directories, huge, binary and non-UTF-8 files (as `load` does).

    Only a regular file is read, and at most MAX_BYTES + 1 bytes of it: /dev/zero or /dev/urandom would never
    end, and a FIFO would block. The file is opened non-blocking (so opening a FIFO returns at once) and checked
    with fstat on the open descriptor, so what is checked is what is read.
    """
    import os
    import stat

    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError as exc:
        raise InputError(Problem("no such file", file=name)) from exc
    except PermissionError as exc:
        raise InputError(Problem("permission denied", file=name)) from exc
    except OSError as exc:
        raise InputError(Problem(f"cannot open: {exc.strerror}", file=name)) from exc
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise InputError(Problem("is a directory, expected a YAML file", file=name))
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
            raise InputError(Problem(f"is {kind}, expected a YAML file", file=name,
                                     hint="pass the path of the YAML file itself"))
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_BYTES and (chunk := os.read(fd, MAX_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    except IsADirectoryError as exc:
        raise InputError(Problem("is a directory, expected a YAML file", file=name)) from exc
    except OSError as exc:
        raise InputError(Problem(f"cannot read: {exc.strerror}", file=name)) from exc
    finally:
        os.close(fd)
    if size > MAX_BYTES:
        raise InputError(Problem(f"file is larger than {MAX_BYTES} bytes; a spec or site config must be under that",
                                 file=name, hint="is this really the YAML file you meant?"))
    raw = b"".join(chunks)
    if b"\x00" in raw:
        loads("\x00", name)  # raises the binary-file error
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(Problem(f"not UTF-8 text (byte {exc.start})", file=name,
                                 hint="save the file as UTF-8")) from exc
