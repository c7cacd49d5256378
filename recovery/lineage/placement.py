"""Placing state candidates against the ledger, and the lineage verdict over them (pure).

A candidate is a stored state recovery could restore (a version of the stack object, a `.bak`, a
history checkpoint). `place_candidates` maps each to the serial it was recorded as, or between two
serials by time; `assess_lineage` adds what that shows (foreign lineages, out-of-band writes) and says
how strong the evidence is. The ledger's own I/O and chain check are `bootstrap.records.ledger`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

from bootstrap.records.ledger import ChainVerdict, Finding, LedgerRead, LedgerRecord, epoch_seconds, iso, verify_chain


class CandidateLike(Protocol):
    key: str
    version_id: Optional[str]
    sha256: str
    last_modified: object  # datetime, ISO string or epoch seconds
    lineage: Optional[str]


@dataclass(frozen=True)
class Candidate:
    """A stored state that recovery could restore: one version of the stack object, a `.bak`, a
    history checkpoint. `lineage` is its `groundctl_lineage` output, None when it has none."""
    key: str
    version_id: Optional[str]
    sha256: str
    last_modified: object
    lineage: Optional[str] = None


@dataclass(frozen=True)
class Placement:
    key: str
    version_id: Optional[str]
    sha256: str
    last_modified: str
    status: str                    # ledgered | between | after-head | before-first | time-only
    serial: Optional[int]          # the record it is (ledgered)
    after_serial: Optional[int]    # unledgered: written after this serial was recorded …
    before_serial: Optional[int]   # … and before this one
    rollback: bool                 # older than the ledger head
    lineage: Optional[str]
    lineage_ok: Optional[bool]     # None: the candidate names no lineage, or there is none to compare with
    sentence: str


@dataclass(frozen=True)
class LineageVerdict:
    evidence: str                  # ledger | ledger-damaged | time-order
    weaker: bool                   # True unless an intact ledger backs the placements
    summary: str
    lineage: Optional[str]
    head_serial: Optional[int]
    chain: Optional[ChainVerdict]
    placements: tuple[Placement, ...]
    findings: tuple[Finding, ...]

    @property
    def forks(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.code == "fork")

    @property
    def rollbacks(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.rollback)

    @property
    def foreign(self) -> tuple[Placement, ...]:
        return tuple(p for p in self.placements if p.lineage_ok is False)


def _record_time(r: LedgerRecord) -> float:
    return epoch_seconds(r.state_last_modified or r.at)


def _lineage_ok(c, lineage: Optional[str]) -> Optional[bool]:
    return None if c.lineage is None or lineage is None else c.lineage == lineage


def place_candidates(records, candidates) -> list[Placement]:
    """Map each candidate to its ledger record by sha256 (the exact version when recorded), or place an
    unledgered one between two serials by time. In the candidates' order."""
    recs = sorted(records, key=lambda r: r.serial)
    head = recs[-1] if recs else None
    lineage = head.lineage if head else None
    by_sha: dict[str, list[LedgerRecord]] = {}
    for r in recs:
        by_sha.setdefault(r.sha256, []).append(r)
    out = []
    for c in candidates:
        t = epoch_seconds(c.last_modified)
        common = dict(key=c.key, version_id=c.version_id, sha256=c.sha256, last_modified=iso(t),
                      lineage=c.lineage, lineage_ok=_lineage_ok(c, lineage))
        where = f"{c.key} (version {c.version_id}, {iso(t)})"
        matches = by_sha.get(c.sha256, [])
        if matches:
            exact = [r for r in matches if r.version_id == c.version_id]
            rec = (exact or matches)[-1]
            rollback = head is not None and rec.serial < head.serial
            copy = "" if exact else " (same content, stored again as another version)"
            out.append(Placement(**common, status="ledgered", serial=rec.serial, after_serial=None,
                                 before_serial=None, rollback=rollback,
                                 sentence=f"{where} is serial {rec.serial}{copy}"
                                          + (f", older than the head serial {head.serial}." if rollback else ".")))
            continue
        # A copy from the same second as a record is put before it (see recovery.choice.choose_inputs.options_from).
        after = [r.serial for r in recs if _record_time(r) < t]
        before = [r.serial for r in recs if _record_time(r) >= t]
        a, b = (max(after) if after else None), (min(before) if before else None)
        if head is None:
            status, sentence, rollback = "time-only", f"{where} is unledgered: this stack has no ledger.", False
        elif a is None:
            status, rollback = "before-first", True
            sentence = f"{where} is unledgered and older than serial {b}, the first the ledger records."
        elif b is None:
            status, rollback = "after-head", False
            sentence = (f"{where} is unledgered, written after serial {a} (the head): an operation that "
                        "was interrupted or is still running wrote it.")
        else:
            status, rollback = "between", True
            sentence = f"{where} is unledgered: after serial {a}, before serial {b}: written mid-update."
        out.append(Placement(**common, status=status, serial=None, after_serial=a, before_serial=b,
                             rollback=rollback, sentence=sentence))
    return out


def _out_of_band(recs: list[LedgerRecord], placements: list[Placement], candidates) -> list[Finding]:
    """Evidence of a second writer: a recorded version whose content differs from what the ledger
    says, or an older serial's state stored again after a newer serial was recorded."""
    found = []
    by_version = {r.version_id: r for r in recs if r.version_id}
    head = recs[-1] if recs else None
    for p in placements:
        rec = by_version.get(p.version_id)
        if rec is not None and rec.sha256 != p.sha256 and rec.stack_key == p.key:
            found.append(Finding("fork", rec.serial,
                                 f"two different states claim serial {rec.serial}: the ledger records sha256 "
                                 f"{rec.sha256[:12]} for version {p.version_id}, which holds {p.sha256[:12]}."))
        if (p.status == "ledgered" and head and p.serial < head.serial
                and epoch_seconds(p.last_modified) > _record_time(head) and p.version_id != _rec_version(recs, p.serial)):
            found.append(Finding("fork", p.serial,
                                 f"{p.key} version {p.version_id}, written at {p.last_modified} after serial "
                                 f"{head.serial} was recorded, holds serial {p.serial}'s state: something outside "
                                 "groundctl wrote an older state over the newer one."))
    return found


def _rec_version(recs: list[LedgerRecord], serial: int) -> Optional[str]:
    return next((r.version_id for r in recs if r.serial == serial), None)


def assess_lineage(ledger: Optional[LedgerRead], candidates, *,
                   expected_lineage: Optional[str] = None) -> LineageVerdict:
    """The lineage/serial verdict over every candidate, with the strength of the evidence said plainly."""
    candidates = list(candidates)
    if ledger is None or not ledger.records:
        why = ("the ledger for this stack is missing" if ledger is None or ledger.missing
               else "no record of the ledger can be read")
        ordered = sorted(candidates, key=lambda c: epoch_seconds(c.last_modified), reverse=True)
        placements = tuple(
            Placement(key=c.key, version_id=c.version_id, sha256=c.sha256, last_modified=iso(epoch_seconds(c.last_modified)),
                      status="time-only", serial=None, after_serial=None, before_serial=None, rollback=False,
                      lineage=c.lineage, lineage_ok=_lineage_ok(c, expected_lineage),
                      sentence=f"{c.key} (version {c.version_id}) is number {i + 1} from the newest by time.")
            for i, c in enumerate(ordered))
        findings = [Finding("ledger-missing", None, f"{why[0].upper()}{why[1:]}.")]
        findings += [Finding("foreign-lineage", None, f"{p.key} (version {p.version_id}) has lineage {p.lineage}, "
                             f"not {expected_lineage}.") for p in placements if p.lineage_ok is False]
        return LineageVerdict(
            "time-order", True,
            f"Weaker evidence: {why}, so candidates are ordered by time and checked for integrity only. A "
            "rollback or a fork cannot be told from a newer state this way.",
            expected_lineage, None, None, placements, tuple(findings))
    recs = list(ledger.records)
    chain = verify_chain(recs)
    placements = place_candidates(recs, candidates)
    findings = list(ledger.problems) + list(chain.findings) + _out_of_band(recs, placements, candidates)
    if expected_lineage and chain.lineage and expected_lineage != chain.lineage:
        findings.append(Finding("lineage-mismatch", None, f"the ledger's lineage is {chain.lineage}, but the "
                                f"stack is configured with {expected_lineage}."))
    findings += [Finding("foreign-lineage", p.serial, f"{p.key} (version {p.version_id}) has lineage {p.lineage}, "
                         f"not the ledger's {chain.lineage}.") for p in placements if p.lineage_ok is False]
    damaged = bool(ledger.problems) or not chain.ok
    head = chain.head
    if damaged:
        summary = (f"Weaker evidence: the ledger is damaged ({'; '.join(f.sentence for f in (*ledger.problems, *chain.findings))}) "
                   f"Candidates are placed against the {len(recs)} readable records, and by time where those fall short.")
    else:
        summary = (f"The ledger is intact: {len(recs)} records, lineage {chain.lineage}, head serial "
                   f"{head.serial if head else '-'}, hash chain verified.")
    return LineageVerdict("ledger-damaged" if damaged else "ledger", damaged, summary, chain.lineage,
                          head.serial if head else None, chain, tuple(placements), tuple(findings))
