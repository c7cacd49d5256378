"""The verified choice read from the newest end: which part of the history a choice rests on (pure).

A recovery at 2,000 versions need not list 2,000 versions of the stack object, 2,000 ledger objects and their
2,000 digests to choose: the choice rests on the newest candidates and on the records from the chosen one to
the head. So the guide lists the stack object's newest versions first, and the ledger from a *window start*
on. Every record from the window start to the head is read as a whole-ledger read reads it (its own versions
and its digest listed: S3's facts, never a record's own clock), and it names a version the listing holds, so
the tamper checks see all of them; the records below are taken from the ledger's index and must join them in
one unbroken hash chain of one lineage. The choice stands when it lies in the window (`proven`): nothing below
the window start can then rank above it, since every older version of the stack object sits below the
window's records in S3's own order. Anything else — no index, a finding of any kind, a choice below the
window, no choice — reads the whole history, as before, and decides again.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from recovery.choice.choose import Choice

FIRST_PAGE = 64  # the newest versions of the stack object read first; a rehearsal's --newest fits in it


def _listed(record, have: set, partial_key: Optional[str]) -> bool:
    # A key listed in full holds every version it still has; only the partial key can be missing some.
    return record.version_id is None or record.stack_key != partial_key or (record.stack_key,
                                                                             record.version_id) in have


def window_start(records: Mapping[int, object], listed: Sequence, partial_key: Optional[str]) -> int:
    """The lowest serial s such that every record from s to the newest names a version `listed` holds (a key
    listed in full holds all of its own); the newest serial + 1 when even the newest's is not listed yet, and 1
    for no records. `records`: ledger records by serial (the index's, before they are read for certain)."""
    if not records:
        return 1
    have = {(v.key, v.version_id) for v in listed if not v.delete_marker}
    serial = max(records)
    while serial in records and _listed(records[serial], have, partial_key):
        serial -= 1
    return serial + 1


def covers(records: Sequence, listed: Sequence, partial_key: Optional[str]) -> bool:
    """Every record read for certain in the window names a version the listing holds (so the order check
    sees it)."""
    have = {(v.key, v.version_id) for v in listed if not v.delete_marker}
    return all(_listed(r, have, partial_key) for r in records)


def proven(choice: Choice, start: int) -> bool:
    """The choice made over the window stands: it chose a candidate placed at or after the window start."""
    chosen = choice.chosen
    return chosen is not None and chosen.position is not None and chosen.position >= (start, 0)
