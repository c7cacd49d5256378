"""The candidates for a stack's state: every copy Pulumi and S3 kept, listed cheaply, placed on the ledger.

Listing costs a few LIST pages and no downloads: every S3 version (and delete marker) of
`.pulumi/stacks/<project>/<stack>.json[.gz|.zst]`, Pulumi's `.bak` copies, the `<stack>.json.<nanos>`
copies kept under PULUMI_DIY_BACKEND_RETAIN_CHECKPOINTS, history checkpoints and backups. Evaluating
a candidate (download, parse, integrity) is the expensive part, so it is done by
`recovery.choice.evaluator.CandidateEvaluator` on demand, newest first, and a caller stops as soon as it has
what it needs:

- with an intact ledger, `match_ledger` places candidates by their S3 version id (recorded in each
  ledger record) before anything is downloaded; the chosen candidate then needs one download to
  verify (its sha256 against the ledger's, its integrity, its lineage);
- without a ledger, evaluation walks newest first and stops at the first integral candidate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Callable, Iterable, Optional

from bootstrap.records import layout
from bootstrap.aws.objectstore import ObjectStore, ObjectVersion
from recovery.state.state_model import Finding

SOURCES = ("current", "version", "bak", "history", "backup", "retained")
_SOURCE_RANK = {s: i for i, s in enumerate(SOURCES)}
_HISTORY_SUFFIXES = (".checkpoint.json", ".checkpoint.json.gz", ".checkpoint.json.zst")
_NANOS = re.compile(r"(\d{16,20})")


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
    # One listing covers the stack object, its .bak and its retained copies: all start with `<stack>.json`.
    return candidates_from(project, stack, store.versions(layout.stack_key(project, stack)),
                           store.versions(layout.history_prefix(project, stack)),
                           store.versions(layout.backups_prefix(project, stack)))


def candidates_from(project: str, stack: str, stack_listing: Iterable[ObjectVersion],
                    history: Iterable[ObjectVersion], backups: Iterable[ObjectVersion]) -> CandidateSet:
    """The candidates in three version listings (pure): the `<stack>.json` prefix, history, backups."""
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

    for v in stack_listing:
        if v.key in stack_keys:
            take(v, lambda v: "current" if v.is_latest else "version")
        elif v.key in bak_keys:
            take(v, lambda v: "bak")
        elif _retained(v.key, stack_keys):
            take(v, lambda v: "retained")
    for v in history:
        if v.key.endswith(_HISTORY_SUFFIXES):  # `.history.json` files describe updates; they hold no state
            take(v, lambda v: "history")
    for v in backups:
        take(v, lambda v: "backup")

    found.sort(key=lambda c: c.order, reverse=True)
    markers.sort(key=lambda m: m.last_modified, reverse=True)
    return CandidateSet(project, stack, tuple(found), tuple(markers))


class VersionPages:
    """One prefix's version listing, read a page at a time only as far as a caller needs, never a page twice.

    S3 lists keys in order and each key's versions newest first, so a first page of the stack object's prefix
    holds its newest versions. While the listing is incomplete, exactly one key (`partial_key`) is listed in
    part: the keys before it are complete, and those after it can be listed on their own (`after_partial`)."""

    def __init__(self, store: ObjectStore, prefix: str):
        self.store, self.prefix = store, prefix
        self.items: list[ObjectVersion] = []
        self._marker: Optional[tuple[str, Optional[str]]] = None
        self._after: Optional[list[ObjectVersion]] = None
        self.complete = False

    @property
    def partial_key(self) -> Optional[str]:
        return None if self.complete else self._marker[0]

    def more(self, max_keys: int = 1000) -> None:
        """Read the next page (of the partial key only, once the keys after it were listed on their own)."""
        if self.complete:
            return
        page, self._marker = self.store.versions_page(self.prefix, max_keys, self._marker)
        if self._after is not None:
            mine = [v for v in page if v.key == self._partial]
            if len(mine) < len(page) or self._marker is None or self._marker[0] != self._partial:
                self._marker = None  # past the partial key: the rest is listed already
            page = mine
        self.items.extend(page)
        if self._marker is None:
            self.complete = True
            self.items.extend(self._after or ())
            self._after = None

    def after_partial(self) -> list[ObjectVersion]:
        """Every version of the keys after the partial one (listed once)."""
        if self.complete:
            return []
        if self._after is None:
            self._partial: str = self._marker[0]
            if self._partial == self.prefix:  # the plain `<stack>.json`: every key after it is `<stack>.json.…`
                self._after = list(_versions_from(self.store, self.prefix + ".", None))
            else:  # S3 starts after the marker's key; moto lists it too (less one version): it is dropped here
                self._after = [v for v in _versions_from(self.store, self.prefix, (self._partial, None))
                               if v.key != self._partial]
        return self._after

    def listed(self) -> list[ObjectVersion]:
        """What has been read: every complete key, and the newest versions of the partial one."""
        return self.items + (self._after or [])

    def rest(self) -> list[ObjectVersion]:
        while not self.complete:
            self.more()
        return self.items


def _versions_from(store: ObjectStore, prefix: str, marker: Optional[tuple[str, Optional[str]]]
                   ) -> Iterable[ObjectVersion]:
    while True:
        page, marker = store.versions_page(prefix, 1000, marker)
        yield from page
        if marker is None:
            return


# -- matching ledger records without downloading ---------------------------------------------------


def single_part_etag(etag: str) -> Optional[str]:
    """The ETag when it is a single-part upload's, the MD5 of the bytes (or a server-side copy's): two
    candidates with the same one and the same size hold the same bytes."""
    e = etag.strip('"')
    return e if e and "-" not in e else None


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
    by_etag = {(e, r.size): r for r in refs if r.size is not None and (e := single_part_etag(r.etag or ""))}
    out: dict[tuple[str, Optional[str]], LedgerMatch] = {}
    for c in candidates:
        if c.version_id and c.version_id in by_vid:
            r = by_vid[c.version_id]
            out[c.ident] = LedgerMatch(r.serial, "version_id", r.sha256)
        elif c.sha256 and c.sha256 in by_sha:
            r = by_sha[c.sha256]
            out[c.ident] = LedgerMatch(r.serial, "sha256", r.sha256)
        elif (e := single_part_etag(c.etag)) and (e, c.size) in by_etag:
            r = by_etag[(e, c.size)]
            out[c.ident] = LedgerMatch(r.serial, "etag", r.sha256)
    return out
