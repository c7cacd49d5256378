"""A record's own date against the bucket's clock. Pure.

A record names its own time (a drift check's, a rehearsal's, a drill's start), and readers take the newest
name as the newest evidence. The writer's clock, or anyone who may write there, decides that time; the bucket
decides when the object was written (its LastModified, in every listing and every GET). A record that claims a
time after the bucket wrote it, by more than a writer's clock may drift (SKEW_SECONDS), is from the future: a
skewed clock or a forgery. It is never the newest evidence of anything: readers show it as a finding of its
own and judge the latest record that is not from the future.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional, Union

SKEW_SECONDS = 300.0  # NTP keeps a host within a second; five minutes is a broken clock or a lie


def ts(when: Union[str, float, datetime, None]) -> Optional[float]:
    if isinstance(when, datetime):
        return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(when, (int, float)):
        return float(when)
    try:
        return datetime.fromisoformat(str(when).replace("Z", "+00:00")).timestamp() if when else None
    except (ValueError, TypeError):
        return None


def ahead(claimed: Union[str, float, datetime, None], written: Union[str, float, datetime, None]) -> Optional[float]:
    """Seconds by which a record's `claimed` time is past when the bucket `written` it, when that is more than
    SKEW_SECONDS; None when it is not (or either time is unknown: then nothing is claimed about it)."""
    c, w = ts(claimed), ts(written)
    if c is None or w is None or c - w <= SKEW_SECONDS:
        return None
    return round(c - w, 1)


def iso(when: Union[str, float, datetime, None]) -> Optional[str]:
    stamp = ts(when)
    return None if stamp is None else datetime.fromtimestamp(stamp, timezone.utc).isoformat(
        timespec="seconds").replace("+00:00", "Z")
