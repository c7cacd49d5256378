"""The lineage/serial ledger: one record per successful state-changing operation on a stack.

`.groundctl/ledger/<project>/<stack>/<serial:012d>.json` holds the lineage (minted at a stack's
first record), the serial (1, 2, 3 …), the sha256 of the stored state object and its S3 version id,
and `previous_sha256`, which makes the records a hash chain. A record is written with
If-None-Match: * so two writers can never claim one serial.

The I/O here is reading the ledger and appending to it. Judging a ledger's records is pure
(`verify_chain`); placing state candidates against them is `recovery.lineage.placement`. A long ledger is
read through its index (`bootstrap.records.ledger_index`) in a few calls; what the index cannot vouch for
is read one record at a time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Callable, Mapping, Optional

from bootstrap.records import layout, ledger_index
from bootstrap.kit.errors import CloudError, StateUnusable
from bootstrap.aws.objectstore import ObjectStore, StoredObject
from bootstrap.kit.untrusted import Unreadable, decode_json, epoch, load_record, text, when, whole

_RECORD_NAME = re.compile(r"^(\d{12})\.json$")
MAX_APPEND_ATTEMPTS = 60
# An emulator's If-None-Match check may not be atomic: two writers can both be told they created a record.
# Waiting this long before reading back lets a racing write land, so the read-back decides; not where the store's
# conditional writes are known to be atomic (ObjectStore.atomic_conditional_writes).
SETTLE_SECONDS = 0.1


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def epoch_seconds(value: object) -> float:
    """A datetime (naive means UTC), an ISO string or epoch seconds, as epoch seconds."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(value, str):
        return epoch(value)
    return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class LedgerRecord:
    lineage: str
    serial: int
    sha256: str
    version_id: Optional[str]
    previous_sha256: Optional[str]
    operation: str
    run_id: str
    at: str
    git_commit: Optional[str]
    resources: int
    stack_key: str
    state_last_modified: Optional[str] = None  # S3's own time for the recorded version

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, indent=2).encode()

    @classmethod
    def from_dict(cls, d: dict) -> "LedgerRecord":
        """Raises ValueError naming the first field of the wrong type, size or form."""
        def s(name: str, optional: bool = False):
            return text(d, name, optional=optional)
        serial, resources = whole(d, "serial", low=1), whole(d, "resources")
        sha = s("sha256")
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise ValueError("field 'sha256' is not a sha256 hex digest")
        previous = s("previous_sha256", True)
        if previous is not None and not re.fullmatch(r"[0-9a-f]{64}", previous):
            raise ValueError("field 'previous_sha256' is not a sha256 hex digest")
        return cls(lineage=s("lineage"), serial=serial, sha256=sha, version_id=s("version_id", True),
                   previous_sha256=previous, operation=s("operation"), run_id=s("run_id"),
                   at=when(d, "at"), git_commit=s("git_commit", True), resources=resources, stack_key=s("stack_key"),
                   state_last_modified=when(d, "state_last_modified", optional=True))


@dataclass(frozen=True)
class Finding:
    code: str
    serial: Optional[int]
    sentence: str


@dataclass(frozen=True)
class LedgerRead:
    project: str
    stack: str
    records: tuple[LedgerRecord, ...]        # parseable records, sorted by serial
    problems: tuple[Finding, ...]            # unparseable record, stray object, gap in serials
    highest_serial: int                      # highest serial any ledger object claims, parseable or not
    object_versions: Mapping[str, int] = field(default_factory=dict)  # stored versions of each ledger object
    index_note: str = ""                     # how much of it the index vouched for, and why not the rest
    window_start: int = 1                    # records below it were taken from the index (bootstrap.records.ledger_window)

    @property
    def head(self) -> Optional[LedgerRecord]:
        return self.records[-1] if self.records else None

    @property
    def missing(self) -> bool:
        return self.highest_serial == 0 and not self.records

    @property
    def damaged(self) -> bool:
        return bool(self.problems)


@dataclass(frozen=True)
class ChainVerdict:
    ok: bool
    lineage: Optional[str]
    head: Optional[LedgerRecord]
    findings: tuple[Finding, ...]

    @property
    def forks(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.code == "fork")


# -- reading ---------------------------------------------------------------------------------------

def _parse_record(key: str, serial: int, body: bytes) -> tuple[Optional[LedgerRecord], Optional[Finding]]:
    try:
        rec = LedgerRecord.from_dict(load_record(body, key, kind="ledger record"))
    except Unreadable as exc:
        return None, Finding("unparseable-record", serial, f"ledger record {key} cannot be read ({exc.reason}).")
    except ValueError as exc:
        return None, Finding("unparseable-record", serial, f"ledger record {key} cannot be read ({exc}).")
    if rec.serial != serial:
        return None, Finding("serial-mismatch", serial,
                             f"ledger record {key} says serial {rec.serial} but is stored as serial {serial}.")
    return rec, None


def read_ledger(store: ObjectStore, project: str, stack: str,
                known: Optional[tuple[dict[int, bytes], Optional[str]]] = None) -> LedgerRead:
    """Every record of a stack's ledger, and what is wrong with it. A damaged ledger is reported, not raised.

    One version listing of the ledger (which also counts each object's versions, the tamper check's input),
    the index's listing and object (unless `known` holds what `ledger_index.get_index` read), then one GET for
    each record the index cannot vouch for."""
    prefix = layout.ledger_prefix(project, stack)
    with ThreadPoolExecutor(max_workers=1) as side:
        index = side.submit(ledger_index.read_index, store, project, stack, known)
        listed = list(store.versions(prefix))
    entries, digests, index_problem = index.result()
    return assemble(store, project, stack, listed, entries, digests, index_problem)


def assemble(store: ObjectStore, project: str, stack: str, listed, entries: Mapping[int, bytes],
             digests: Mapping, index_problem: Optional[str], below: Mapping[int, LedgerRecord] = {},
             start: int = 1) -> LedgerRead:
    """The ledger from a version listing of its records (all of them, or those from serial `start` on, with the
    records below `start` given), the index's entries and digests: each listed record taken from the index
    where it vouches for it, else read."""
    prefix = layout.ledger_prefix(project, stack)
    by_key: dict[str, list] = {}
    for v in listed:
        by_key.setdefault(v.key, []).append(v)
    counts = {k: sum(1 for v in vs if not v.delete_marker) for k, vs in by_key.items()}
    counts = {k: n for k, n in counts.items() if n}
    problems: list[Finding] = []
    wanted: dict[int, str] = {}
    versions_of: dict[int, list] = {}
    for key in sorted(by_key):
        if next((v for v in by_key[key] if v.is_latest), by_key[key][0]).delete_marker:
            continue  # deleted: not a current object, so a gap below (a rewrite shows in its versions count)
        m = _RECORD_NAME.fullmatch(key[len(prefix):])
        if not m:
            problems.append(Finding("stray-object", None, f"{key} is in the ledger but is not a ledger record."))
            continue
        wanted[int(m.group(1))] = key
        versions_of[int(m.group(1))] = by_key[key]
    taken, refused = ledger_index.vouched(entries, digests, versions_of)
    parsed = {serial: _parse_record(wanted[serial], serial, body) for serial, body in taken.items()}
    todo = sorted(refused)
    if todo:
        # Records are small and independent; a few parallel reads keep a long ledger quick to read.
        with ThreadPoolExecutor(max_workers=min(8, len(todo))) as pool:
            bodies = list(pool.map(lambda s: store.get(wanted[s]), todo))
        for serial, obj in zip(todo, bodies):
            if obj is not None:  # deleted between listing and reading: reported as a gap below
                parsed[serial] = _parse_record(wanted[serial], serial, obj.body)
    parsed.update({serial: (rec, None) for serial, rec in below.items()})
    records = []
    for serial in sorted(parsed):
        rec, problem = parsed[serial]
        if rec:
            records.append(rec)
        if problem:
            problems.append(problem)
    highest = max([*wanted, *below], default=0)
    for missing in (s for s in range(1, highest) if s not in parsed):
        problems.append(Finding("gap", missing, f"serial {missing} is missing from the ledger."))
    note = ledger_index.note(len(taken), refused, index_problem)
    if below:
        note = ledger_index.window_note(len(below), note)
    return LedgerRead(project, stack, tuple(records), tuple(problems), highest, counts, note, start)


def highest_serial(store: ObjectStore, project: str, stack: str) -> int:
    """The highest serial any ledger object claims, from the listing alone."""
    prefix = layout.ledger_prefix(project, stack)
    return max((int(m.group(1)) for key, _s, _m in store.keys(prefix)
                if (m := _RECORD_NAME.fullmatch(key[len(prefix):]))), default=0)


def _head(store: ObjectStore, project: str, stack: str,
          cache: dict[str, tuple]) -> tuple[Optional[LedgerRecord], int]:
    """(newest parseable record, highest serial claimed) from one listing and, usually, one read."""
    prefix = layout.ledger_prefix(project, stack)
    serials = sorted(((int(m.group(1)), key) for key, _s, _m in store.keys(prefix)
                      if (m := _RECORD_NAME.fullmatch(key[len(prefix):]))), reverse=True)
    for serial, key in serials:
        if key not in cache:
            obj = store.get(key)
            if obj is None:
                continue
            cache[key] = _parse_record(key, serial, obj.body)
        if cache[key][0] is not None:
            return cache[key][0], serials[0][0]
    return None, serials[0][0] if serials else 0


def _record_bytes(store: ObjectStore, project: str, stack: str, serial: int) -> Optional[bytes]:
    obj = store.get(layout.ledger_key(project, stack, serial))
    return obj.body if obj is not None else None


def current_lineage(store: ObjectStore, project: str, stack: str) -> Optional[str]:
    """The lineage of the stack's ledger (its head's), or None when the stack has no ledger yet."""
    head, _ = _head(store, project, stack, {})
    return head.lineage if head else None


# -- the stored state ------------------------------------------------------------------------------

def decompress(body: bytes) -> bytes:
    """Plain, gzip or zstd bytes, detected by magic number."""
    if body[:2] == b"\x1f\x8b":
        return gzip.decompress(body)
    if body[:4] == b"\x28\xb5\x2f\xfd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(body).read()
    return body


def count_resources(body: bytes) -> int:
    """Resources in a checkpoint (`{version, checkpoint: {latest: {resources}}}`) or an export.
    Raises ValueError for anything that is not one."""
    try:
        doc = decode_json(decompress(body).decode("utf-8", errors="replace"))
    except ValueError:
        raise
    except Exception as exc:  # a truncated gzip/zstd stream raises its library's own error
        raise ValueError(f"the state cannot be decompressed ({type(exc).__name__})") from None
    if not isinstance(doc, dict):
        raise ValueError("the state is not a JSON object")
    if isinstance(doc.get("checkpoint"), dict):
        latest = doc["checkpoint"].get("latest") or {}  # a stack with no deployment yet has no `latest`
    else:
        latest = doc.get("deployment")
    if not isinstance(latest, dict):
        raise ValueError("the state has no checkpoint.latest or deployment object")
    resources = latest.get("resources") or []
    if not isinstance(resources, list):
        raise ValueError("'resources' is not a list")
    return len(resources)


def current_state(store: ObjectStore, project: str, stack: str) -> Optional[StoredObject]:
    """The stack's current state object, whichever of .json/.json.gz/.json.zst is newest."""
    exact = set(layout.stack_keys(project, stack))
    found = [(mod, key) for key, _size, mod in store.keys(layout.stack_key(project, stack)) if key in exact]
    if not found:
        return None
    return store.get(max(found)[1])


# -- appending -------------------------------------------------------------------------------------

def append_record(store: ObjectStore, project: str, stack: str, *, operation: str, run_id: str,
                  git_commit: Optional[str] = None, lineage: Optional[str] = None,
                  clock: Callable[[], float] = time.time, state_key: Optional[str] = None,
                  state_version: Optional[str] = None, parent_sha256: Optional[str] = None,
                  settle_seconds: float = SETTLE_SECONDS,
                  max_attempts: int = MAX_APPEND_ATTEMPTS) -> LedgerRecord:
    """Record the stack's stored state as the next serial.

    By default the current state object is recorded; `state_key`/`state_version` name one version
    instead (a restore knows exactly which copy it made). `parent_sha256`, when the caller knows the
    state its operation started from, is recorded as the previous hash even if another writer moved
    the head meanwhile, so that the branch shows up as a fork instead of being silently merged.
    """
    state = store.get(state_key, state_version) if state_key else current_state(store, project, stack)
    if state is None:
        raise StateUnusable(
            f"There is no stored state for stack {project}/{stack} to record in the ledger "
            f"({state_key or layout.stack_key(project, stack)}). The operation may not have written one; "
            f"check it with `groundctl state versions` before re-running."
        )
    try:
        resources = count_resources(state.body)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise StateUnusable(
            f"The stored state {state.key} (version {state.version_id}) cannot be read ({exc}), so it is not "
            f"recorded in the ledger. Inspect it with `groundctl state verify` before continuing."
        ) from None
    sha = hashlib.sha256(state.body).hexdigest()
    modified = iso(state.last_modified.timestamp()) if state.last_modified else None
    cache: dict[str, tuple] = {}
    for _attempt in range(max_attempts):
        head, highest = _head(store, project, stack, cache)
        if head and head.sha256 == sha and head.version_id == state.version_id:
            return head  # this exact stored object is already the head: never record it twice
        serial = highest + 1
        rec = LedgerRecord(
            lineage=head.lineage if head else (lineage or str(uuid.uuid4())), serial=serial, sha256=sha,
            version_id=state.version_id,
            previous_sha256=parent_sha256 if parent_sha256 is not None else (head.sha256 if head else None),
            operation=operation, run_id=run_id, at=iso(clock()), git_commit=git_commit, resources=resources,
            stack_key=state.key, state_last_modified=modified,
        )
        key = layout.ledger_key(project, stack, serial)
        body = rec.to_json()
        ledger_index.claim_digest(store, project, stack, serial, body)  # before the record: see ledger_index
        if store.put_if_absent(key, body):
            if settle_seconds and not getattr(store, "atomic_conditional_writes", False):
                time.sleep(settle_seconds)  # racing writes land first where the store may let two create it
            got = store.get(key)
            if got is not None and got.body == body:
                ledger_index.add_to_index(store, project, stack, serial, body,
                                          lambda s: _record_bytes(store, project, stack, s))
                return rec
        cache.pop(key, None)  # another writer has this serial: read it afresh and try the next one
    raise CloudError(
        f"Could not claim a ledger serial for {project}/{stack} after {max_attempts} attempts: other writers "
        "kept taking them. Only one run should change a stack at a time; check `groundctl lock status` and re-run."
    )


# -- judging the chain (pure) ----------------------------------------------------------------------

def verify_chain(records) -> ChainVerdict:
    """Serials contiguous from 1, one lineage, each record linked to the one before it, no fork.

    `records` may hold more than one record per serial (every version of the ledger objects, or
    records gathered from several places): two different states claiming one serial is a fork.
    """
    findings: list[Finding] = []
    by_serial: dict[int, list[LedgerRecord]] = {}
    for r in records:
        group = by_serial.setdefault(r.serial, [])
        if all((g.sha256, g.version_id) != (r.sha256, r.version_id) for g in group):
            group.append(r)
    if not by_serial:
        return ChainVerdict(True, None, None, ())
    serials = sorted(by_serial)
    for s in serials:
        if len(by_serial[s]) > 1:
            claims = "; ".join(f"sha256 {g.sha256[:12]} by run {g.run_id}" for g in by_serial[s])
            findings.append(Finding("fork", s, f"two different states claim serial {s}: {claims}."))
    chain = [by_serial[s][0] for s in serials]
    first = chain[0]
    if first.serial != 1:
        findings.append(Finding("missing-start", first.serial,
                                f"the ledger starts at serial {first.serial}; serials 1..{first.serial - 1} are missing."))
    elif first.previous_sha256 is not None:
        findings.append(Finding("chain-break", 1, "serial 1 names a previous state, so earlier history is missing."))
    for prev, cur in zip(chain, chain[1:]):
        if cur.serial != prev.serial + 1:
            findings.append(Finding("gap", prev.serial + 1,
                                    f"serials {prev.serial + 1}..{cur.serial - 1} are missing between "
                                    f"serial {prev.serial} and serial {cur.serial}."))
        if cur.lineage != first.lineage:
            findings.append(Finding("lineage-change", cur.serial,
                                    f"serial {cur.serial} has lineage {cur.lineage}, not the stack's {first.lineage}."))
        if cur.serial == prev.serial + 1 and cur.previous_sha256 != prev.sha256:
            earlier = [r for r in chain if r.serial < prev.serial and r.sha256 == cur.previous_sha256]
            if earlier:
                findings.append(Finding(
                    "fork", cur.serial,
                    f"serial {cur.serial} was derived from serial {earlier[-1].serial}'s state, not from serial "
                    f"{prev.serial}'s: two writers changed the stack from one parent."))
            else:
                findings.append(Finding(
                    "chain-break", cur.serial,
                    f"serial {cur.serial} names a previous state ({str(cur.previous_sha256)[:12]}) that is not serial "
                    f"{prev.serial}'s ({prev.sha256[:12]}): the hash chain is broken."))
    return ChainVerdict(not findings, first.lineage, chain[-1], tuple(findings))
