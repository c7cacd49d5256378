"""Reading records from a listing: which of them are from the future, and a record read and checked. Pure but
for the store passed in.

A record's time comes from its name; the bucket's clock is the LastModified every listing carries. A record
naming a time past that, by more than `bootstrap.records.clock.SKEW_SECONDS`, is from the future: passed
over (never the newest evidence) and counted per kind, so that the reader shows it as a finding of its own.
"""

from __future__ import annotations

from typing import Callable, Optional

from bootstrap.kit.untrusted import Unreadable
from bootstrap.records.clock import ahead, iso

MAX_FUTURE = 200  # records from the future passed over in a row to find the present: a planted flood is not followed


def from_future(key: str, claimed: Optional[str], modified, kind: str, future: dict) -> bool:
    """Whether the record at `key` claims a time after the bucket wrote it (`bootstrap.records.clock`); if so it is
    counted in `future[kind]`, the first few with their key and both times."""
    lead = ahead(claimed, modified)
    if lead is None:
        return False
    seen = future.setdefault(kind, {"count": 0, "records": [], "flood": False})
    seen["count"] += 1
    if len(seen["records"]) < 5:
        seen["records"].append({"key": key, "at": iso(claimed), "written_at": iso(modified), "ahead_seconds": lead})
    return True


def present(listing, claimed: Callable[[str], Optional[str]], kind: str, future: dict):
    """The (key, last modified) of `listing` whose record is not from the future; those that are go into `future`.
    Stops after MAX_FUTURE of them in a row: a flood of planted keys is not followed."""
    run = 0
    for key, _size, modified in listing:
        if not from_future(key, claimed(key), modified, kind, future):
            run = 0
            yield key, modified
            continue
        run += 1
        if run >= MAX_FUTURE:
            future[kind]["flood"] = True
            return


def checked(store, key: str, load: Callable[[Optional[bytes], str], dict]) -> tuple[Optional[dict], Optional[str]]:
    """(the record at `key` checked by `load`, None) or (None, why it is unreadable): every kind alike, so a record
    that fails its checks is a problem named by its key, never a row that shows what it lacks."""
    obj = store.get(key)
    try:
        return load(obj.body if obj is not None else None, key), None
    except Unreadable as exc:
        return None, exc.reason
