"""Reading a long ledger from its newest end: the records a choice rests on as a whole-ledger read reads them,
those below from the index.

`bootstrap.records.ledger.read_ledger` lists every ledger object's versions and every digest: three listings of
~2,000 entries each at 2,000 records. A recovery's choice rests on the records from the chosen state to the head
(see `recovery.choice.window`), so this reads the index in one GET, and lists the ledger's versions and the
digests from a window start on only (a KeyMarker / StartAfter past the serials below): the records from there
are vouched for or read exactly as `read_ledger` does. The records below are the index's entries, each parsed
and checked for its serial; the caller checks them as one chain with the window. When the index cannot stand
for them (none, unreadable, an entry missing or unreadable) the answer is None: read the whole ledger.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Mapping, Optional

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout, ledger_index
from bootstrap.records.ledger import LedgerRead, LedgerRecord, _parse_record, assemble


def index_records(project: str, stack: str, entries: Mapping[int, bytes]) -> dict[int, LedgerRecord]:
    """The index's entries that parse as the record of their own serial (before anything vouches for them)."""
    out = {}
    for serial, body in entries.items():
        rec, problem = _parse_record(layout.ledger_key(project, stack, serial), serial, body)
        if rec is not None and problem is None:
            out[serial] = rec
    return out


def read_window(store: ObjectStore, project: str, stack: str, entries: Mapping[int, bytes],
                records: Mapping[int, LedgerRecord], start: int) -> Optional[LedgerRead]:
    """The ledger with the records from serial `start` on read as `read_ledger` reads them (two listings from
    `start` on, a GET for each record the index does not vouch for) and those below from the index (`records`,
    parsed from `entries`); None when the index lacks one below `start`."""
    if any(serial not in records for serial in range(1, start)):
        return None
    below = {serial: records[serial] for serial in range(1, start)}
    prefix, iprefix = layout.ledger_prefix(project, stack), layout.ledger_index_prefix(project, stack)
    marker = (layout.ledger_key(project, stack, start - 1), None) if start > 1 else None
    with ThreadPoolExecutor(max_workers=1) as side:
        # Digest keys are `<serial>.<sha256>`: "~" sorts after every hex digit, so this starts at serial `start`.
        digests = side.submit(lambda: list(store.keys(iprefix, start_after=f"{iprefix}{start - 1:012d}.~")))
        listed = []
        while True:
            page, marker = store.versions_page(prefix, 1000, marker)
            listed += page
            if marker is None:
                break
    # S3 starts after the marker's key; moto lists its versions but the first: those are dropped here.
    first = layout.ledger_key(project, stack, start)
    listed = [v for v in listed if v.key >= first]
    found = ledger_index.digests_from(iprefix, digests.result())
    return assemble(store, project, stack, listed, entries, found, None, below, start)
