"""Cron schedules as the fleet's CronJobs run them: the five-field syntax Kubernetes accepts, read by cronsim.

Kubernetes checks a CronJob's schedule with robfig/cron's standard parser (pkg/apis/batch/validation,
validateScheduleFormat) and refuses a `TZ=` in it; groundctl reads the same schedule with cronsim to know when
runs happen (`recovery.fleet.cadence`). A schedule works here only when both accept it and both read it
alike, so each term is checked against the grammar they share: `*`, a number or a name, a range, a list, a
step (`*/15`, `1-5/2`, `5/15`); month names JAN-DEC, day names SUN-SAT, any case. Refused, with the field
and the reason: `?`, `L`, `W`, `#`, `H` and descriptors such as `@daily` (one side only), day-of-week 7 (robfig
allows 0-6), a reversed range, and a day-of-month with a day-of-week where the two would disagree on
whether a day needs both to match or either (robfig: unless one is `*`; cronsim: unless one starts with `*`).
A refusal says whose it is: robfig reads `?` and a range starting `*` or `?` (`*-5`) as `*`, so those are
cronsim's refusals (the API server accepts them: tests/test_cluster_tier_schedules.py). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from cronsim import CronSim, CronSimError

MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
# name, lowest, highest, the names it takes (their value is their index + the lowest)
FIELDS = (("minute", 0, 59, ()), ("hour", 0, 23, ()), ("day-of-month", 1, 31, ()), ("month", 1, 12, MONTHS),
          ("day-of-week", 0, 6, DAYS))
_VALUE = r"[0-9]{1,4}|[A-Za-z]{3}"
_TERM = re.compile(rf"^(?:(?P<star>\*)|(?P<start>{_VALUE})(?:-(?P<end>{_VALUE}))?)(?:/(?P<step>[0-9]{{1,4}}))?$")
_EPOCH = datetime(2001, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Schedule:
    """What a schedule allows, as cronsim read it; `day_and`: a day needs both day fields to match."""
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    day_and: bool


def _value(text: str, field: tuple) -> int:
    name, low, high, names = field
    if text.isdigit():
        value = int(text)
    elif text.upper() in names:
        value = names.index(text.upper()) + low
    else:
        known = f"; names: {names[0]}-{names[-1]}" if names else ""
        raise ValueError(f"the {name} '{text}' is not a number{' or a name' if names else ''}{known}")
    if not low <= value <= high:
        raise ValueError(f"the {name} {text} is outside {low}-{high}"
                         + (" (Sunday is 0 or SUN)" if name == "day-of-week" and value == 7 else ""))
    return value


def _field_problem(text: str, field: tuple) -> Optional[str]:
    """Why robfig/cron or cronsim would refuse (or read differently) this field, or None."""
    name = field[0]
    for term in text.split(","):
        m = _TERM.fullmatch(term)
        if not m:
            return (f"the {name} term '{term}' is not *, a number, a name, a range (a-b) or a step (*/n, a-b/n, "
                    "a/n)")
        try:
            start = _value(m["start"], field) if m["start"] else None
            end = _value(m["end"], field) if m["end"] else None
        except ValueError as exc:
            return str(exc)
        if start is not None and end is not None and start > end:
            return f"the {name} range '{term}' runs backwards; write it from low to high"
        if m["step"] is not None and int(m["step"]) == 0:
            return f"the {name} step in '{term}' is 0; a step is 1 or more"
    return None


def _robfig_star_term(term: str) -> bool:
    """robfig/cron reads a term whose range starts with `*` or `?` (`?`, `*-5`, `?/10`) as `*` (getRange)."""
    return term.split("/", 1)[0].split("-", 1)[0] in ("*", "?")


def _robfig_star(text: str) -> bool:
    """robfig/cron's star bit: a term `*` (or `*/1`), which makes the other day field decide alone."""
    return any(t == "*" or t == "*/1" for t in text.split(","))


def schedule_problem(text: str) -> Optional[str]:
    """Why `text` is not a schedule both Kubernetes CronJobs and groundctl read alike, with the fix; None when
    it is."""
    if "TZ" in text.upper():
        return "it names a time zone; schedules are in UTC (the CronJobs set timeZone Etc/UTC), so drop it"
    fields = text.split()
    if len(fields) != 5:
        return (f"it has {len(fields)} field{'s' if len(fields) != 1 else ''}; a five-field cron schedule has "
                "minute, hour, day of month, month and day of week, such as '17 6 * * MON-FRI'")
    for part, field in zip(fields, FIELDS):
        problem = _field_problem(part, field)
        if problem:
            odd = [t for t in part.split(",") if not _TERM.fullmatch(t)]
            who = ("groundctl (cronsim) does not accept it, though Kubernetes reads that term as *"
                   if odd and all(_robfig_star_term(t) for t in odd) else "Kubernetes CronJobs do not accept it")
            return f"{who}: {problem}"
    dom, dow = fields[2], fields[4]
    robfig_and = _robfig_star(dom) or _robfig_star(dow)
    cronsim_and = dom.startswith("*") or dow.startswith("*")
    if robfig_and != cronsim_and:
        return (f"it is read two ways: Kubernetes runs it on days matching {'both' if robfig_and else 'either'} "
                f"day field, groundctl's reader on days matching {'both' if cronsim_and else 'either'}; give the "
                "day of month as a range (1-31/2, not */2), or one day field as *")
    try:
        CronSim(text, _EPOCH)
    except (CronSimError, ValueError) as exc:
        return f"it never runs ({exc}): no month it names has that day of month"
    return None


def parse(text: str) -> Schedule:
    """The schedule `text` as cronsim reads it; ValueError (the reason) for one `schedule_problem` refuses."""
    problem = schedule_problem(text)
    if problem:
        raise ValueError(problem)
    sim = CronSim(text, _EPOCH)
    return Schedule(frozenset(sim.minutes), frozenset(sim.hours), frozenset(sim.days), frozenset(sim.months),
                    frozenset(int(d) % 7 for d in sim.weekdays), sim.day_and)  # cronsim also reads 7 as Sunday
