"""The report window: --since/--until parsing with explicit time zones, period buckets, and time clipping.

Every report covers a half-open interval [since, until) of epoch seconds (UTC, like the store). Human input
is read in the report's time zone (--tz, default UTC), and the zone is printed with the result, so "2026-11-01"
never silently means a different instant on a different machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from slurmkit.config.when import add_months, parse_when
from slurmkit.errors import InputError, Problem

PERIODS = ("day", "week", "month")
@dataclass(frozen=True)
class Window:
    """[since, until) in epoch seconds, with the zone used to read and print it."""

    since: int
    until: int
    tz: tzinfo
    tz_name: str

    @property
    def seconds(self) -> int:
        return self.until - self.since

    def fmt(self, epoch: int) -> str:
        return datetime.fromtimestamp(epoch, self.tz).strftime("%Y-%m-%d %H:%M %Z").strip()

    def describe(self) -> str:
        return f"{self.fmt(self.since)} to {self.fmt(self.until)} ({self.tz_name})"


def resolve_tz(name: str | None) -> tuple[tzinfo, str]:
    """'UTC' (default), 'local' (this machine's zone) or an IANA name such as Europe/Berlin."""
    if not name or name.upper() == "UTC":
        return timezone.utc, "UTC"
    if name == "local":
        local = datetime.now().astimezone().tzinfo
        assert local is not None
        return local, f"local time, {datetime.now(local).strftime('%Z')}"
    return iana_zone(name, hint="use UTC, local, or an IANA name such as Europe/Berlin"), name


def iana_zone(name: str, key: str = "--tz", hint: str = "an IANA name such as Europe/Berlin") -> ZoneInfo:
    """The zone of an IANA name, or a usage error naming the option `key`."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise InputError(Problem(f"unknown time zone {name!r}", key=key, hint=hint)) from exc


def parse_window(since: str | None, until: str | None, *, tz: str | None = None,
                 now: datetime | None = None) -> Window:
    """The window from --since/--until (defaults: the last 30 days up to now).

    A bare named span given only as --since ("last-month", "yesterday") also sets --until to its end, so
    `--since last-month` means the whole previous month.
    """
    zone, zone_name = resolve_tz(tz)
    now = (now or datetime.now(timezone.utc)).astimezone(zone)
    start = parse_when(since or "30d", tz=zone, now=now, option="--since")
    if until is None and since and since.strip().lower() in ("last-month", "yesterday"):
        stop = parse_when(since, tz=zone, now=now, option="--since", end=True)
    else:
        stop = parse_when(until or "now", tz=zone, now=now, option="--until", end=True)
    window = Window(int(start.timestamp()), int(stop.timestamp()), zone, zone_name)
    if window.until <= window.since:
        raise InputError(Problem(f"--until ({window.fmt(window.until)}) is not after --since "
                                 f"({window.fmt(window.since)})", key="--until",
                                 hint="give an --until later than --since"))
    return window


def periods(window: Window, period: str) -> list[tuple[str, int, int]]:
    """(label, start, end) buckets covering the window, cut at calendar boundaries in the window's zone.

    Days and months follow the zone's calendar (a DST day has 23 or 25 hours); weeks start on Monday (ISO).
    The first and last buckets are clipped to the window.
    """
    if period not in PERIODS:
        raise InputError(Problem(f"unknown period {period!r}", key="--by", hint=f"one of {', '.join(PERIODS)}"))
    tz = window.tz
    first = datetime.fromtimestamp(window.since, tz)
    if period == "month":
        cur = datetime(first.year, first.month, 1, tzinfo=tz)
    else:
        cur = datetime(first.year, first.month, first.day, tzinfo=tz)
        if period == "week":
            cur -= timedelta(days=cur.weekday())
    out = []
    while int(cur.timestamp()) < window.until:
        if period == "month":
            nxt = add_months(cur, 1)
            label = cur.strftime("%Y-%m")
        else:
            step = 7 if period == "week" else 1
            d = cur.date() + timedelta(days=step)
            nxt = datetime(d.year, d.month, d.day, tzinfo=tz)  # wall-clock midnight: DST-safe
            label = cur.strftime("%G-W%V") if period == "week" else cur.strftime("%Y-%m-%d")
        lo, hi = max(int(cur.timestamp()), window.since), min(int(nxt.timestamp()), window.until)
        if hi > lo:
            out.append((label, lo, hi))
        cur = nxt
    return out
