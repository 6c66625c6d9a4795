"""'Did you mean' suggestions for misspelt keys, partitions, NCCL variables."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The most similar choice, compared case-insensitively, or None."""
    pool = list(choices)
    lowered = {c.lower(): c for c in pool}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=cutoff)
    return lowered[match[0]] if match else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A hint sentence: the closest choice if any, else the list of valid choices."""
    pool = sorted(choices)
    best = closest(word, pool)
    if best:
        return f"did you mean {best!r}?"
    return "expected one of: " + ", ".join(pool) if pool else "no valid choices"
