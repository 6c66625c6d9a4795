"""Quoting for the two languages a job script speaks (bash, and sbatch's #SBATCH option lines), and for the
terminal that shows users' values.

Templates never build shell text from user values themselves: the render environment quotes every `{{ }}`
by default, and only `Shell` strings (built here, from quoted parts) pass through unchanged.
"""

from __future__ import annotations

import re
import shlex

from slurmkit.errors import Problem, RenderError


class Shell(str):
    """Text that is already valid, safe shell code (quoted by this module)."""


def q(value: object) -> Shell:
    """One shell word that bash reads back as exactly `value` (spaces, quotes, $(), `, ;, #, unicode)."""
    text = str(value)
    if "\x00" in text:
        raise RenderError(Problem("a value contains a NUL byte, which no shell word can hold"))
    quoted = shlex.quote(text)
    if quoted == text and text.startswith("="):
        quoted = f"'{text}'"  # `export X==a` is valid bash but reads like a typo to people and shellcheck
    return Shell(quoted)


def words(items: list[object]) -> Shell:
    """Several shell words separated by spaces (each quoted unless already Shell)."""
    return Shell(" ".join(i if isinstance(i, Shell) else q(i) for i in items))


def comment(text: object) -> Shell:
    """Text for a `# ...` comment line: control characters (a newline would end the comment) replaced."""
    return Shell("".join(c if c.isprintable() else "?" for c in str(text)))


_SBATCH_SAFE = re.compile(r"^[A-Za-z0-9_./:%@+,=\-\[\]^*!]*$")  # no space, quote, backslash or '#'


def sbatch_value(value: str, key: str) -> str:
    r"""Encode a value for an `#SBATCH --key=value` line so that sbatch reads back exactly `value`.

    sbatch's directive parser (get_argument in src/sbatch/opt.c: 25.11.7 lines 473-556, 22.05.8 lines 459-531)
    splits a line at unquoted C isspace() characters (space, \t, \v, \f, \r), drops quote characters, ends the
    line at an unquoted '#', and a backslash makes the next character literal. Escaping characters one by one
    is not portable: 22.05 ends the argument at a backslash-escaped space or tab (so `x\ y` becomes two
    arguments, the second one an "Invalid directive"), 25.11 keeps an escaped space but still ends the argument
    at an escaped tab, vertical tab or form feed. Inside double quotes both versions keep every character but
    the line end, and take `\"` and `\\` as a literal quote and backslash: that is the form used for any value
    that is not plainly safe. A newline (next_line splits the script there) and NUL (C strings) cannot be
    expressed at all and are refused.
    """
    if "\n" in value or "\x00" in value:
        what = "a line break" if "\n" in value else "a NUL byte"
        raise RenderError(Problem(f"the value of --{key} contains {what}, which an #SBATCH line cannot hold",
                                  key=key, hint="remove it from this value"))
    if _SBATCH_SAFE.match(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


_REF = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def word_with_params(text: str, params: set[str], where: str = "command") -> Shell:
    """A shell word for `text` where `{name}` is replaced at run time by sweep parameter `name`.

    Literal parts are single-quoted; parameters expand inside double quotes, so a value is never re-split or
    re-interpreted. `{{` and `}}` stand for literal braces. Without parameters this is plain `q()`.
    """
    if not params or "{" not in text:
        return q(text)
    out: list[str] = []
    literal = ""
    pos = 0
    for m in _REF.finditer(text):
        literal += text[pos:m.start()]
        tok = m.group(0)
        if tok == "{{":
            literal += "{"
        elif tok == "}}":
            literal += "}"
        elif m.group(1) in params:
            if literal:
                out.append(shlex.quote(literal))
                literal = ""
            out.append('"${SK_PARAM_' + m.group(1) + '}"')
        else:
            from slurmkit.config.suggest import did_you_mean

            raise RenderError(Problem(f"{where}: {{{m.group(1)}}} is not a sweep parameter",
                                      key=where, hint=did_you_mean(m.group(1), params) +
                                      " (write {{ and }} for literal braces)"))
        pos = m.end()
    literal += text[pos:]
    if literal:
        out.append(shlex.quote(literal))
    return Shell("".join(out) or "''")


# C0 controls, DEL and C1 controls (ESC, BEL, CR, CSI 0x9b...), and the lone surrogates that stand for undecodable
# bytes (surrogateescape): shown as escapes, so a job name cannot move the cursor or set an admin's window title.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    if 0xdc80 <= code <= 0xdcff:  # an undecodable byte kept by surrogateescape: show the byte
        return f"\\x{code - 0xdc00:02x}"
    return repr(m.group())[1:-1] if code < 0xd800 else f"\\u{code:04x}"


def for_terminal(value: object) -> str:
    """`value` as text that is safe to print to a terminal: control characters become \\xNN (\\t, \\n, \\r too).

    Human-readable output only (tables, markdown, messages); JSON, CSV and Parquet keep the raw value.
    """
    return _UNPRINTABLE.sub(_escape, str(value))
