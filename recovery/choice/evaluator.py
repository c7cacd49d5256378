"""Judging the candidates for a stack's state: download, parse and integrity, on demand, newest first.

No (key, version id) is downloaded twice. Two candidates with the same single-part ETag and size hold
the same bytes (the ETag is their MD5, or a server-side copy's), so the second reuses the first one's
evaluation; that evaluation says so (`via="etag-equal"`). A scan of every version downloads ahead of
the parser in a bounded window.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator, Optional

from bootstrap.aws.objectstore import ObjectStore
from recovery.lineage.integrity import foreign_stacks, verify_integrity
from recovery.state.state_bytes import NotAState
from recovery.state.state_model import StateDoc
from recovery.state.state_parse import parse_state
from recovery.choice.versions import Candidate, Evaluation, single_part_etag

# A scan of every version keeps this many downloads in flight while it parses, but at most this many
# bytes of states ahead of the parser (always at least one state).
SCAN_PREFETCH = 4
PREFETCH_BYTES = 64 << 20


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
        etag = single_part_etag(c.etag)
        if etag and ev.verdict != "missing":
            self._by_etag.setdefault((etag, c.size), ev)
        return ev

    def _known(self, c: Candidate) -> Optional[Evaluation]:
        """The verdict on `c` without a download: its own, or an identical copy's."""
        if c.ident in self._by_ident:
            return self._by_ident[c.ident]
        etag = single_part_etag(c.etag)
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
                etag = single_part_etag(c.etag) if self.share_by_etag else None
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
