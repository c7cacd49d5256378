"""How often a scheduled job runs: the longest gap between two runs of a five-field cron schedule. Pure.

Freshness findings need "how old may the last result be": a record older than the longest gap between
two scheduled runs means at least one run left no record. The schedule is read as the spec check reads it
(`bootstrap.spec.cron`, cronsim), so every schedule `spec check` accepts has a gap. The days a schedule runs
on repeat every week when it names neither a day of month nor a month, and every 28 years otherwise (the
Gregorian calendar's weekdays and leap days, from 2001 to 2099): two such periods hold every gap there is,
the one across the period's end included.
"""

from __future__ import annotations

from datetime import date, timedelta
from functools import lru_cache
from typing import Optional

from bootstrap.spec.cron import parse

_START = date(2001, 1, 1)
WEEK_DAYS = 7
CYCLE_DAYS = (date(2029, 1, 1) - _START).days  # 28 years


def _runs_on(day: date, s) -> bool:
    if day.month not in s.months:
        return False
    by_date, by_weekday = day.day in s.days, (day.weekday() + 1) % 7 in s.weekdays  # cron: Sunday is 0
    return by_date and by_weekday if s.day_and else by_date or by_weekday


@lru_cache(maxsize=1024)
def longest_gap_minutes(schedule: str) -> Optional[int]:
    """Minutes of the longest wait between two runs of `schedule`; None for one the spec check refuses."""
    try:
        s = parse(schedule)
    except ValueError:
        return None
    times = sorted(h * 60 + m for h in s.hours for m in s.minutes)
    every_date = len(s.days) == 31 and len(s.months) == 12
    period = WEEK_DAYS if every_date else CYCLE_DAYS
    days = [n for n in range(2 * period) if _runs_on(_START + timedelta(days=n), s)]
    if len(days) < 2:
        return None
    within = max((b - a for a, b in zip(times, times[1:])), default=0)
    across = max((b - a) * 1440 - times[-1] + times[0] for a, b in zip(days, days[1:]))
    return max(within, across)
