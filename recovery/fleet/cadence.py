"""How often a scheduled job runs: the longest gap between two runs of a five-field cron schedule. Pure.

Freshness findings need "how old may the last result be": a record older than the longest gap between
two scheduled runs means at least one run left no record. Minute, hour and day-of-week are expanded
exactly over one week; a schedule restricted by day of month or month is judged by the longest month
(31 days) or the year (366 days), which is all a staleness threshold needs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

WEEK_MINUTES = 7 * 24 * 60


def _field(text: str, low: int, high: int) -> Optional[set[int]]:
    """The values a cron field allows; None for syntax this reader does not know (names, `L`, `#`)."""
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        if step_text and not step_text.isdigit():
            return None
        step = int(step_text) if step_text else 1
        if rng == "*":
            lo, hi = low, high
        elif "-" in rng:
            a, _, b = rng.partition("-")
            if not (a.isdigit() and b.isdigit()):
                return None
            lo, hi = int(a), int(b)
        elif rng.isdigit():
            lo = int(rng)
            hi = high if step_text else lo
        else:
            return None
        if step < 1 or lo < low or hi > high or lo > hi:
            return None
        out.update(range(lo, hi + 1, step))
    return out


@lru_cache(maxsize=1024)
def longest_gap_minutes(schedule: str) -> Optional[int]:
    """Minutes of the longest wait between two runs of `schedule`; None when it cannot be read."""
    fields = schedule.split()
    if len(fields) != 5:
        return None
    minute, hour, dom, month, dow = fields
    if month != "*":
        return 366 * 24 * 60
    if dom != "*":
        return 31 * 24 * 60
    minutes, hours, days = _field(minute, 0, 59), _field(hour, 0, 23), _field(dow, 0, 7)
    if not minutes or not hours or not days:
        return None
    days = {d % 7 for d in days}
    runs = sorted(d * 1440 + h * 60 + m for d in days for h in hours for m in minutes)
    gaps = [b - a for a, b in zip(runs, runs[1:])] + [runs[0] + WEEK_MINUTES - runs[-1]]
    return max(gaps)
