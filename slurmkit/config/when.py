"""The one syntax for a point in time: every --since/--until (status, history, report, reconcile, import-sacct,
notify).

Forms: a date (2026-11-01), a date and time (2026-11-01T08:00, optionally with +01:00 or Z), a span back from
now (90m, 12h, 30d, 4w), `now`, `today`, `yesterday`, `this-month`, `last-month`, or epoch seconds (10+ digits).
Human times are read in a given zone (reports: --tz; the job commands and sacct: local time, like Slurm's).
Every result lies between 1970 and a year from now: a far-off value is a typo, and later code (calendar
buckets, sacct) would fail on it with a traceback or run for hours.

Standard library only: used on the fast paths (sk status, the admin commands) and by the report.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone, tzinfo

from slurmkit.errors import InputError, Problem

# "m" is minutes, as in `sk admin reconcile --since 90m` (months: this-month, last-month).
_RELATIVE = re.compile(r"^(\d{1,9}(?:\.\d+)?)\s*(s|min|m|h|d|w)$")
_UNIT_S = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
HINT = ("use a date (2026-11-01), a date and time (2026-11-01T08:00, optionally with +01:00 or Z), "
        "a span back from now (90m, 12h, 30d, 4w), or one of: now, today, yesterday, this-month, last-month")
FORMS = "a date (2026-11-01), a time (2026-11-01T08:00[+01:00]), a span back (90m, 12h, 7d, 4w), now, today, " \
    "yesterday, this-month, last-month, or epoch seconds"
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
AHEAD = timedelta(days=366)  # the latest accepted time is this far after now


def span_seconds(text: str) -> int | None:
    """Seconds in a span like `2d`, `36h`, `1.5h`, `90m`, `1w`; None when `text` is not one (also --chunk's form)."""
    m = _RELATIVE.match(str(text).strip().lower())
    return int(float(m.group(1)) * _UNIT_S[m.group(2)]) if m else None


def _month_start(d: date, tz: tzinfo) -> datetime:
    return datetime(d.year, d.month, 1, tzinfo=tz)


def add_months(dt: datetime, n: int) -> datetime:
    month = dt.month - 1 + n
    return dt.replace(year=dt.year + month // 12, month=month % 12 + 1, day=1)


def _read(raw: str, tz: tzinfo, now: datetime, option: str, end: bool) -> datetime:
    word = raw.lower()
    today = datetime(now.year, now.month, now.day, tzinfo=tz)
    if word == "now":
        return now
    if word in ("today", "yesterday"):
        start = today - timedelta(days=1 if word == "yesterday" else 0)
        return start + timedelta(days=1) if end else start
    if word in ("this-month", "last-month"):
        start = _month_start(today.date(), tz)
        if word == "last-month":
            start = add_months(start, -1)
        return add_months(start, 1) if end else start
    span = span_seconds(word)
    if span is not None:
        return now - timedelta(seconds=span)
    if raw.isdigit() and len(raw) >= 10:
        return datetime.fromtimestamp(int(raw), timezone.utc)
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00").replace(" ", "T"))
    except ValueError as exc:
        raise InputError(Problem(f"cannot read {raw!r} as a time", key=option, hint=HINT)) from exc
    return value.replace(tzinfo=tz) if value.tzinfo is None else value


def parse_when(text: str, *, tz: tzinfo, now: datetime, option: str, end: bool = False) -> datetime:
    """One --since/--until value as an aware datetime. `end` picks the end of named spans (last-month...)."""
    raw = str(text).strip()
    try:
        value = _read(raw, tz, now, option, end)
    except (OverflowError, ValueError, OSError) as exc:  # a span back past year 1, a 20-digit epoch
        raise InputError(Problem(f"{raw!r} is out of range", key=option, hint=HINT)) from exc
    latest = now + AHEAD
    if not EARLIEST <= value <= latest:
        raise InputError(Problem(f"{raw!r} is {'before 1970' if value < EARLIEST else 'more than a year ahead'}",
                                 key=option, hint=f"give a time from 1970 to {latest:%Y-%m-%d}; {HINT}"))
    return value


def to_epoch(text: str, *, option: str, now: float | None = None, tz: tzinfo | None = None) -> int:
    """Epoch seconds of one value; human times in `tz` (default: this machine's zone, as Slurm reads them)."""
    zone = tz or datetime.now().astimezone().tzinfo or timezone.utc
    at = datetime.now(zone) if now is None else datetime.fromtimestamp(now, zone)
    return int(parse_when(text, tz=zone, now=at, option=option).timestamp())
