"""Evidence that the ledger was tampered with, from what S3 itself recorded (pure).

A ledger record can be forged so that its hash chain still verifies: copy an old record, give it the
next serial and the head's sha256 as its `previous_sha256`. What a forger cannot rewrite is S3's own
history. Two facts are checked:

- a record is written once, with If-None-Match, so a ledger object with more than one stored version
  (or a delete marker) was rewritten after it was written;
- every state change writes a new version of the stack object, so a later serial can never name a
  version S3 stored before the version an earlier serial names.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Optional, Sequence

from bootstrap.records.ledger import Finding

_SERIAL = re.compile(r"(\d{12})\.json\Z")


def _serial_of(key: str) -> Optional[int]:
    m = _SERIAL.search(key)
    return int(m.group(1)) if m else None


def rewritten_records(ledger_versions: Mapping[str, int]) -> list[Finding]:
    found = []
    for key, count in sorted(ledger_versions.items()):
        if count > 1:
            serial = _serial_of(key)
            found.append(Finding("rewritten-record", serial,
                                 f"ledger record serial {serial} ({key}) has {count} stored versions: records are "
                                 "written once, so it was rewritten after it was first written."))
    return found


def order_contradictions(records: Sequence, stack_versions: Iterable) -> list[Finding]:
    """Records whose serial order disagrees with S3's version order of the stack object they name."""
    listed: dict[str, list[str]] = {}
    for v in stack_versions:
        if not getattr(v, "delete_marker", False):
            listed.setdefault(v.key, []).append(v.version_id)
    # S3 lists a key's versions newest first: the rank grows with age reversed.
    rank = {(key, vid): len(vids) - i for key, vids in listed.items() for i, vid in enumerate(vids)}
    found = []
    newest: dict[str, tuple[int, int, str]] = {}  # stack key -> (rank, serial, version) so far
    for r in sorted(records, key=lambda r: r.serial):
        here = rank.get((r.stack_key, r.version_id))
        if here is None:
            continue
        before = newest.get(r.stack_key)
        if before is not None and here < before[0]:
            found.append(Finding(
                "order-contradiction", r.serial,
                f"ledger record serial {r.serial} names version {r.version_id} of {r.stack_key}, which S3 stored "
                f"before version {before[2]} (serial {before[1]}): a later serial cannot name an older state, so "
                "the record was forged or rewritten."))
            continue
        newest[r.stack_key] = (here, r.serial, r.version_id)
    return found


def tamper_findings(records: Sequence, stack_versions: Iterable, ledger_versions: Mapping[str, int]) -> list[Finding]:
    return rewritten_records(ledger_versions) + order_contradictions(records, stack_versions)
