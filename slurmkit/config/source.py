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

    def line_of(self, path: KeyPath) -> int | None:
        """Line of `path`, or of its nearest parent that we know."""
        path = tuple(path)
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def problem(self, path: KeyPath, message: str, hint: str | None = None, severity: str = "error") -> Problem:
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


def _construct(node: yaml.Node, loader: yaml.Loader, path: KeyPath, lines: dict[KeyPath, int]) -> Any:
    import yaml

    if isinstance(node, yaml.MappingNode):
        loader.flatten_mapping(node)
        out: dict[Any, Any] = {}
        for knode, vnode in node.value:
            key = loader.construct_object(knode, deep=True)
            if not isinstance(key, str | int | float | bool) or key is None:
                raise InputError(Problem(f"unsupported key {key!r}", line=knode.start_mark.line + 1))
            key = str(key)
            if key in out:
                raise InputError(Problem(f"duplicate key {key!r}", key=dotted((*path, key)),
                                         line=knode.start_mark.line + 1, hint="remove one of the two"))
            lines[(*path, key)] = knode.start_mark.line + 1
            out[key] = _construct(vnode, loader, (*path, key), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, child in enumerate(node.value):
            lines[(*path, i)] = child.start_mark.line + 1
            items.append(_construct(child, loader, (*path, i), lines))
        return items
    if node.tag in _SEXAGESIMAL_TAGS and ":" in node.value:
        # YAML 1.1 reads an unquoted `time: 12:00:00` as the base-60 integer 43200 (YAML 1.2 dropped that);
        # keep what the user wrote, so Slurm times need no quotes.
        return node.value
    return loader.construct_object(node, deep=True)


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
        node = loader.get_single_node()
        if node is None:
            raise InputError(Problem("the file holds no YAML document", file=file))
        lines: dict[KeyPath, int] = {}
        data = _construct(node, loader, (), lines)
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
    return Source(data=data, file=file, lines=lines)


def load(path: str | Path) -> Source:
    """Read and parse a YAML file with the checks of `loads` plus size and encoding checks."""
    return loads(read_text(path), str(path))


def read_text(path: str | Path) -> str:
    """The text of a YAML file, refusing directories, huge, binary and non-UTF-8 files (as `load` does)."""
    p = Path(path)
    name = str(path)
    try:
        if p.is_dir():
            raise InputError(Problem("is a directory, expected a YAML file", file=name))
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise InputError(Problem(f"file is {size} bytes; a spec or site config must be under {MAX_BYTES}",
                                     file=name, hint="is this really the YAML file you meant?"))
        raw = p.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(Problem("no such file", file=name)) from exc
    except PermissionError as exc:
        raise InputError(Problem("permission denied", file=name)) from exc
    if b"\x00" in raw:
        loads("\x00", name)  # raises the binary-file error
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(Problem(f"not UTF-8 text (byte {exc.start})", file=name,
                                 hint="save the file as UTF-8")) from exc
