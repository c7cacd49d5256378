"""The candidates for a stack's state: every copy Pulumi and S3 kept, listed cheaply, evaluated lazily.

Listing costs a few LIST pages and no downloads: every S3 version (and delete marker) of
`.pulumi/stacks/<project>/<stack>.json[.gz|.zst]`, Pulumi's `.bak` copies, the `<stack>.json.<nanos>`
copies kept under PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS, history checkpoints and backups. Evaluating
a candidate (download, parse, integrity) is the expensive part, so it is done by `CandidateEvaluator`
on demand, newest first, and a caller stops as soon as it has what it needs:

- with an intact ledger, `match_ledger` places candidates by their S3 version id (recorded in each
  ledger record) before anything is downloaded; the chosen candidate then needs one download to
  verify (its sha256 against the ledger's, its integrity, its lineage);
- without a ledger, evaluation walks newest first and stops at the first integral candidate.

No (key, version id) is downloaded twice. Two candidates with the same single-part ETag and size hold
the same bytes (the ETag is their MD5, or a server-side copy's), so the second reuses the first one's
evaluation; that evaluation says so (`via="etag-equal"`).
"""

from __future__ import annotations

import hashlib
import re
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable, Iterable, Iterator, Optional

from bootstrap.records import layout
from bootstrap.aws.objectstore import ObjectStore, ObjectVersion
from recovery.integrity import foreign_stacks, verify_integrity
from recovery.state_bytes import NotAState
from recovery.state_model import Finding, StateDoc
from recovery.state_parse import parse_state

SOURCES = ("current", "version", "bak", "history", "backup", "retained")
_SOURCE_RANK = {s: i for i, s in enumerate(SOURCES)}
_HISTORY_SUFFIXES = (".checkpoint.json", ".checkpoint.json.gz", ".checkpoint.json.zst")
_NANOS = re.compile(r"(\d{16,20})")
# A scan of every version keeps this many downloads in flight while it parses, but at most this many
# bytes of states ahead of the parser (always at least one state).
SCAN_PREFETCH = 4
PREFETCH_BYTES = 64 << 20


@dataclass(frozen=True)
class Evaluation:
    verdict: str                      # "integral" | "damaged" | "unreadable" | "missing"
    sha256: Optional[str] = None
    findings: tuple[Finding, ...] = ()
    lineage: Optional[str] = None
    resource_count: int = 0
    pending_operations: tuple[str, ...] = ()
    stack: Optional[str] = None
    error: Optional[str] = None
    via: str = "download"             # "download" | "etag-equal"
    foreign: tuple[str, ...] = ()     # `<stack>::<project>` its URNs name other than the expected stack's


@dataclass(frozen=True)
class Candidate:
    source: str                       # one of SOURCES
    key: str
    version_id: Optional[str]
    last_modified: datetime
    size: int
    etag: str
    is_latest: bool
    evaluation: Optional[Evaluation] = None
    # Finer than S3's LastModified: Pulumi's history/backup names carry unix nanoseconds, and within
    # one key S3 lists versions newest first.
    order: tuple = ()

    @property
    def ident(self) -> tuple[str, Optional[str]]:
        return (self.key, self.version_id)

    @property
    def verdict(self) -> Optional[str]:
        return self.evaluation.verdict if self.evaluation else None

    @property
    def sha256(self) -> Optional[str]:
        return self.evaluation.sha256 if self.evaluation else None

    @property
    def lineage(self) -> Optional[str]:
        return self.evaluation.lineage if self.evaluation else None

    def to_dict(self) -> dict:
        ev = self.evaluation
        read = ev is not None and ev.verdict in ("integral", "damaged")
        return {
            "source": self.source, "key": self.key, "version_id": self.version_id,
            "last_modified": self.last_modified.isoformat(), "size": self.size, "etag": self.etag,
            "is_latest": self.is_latest, "evaluated": ev is not None,
            "verdict": ev.verdict if ev else None, "sha256": ev.sha256 if ev else None,
            "lineage": ev.lineage if ev else None, "resources": ev.resource_count if read else None,
            "pending_operations": list(ev.pending_operations) if read else None,
            "findings": [f.to_dict() for f in ev.findings] if ev else None,
            "error": ev.error if ev else None, "via": ev.via if ev else None,
            "foreign_stacks": list(ev.foreign) if ev else None,
        }


@dataclass(frozen=True)
class DeleteMarker:
    key: str
    version_id: str
    last_modified: datetime
    is_latest: bool

    def to_dict(self) -> dict:
        return {"key": self.key, "version_id": self.version_id, "last_modified": self.last_modified.isoformat(),
                "is_latest": self.is_latest}


@dataclass(frozen=True)
class CandidateSet:
    project: str
    stack: str
    candidates: tuple[Candidate, ...]          # newest first
    delete_markers: tuple[DeleteMarker, ...]   # newest first; part of the timeline, never candidates

    @property
    def current(self) -> tuple[Candidate, ...]:
        return tuple(c for c in self.candidates if c.source == "current")

    @property
    def current_deleted(self) -> bool:
        """The stack object's newest version is a delete marker: `pulumi` sees no state at all."""
        stack_keys = set(layout.stack_keys(self.project, self.stack))
        return not self.current and any(m.is_latest and m.key in stack_keys for m in self.delete_markers)

    def timeline(self) -> list[tuple[datetime, str, object]]:
        """Candidates and delete markers merged, newest first: (time, "candidate"|"delete-marker", item)."""
        events = [(c.last_modified, "candidate", c) for c in self.candidates]
        events += [(m.last_modified, "delete-marker", m) for m in self.delete_markers]
        # S3 times can tie (second resolution); a key's latest entry is its newest whatever the time says.
        return sorted(events, key=lambda e: (e[0], e[2].is_latest), reverse=True)

    def with_evaluations(self, evaluated: Iterable[Candidate]) -> "CandidateSet":
        by_id = {c.ident: c for c in evaluated}
        return replace(self, candidates=tuple(by_id.get(c.ident, c) for c in self.candidates))


# -- listing (no downloads) ------------------------------------------------------------------------


def _nanos(key: str) -> int:
    m = _NANOS.search(key.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else 0


def _retained(key: str, stack_keys: set[str]) -> bool:
    """A copy kept under PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS: after each save Pulumi writes the same bytes
    to `<stack file>.<UnixNano>` (pkg/backend/diy/state.go, `fmt.Sprintf("%v.%v", file, time.Now().UnixNano())`)."""
    base, dot, nanos = key.rpartition(".")
    return bool(dot) and nanos.isascii() and nanos.isdigit() and base in stack_keys


def _candidate(v: ObjectVersion, source: str, position: int) -> Candidate:
    return Candidate(source, v.key, v.version_id, v.last_modified, v.size, v.etag, v.is_latest,
                     order=(v.last_modified, _nanos(v.key), -position, -_SOURCE_RANK[source]))


def list_candidates(store: ObjectStore, project: str, stack: str) -> CandidateSet:
    """Every candidate copy of the stack's state, newest first, with the delete markers beside them."""
    stack_keys = set(layout.stack_keys(project, stack))
    bak_keys = set(layout.bak_keys(project, stack))
    found: list[Candidate] = []
    markers: list[DeleteMarker] = []
    positions: dict[str, int] = {}

    def take(v: ObjectVersion, source: Callable[[ObjectVersion], str]) -> None:
        if v.delete_marker:
            markers.append(DeleteMarker(v.key, v.version_id, v.last_modified, v.is_latest))
            return
        src = source(v)
        pos = positions.get(v.key, 0)
        positions[v.key] = pos + 1
        found.append(_candidate(v, src, pos))

    # One listing covers the stack object, its .bak and its retained copies: all start with `<stack>.json`.
    for v in store.versions(layout.stack_key(project, stack)):
        if v.key in stack_keys:
            take(v, lambda v: "current" if v.is_latest else "version")
        elif v.key in bak_keys:
            take(v, lambda v: "bak")
        elif _retained(v.key, stack_keys):
            take(v, lambda v: "retained")
    for v in store.versions(layout.history_prefix(project, stack)):
        if v.key.endswith(_HISTORY_SUFFIXES):  # `.history.json` files describe updates; they hold no state
            take(v, lambda v: "history")
    for v in store.versions(layout.backups_prefix(project, stack)):
        take(v, lambda v: "backup")

    found.sort(key=lambda c: c.order, reverse=True)
    markers.sort(key=lambda m: m.last_modified, reverse=True)
    return CandidateSet(project, stack, tuple(found), tuple(markers))


# -- evaluation (downloads, each at most once) -----------------------------------------------------


def _single_part_etag(etag: str) -> Optional[str]:
    e = etag.strip('"')
    return e if e and "-" not in e else None


def evaluate_bytes(raw: Optional[bytes], expected_stack: Optional[str], source: str,
                   sha256: Optional[str] = None) -> tuple[Evaluation, Optional[StateDoc]]:
    """The verdict on one copy's bytes (pure); `sha256` is their digest, when already known."""
    if raw is None:
        return Evaluation("missing", error="the version is no longer in the bucket"), None
    try:
        doc = parse_state(raw, source, sha256=sha256)
    except NotAState as exc:
        return Evaluation("unreadable", sha256=sha256 or hashlib.sha256(raw).hexdigest(), error=exc.reason), None
    findings = verify_integrity(doc, expected_stack)
    return Evaluation(
        "integral" if not findings else "damaged", sha256=doc.sha256, findings=findings, lineage=doc.lineage,
        resource_count=len(doc.resources), pending_operations=tuple(p.type for p in doc.pending_operations),
        stack=doc.stack, foreign=foreign_stacks(doc, expected_stack),
    ), doc


class _QuickHandoffs:
    """A 1 ms GIL switch interval while any read-ahead scan runs, Python's 5 ms again after the last one.

    A download thread needs the GIL for a moment between network reads; at 5 ms, each of those moments
    waits behind the parser, the read-ahead window drains and the parser then waits for the network
    (measured: a 500-version scan about 5% slower). The interval is the process's, so scans that overlap
    share one setting, and the first scan's saved value is the one restored."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved, 0.001))
            self._depth += 1

    def leave(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                sys.setswitchinterval(self._saved)


_quick_handoffs = _QuickHandoffs()


def _where(c: Candidate) -> str:
    return f"s3://{c.key}?versionId={c.version_id}"


@dataclass(frozen=True)
class _Downloaded:
    body: bytes
    sha256: str


class CandidateEvaluator:
    """Downloads and judges candidates on demand; remembers every verdict and the last document.

    `newest_first(..., prefetch=n)` keeps up to n downloads in flight on a small pool while the caller's
    thread parses the previous copy, so a scan of every version waits for the network and the parser
    side by side instead of one after the other. The window bounds memory (n states in flight), and
    each (key, version id) is still downloaded at most once.
    """

    def __init__(self, store: ObjectStore, expected_stack: Optional[str] = None, *, share_by_etag: bool = True):
        self.store = store
        self.expected_stack = expected_stack
        self.share_by_etag = share_by_etag
        self.downloads = 0
        self.bytes_downloaded = 0
        self._count = threading.Lock()  # downloads finish on pool threads
        self._by_ident: dict[tuple[str, Optional[str]], Evaluation] = {}
        self._by_etag: dict[tuple[str, int], Evaluation] = {}
        self._last: Optional[tuple[tuple[str, Optional[str]], StateDoc]] = None

    def _download(self, c: Candidate) -> Optional[_Downloaded]:
        obj = self.store.get(c.key, c.version_id)
        with self._count:
            self.downloads += 1
            if obj is not None:
                self.bytes_downloaded += len(obj.body)
        # Hashed here: on a prefetch thread the digest is taken (hashlib lets go of the GIL) while the
        # caller's thread parses the previous state.
        return _Downloaded(obj.body, hashlib.sha256(obj.body).hexdigest()) if obj is not None else None

    def _run(self, c: Candidate) -> Evaluation:
        return self._judge(c, self._download(c))

    def _verdict(self, c: Candidate, got: Optional[_Downloaded]) -> tuple[Evaluation, Optional[StateDoc]]:
        return evaluate_bytes(got.body if got else None, self.expected_stack, _where(c), got.sha256 if got else None)

    def _judge(self, c: Candidate, got: Optional[_Downloaded]) -> Evaluation:
        ev, doc = self._verdict(c, got)
        self._by_ident[c.ident] = ev
        if doc is not None:
            self._last = (c.ident, doc)
        etag = _single_part_etag(c.etag)
        if etag and ev.verdict != "missing":
            self._by_etag.setdefault((etag, c.size), ev)
        return ev

    def _known(self, c: Candidate) -> Optional[Evaluation]:
        """The verdict on `c` without a download: its own, or an identical copy's."""
        if c.ident in self._by_ident:
            return self._by_ident[c.ident]
        etag = _single_part_etag(c.etag)
        if self.share_by_etag and etag and (etag, c.size) in self._by_etag:
            ev = replace(self._by_etag[(etag, c.size)], via="etag-equal")
            self._by_ident[c.ident] = ev
            return ev
        return None

    def evaluate(self, c: Candidate) -> Candidate:
        """`c` with its evaluation; downloads only if neither it nor an identical copy was judged yet."""
        known = self._known(c)
        return replace(c, evaluation=known if known is not None else self._run(c))

    def load(self, c: Candidate) -> StateDoc:
        """The parsed document of `c` (raises NotAState); the last one evaluated is kept, not re-downloaded."""
        if self._last is not None and self._last[0] == c.ident:
            return self._last[1]
        ev, doc = self._verdict(c, self._download(c))
        self._by_ident.setdefault(c.ident, ev)
        if doc is None:
            raise NotAState(_where(c), ev.error or "it cannot be read")
        self._last = (c.ident, doc)
        return doc

    def newest_first(self, candidates: Iterable[Candidate], *, prefetch: int = 0) -> Iterator[Candidate]:
        """Evaluate lazily in the order given (CandidateSet order is newest first); stop whenever you like.

        With `prefetch`, up to that many later candidates are downloaded ahead while this one is parsed;
        stopping early leaves at most that many downloads unused. A candidate that an earlier one in the
        order will settle (same ident, or same single-part ETag and size) is never fetched ahead.
        """
        if prefetch <= 0:
            for c in candidates:
                yield self.evaluate(c)
            return
        todo = list(candidates)
        pool = ThreadPoolExecutor(max_workers=prefetch, thread_name_prefix="state-download")
        inflight: dict[tuple[str, Optional[str]], Future] = {}
        sizes: dict[tuple[str, Optional[str]], int] = {}
        claimed: set = set()  # idents and (etag, size) that an earlier candidate will settle
        ahead = 0

        def schedule() -> None:
            nonlocal ahead
            while ahead < len(todo) and len(inflight) < prefetch:
                c = todo[ahead]
                if inflight and sum(sizes[i] for i in inflight) + c.size > PREFETCH_BYTES:
                    return  # large states: fewer in flight, so memory stays a few states' worth
                ahead += 1
                etag = _single_part_etag(c.etag) if self.share_by_etag else None
                keys = [c.ident] + ([(etag, c.size)] if etag else [])
                if self._known(c) is not None or any(k in claimed for k in keys):
                    continue
                claimed.update(keys)
                sizes[c.ident] = c.size
                inflight[c.ident] = pool.submit(self._download, c)

        _quick_handoffs.enter()
        try:
            for i, c in enumerate(todo):
                ahead = max(ahead, i)
                schedule()
                future = inflight.pop(c.ident, None)
                known = self._known(c)
                if known is not None:
                    yield replace(c, evaluation=known)
                elif future is not None:
                    got, future = future.result(), None
                    schedule()  # keep the window full while this one is parsed
                    ev = self._judge(c, got)
                    got = None  # hold no bytes while the caller looks at the verdict
                    yield replace(c, evaluation=ev)
                else:
                    yield self.evaluate(c)
        finally:
            _quick_handoffs.leave()
            for f in inflight.values():
                f.cancel()
            pool.shutdown(wait=True)

    def first_integral(self, candidates: Iterable[Candidate],
                       accept: Callable[[Candidate], bool] = lambda c: True) -> Optional[Candidate]:
        """The newest integral candidate `accept` agrees with (e.g. the right lineage), evaluating no further."""
        for c in self.newest_first(candidates):
            if c.verdict == "integral" and accept(c):
                return c
        return None


# -- matching ledger records without downloading ---------------------------------------------------


@dataclass(frozen=True)
class LedgerRef:
    """What matching needs from one ledger record (the ledger module builds these)."""

    serial: int
    sha256: str
    version_id: Optional[str] = None
    etag: Optional[str] = None
    size: Optional[int] = None


@dataclass(frozen=True)
class LedgerMatch:
    serial: int
    by: str            # "version_id" (exact), "sha256" (exact, needs the candidate evaluated), "etag" (hint)
    sha256: str


def match_ledger(candidates: Iterable[Candidate], refs: Iterable[LedgerRef]) -> dict[tuple[str, Optional[str]], LedgerMatch]:
    """Place each candidate against the ledger: by version id (no download), by sha256 when it was
    evaluated, else by single-part ETag and size (a hint to confirm by downloading). Unmatched
    candidates are absent from the result: written mid-update, or not recorded."""
    refs = list(refs)
    by_vid = {r.version_id: r for r in refs if r.version_id}
    by_sha = {r.sha256: r for r in refs if r.sha256}
    by_etag = {(e, r.size): r for r in refs if r.size is not None and (e := _single_part_etag(r.etag or ""))}
    out: dict[tuple[str, Optional[str]], LedgerMatch] = {}
    for c in candidates:
        if c.version_id and c.version_id in by_vid:
            r = by_vid[c.version_id]
            out[c.ident] = LedgerMatch(r.serial, "version_id", r.sha256)
        elif c.sha256 and c.sha256 in by_sha:
            r = by_sha[c.sha256]
            out[c.ident] = LedgerMatch(r.serial, "sha256", r.sha256)
        elif (e := _single_part_etag(c.etag)) and (e, c.size) in by_etag:
            r = by_etag[(e, c.size)]
            out[c.ident] = LedgerMatch(r.serial, "etag", r.sha256)
    return out
