"""The ledger's index: every record's bytes in one object, so that reading a long ledger takes a few calls.

Reading 2,000 records one by one is 2,000 GETs. So the writer keeps, beside the chain
(`.groundctl/ledger-index/<project>/<stack>/`), an index holding each record's exact bytes, and before it
writes a record it writes an empty *digest object* whose key names the record's serial and the sha256 of
the bytes it is about to write. A reader takes an index entry in place of the record only when

- exactly one digest object names that serial, and it names the sha256 of the entry's bytes;
- S3 stored that digest object no later than the record object (LastModified: S3's clock, not a writer's);
- the record object has exactly one stored version (it was never rewritten).

Why the entry is then the record itself: its digest was claimed before the record existed. A second claim
for the serial (a forger's, or a writer that lost the race for it) leaves two, and the record is read; a
claim made after the record was (a forger's, for a record an earlier version wrote without one) is newer
than it, and the record is read (S3 lists times to the second: a forger who races an earlier version's writer
within one second could as well have raced it for the record itself). A digest names its bytes in its key, so the check needs only a listing,
whatever the bucket's encryption (under SSE-KMS an ETag is not the MD5 of the bytes). Everything else — no
index, a stale, damaged or tampered one, records an earlier version wrote — is read one record at a time,
exactly as before, and the reader says how many and why.

The rules (format, which entries a reader may take) are pure; the I/O at the end reads and writes the
index's own objects. Reading and appending the records themselves is `bootstrap.records.ledger`'s.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import zlib
from collections import Counter
from datetime import datetime
from typing import Callable, Iterable, Mapping, Optional, Sequence

import botocore.exceptions

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.kit.errors import CloudError
from bootstrap.records import layout

INDEX_FORMAT = 1
MAX_INDEX_BYTES = 32 << 20        # as stored (gzip); ~600 bytes a record, so ~300,000 records
MAX_INDEX_TEXT = 256 << 20        # once decompressed: a gzip bomb stops here
MAX_ENTRY_BYTES = 1 << 20         # untrusted.MAX_RECORD_BYTES: no record is larger
RECENT_BACKFILL = 50              # a writer fills in at most this many entries a crashed writer left out
_DIGEST = re.compile(r"^(\d{12})\.([0-9a-f]{64})$")

# Why an entry was not taken, as the reader says it.
NOT_INDEXED, NO_DIGEST, TWO_DIGESTS = "not in the index", "no digest claimed before it", "two digests claim its serial"
DIGEST_DIFFERS, DIGEST_LATER, REWRITTEN = ("its index entry differs from its digest", "its digest was stored after it",
                                           "the record object was rewritten")


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def encode(entries: Mapping[int, bytes]) -> bytes:
    doc = {"format": INDEX_FORMAT, "records": [[s, entries[s].decode()] for s in sorted(entries)]}
    return gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=6, mtime=0)


def decode(body: bytes) -> dict[int, bytes]:
    """The index's entries by serial. Raises ValueError saying what is wrong with it."""
    if len(body) > MAX_INDEX_BYTES:
        raise ValueError(f"it is {len(body):,} bytes, over the {MAX_INDEX_BYTES:,}-byte limit")
    try:
        inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        text = inflate.decompress(body, MAX_INDEX_TEXT)
        if inflate.unconsumed_tail:
            raise ValueError(f"it decompresses past the {MAX_INDEX_TEXT:,}-byte limit")
        if not inflate.eof:
            raise ValueError("it is a truncated gzip stream")
        doc = json.loads(text)
    except zlib.error as exc:
        raise ValueError(f"it is not gzip ({exc})") from None
    except (UnicodeDecodeError, RecursionError, json.JSONDecodeError) as exc:
        raise ValueError(f"it is not JSON ({type(exc).__name__})") from None
    if not isinstance(doc, dict) or doc.get("format") != INDEX_FORMAT or not isinstance(doc.get("records"), list):
        raise ValueError(f"it is not a format-{INDEX_FORMAT} ledger index")
    entries: dict[int, bytes] = {}
    for item in doc["records"]:
        if (not isinstance(item, list) or len(item) != 2 or type(item[0]) is not int or item[0] < 1
                or not isinstance(item[1], str) or len(item[1]) > MAX_ENTRY_BYTES):
            raise ValueError("an entry is not a [serial, record text] pair")
        entries[item[0]] = item[1].encode()
    return entries


def digests_from(prefix: str, listed: Iterable[tuple[str, int, datetime]]) -> dict[int, list[tuple[str, datetime]]]:
    """(sha256, stored at) of every digest object under `prefix`, by serial; other keys are left alone."""
    found: dict[int, list[tuple[str, datetime]]] = {}
    for key, _size, modified in listed:
        m = _DIGEST.fullmatch(key[len(prefix):]) if key.startswith(prefix) else None
        if m:
            found.setdefault(int(m.group(1)), []).append((m.group(2), modified))
    return found


def _second(t: datetime) -> datetime:
    # S3 lists times to the second; the emulator to the millisecond in one listing and not the other.
    return t.replace(microsecond=0)


def vouched(entries: Mapping[int, bytes], digests: Mapping[int, Sequence[tuple[str, datetime]]],
            record_versions: Mapping[int, Sequence]) -> tuple[dict[int, bytes], dict[int, str]]:
    """Which index entries stand for their record (see the module's rule), and why each other one does not.

    `record_versions`: every stored version of each current record object (`ObjectVersion`s, newest first,
    delete markers included), by serial; only those serials are judged."""
    taken: dict[int, bytes] = {}
    refused: dict[int, str] = {}
    for serial, versions in record_versions.items():
        body, claims = entries.get(serial), digests.get(serial, ())
        if len(versions) != 1 or versions[0].delete_marker:
            refused[serial] = REWRITTEN
        elif body is None:
            refused[serial] = NOT_INDEXED
        elif not claims:
            refused[serial] = NO_DIGEST
        elif len(claims) > 1:
            refused[serial] = TWO_DIGESTS
        elif claims[0][0] != digest(body):
            refused[serial] = DIGEST_DIFFERS
        elif _second(claims[0][1]) > _second(versions[0].last_modified):
            refused[serial] = DIGEST_LATER
        else:
            taken[serial] = body
    return taken, refused


def note(taken: int, refused: Mapping[int, str], problem: Optional[str]) -> str:
    """One sentence on how the ledger was read, for the reader to show."""
    total = taken + len(refused)
    if not total:
        return ""
    if not refused:
        return f"all {total} ledger records read from the ledger's index, each checked against its digest"
    why = "; ".join(f"{n} {reason}" for reason, n in Counter(refused.values()).most_common())
    head = f"the ledger's index is unusable ({problem}); " if problem else ""
    return (f"{head}{taken} of {total} ledger records read from the ledger's index, {len(refused)} read one by one "
            f"({why})")


def missing_recent(existing: Mapping[int, bytes], serial: int) -> list[int]:
    """Serials just below `serial` the index lacks (a writer that died before updating it), a bounded few."""
    return [s for s in range(max(1, serial - RECENT_BACKFILL), serial) if s not in existing]


# -- the index's objects (I/O) ---------------------------------------------------------------------

def read_index(store: ObjectStore, project: str, stack: str, known: Optional[tuple[dict[int, bytes], Optional[str]]] = None
               ) -> tuple[dict[int, bytes], dict[int, list[tuple[str, datetime]]], Optional[str]]:
    """(entries, digests, what is wrong with the index or None): one listing, and one bounded GET of the index
    unless `known` holds what one already read ((entries, problem) from `get_index`). A missing or unreadable
    index is no error: its records are read one by one."""
    listed = list(store.keys(layout.ledger_index_prefix(project, stack)))
    entries, problem = known if known is not None else get_index(store, project, stack)
    return entries, digests_from(layout.ledger_index_prefix(project, stack), listed), problem


def get_index(store: ObjectStore, project: str, stack: str) -> tuple[dict[int, bytes], Optional[str]]:
    """The index's entries by one GET of at most MAX_INDEX_BYTES, or what is wrong with it."""
    obj = store.get_at_most(layout.ledger_index_key(project, stack), MAX_INDEX_BYTES)
    if obj is None:
        return {}, "there is none: the records were written by an earlier version, or it was removed"
    if len(obj.body) > MAX_INDEX_BYTES:
        return {}, f"it is over the {MAX_INDEX_BYTES:,}-byte limit"
    try:
        return decode(obj.body), None
    except ValueError as exc:
        return {}, str(exc)


def claim_digest(store: ObjectStore, project: str, stack: str, serial: int, body: bytes) -> None:
    """Before a record is written: name its bytes. Best effort: without it the record is read one by one."""
    try:
        store.put(layout.ledger_digest_key(project, stack, serial, digest(body)), b"", content_type="text/plain")
    except (CloudError, botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        pass


def add_to_index(store: ObjectStore, project: str, stack: str, serial: int, body: bytes,
                 read_record: Callable[[int], Optional[bytes]], attempts: int = 3) -> bool:
    """After a record is written: add it to the index, with a conditional write so that two writers never drop
    each other's entries. Best effort (False when it did not land): a reader reads what is missing one by one."""
    key = layout.ledger_index_key(project, stack)
    try:
        for _ in range(attempts):
            obj = store.get(key)
            try:
                existing = decode(obj.body) if obj is not None else {}
            except ValueError:
                existing = {}  # a damaged index is replaced; its entries would not have been taken anyway
            filled = {s: b for s in missing_recent(existing, serial) if (b := read_record(s)) is not None}
            new = encode({**existing, **filled, serial: body})
            if obj is None and store.put_if_absent(key, new):
                return True
            if obj is not None and store.put_if_match(key, new, obj.etag):
                return True
    except (CloudError, botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        pass
    return False


def window_note(below: int, window: str) -> str:
    """How a ledger read from its newest end was read, for the reader to show."""
    return (f"{window.replace('ledger records', 'newest ledger records', 1) if window else 'no newer records'}; "
            f"the {below} below them from the index, checked as one hash chain with them")
