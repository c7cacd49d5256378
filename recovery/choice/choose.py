"""Choosing the state version to restore: a pure decision over what is known about each candidate.

The rule is the one an operator would apply by hand: take the newest candidate that is integral and
of the stack's lineage; show what restoring it would lose compared with the newest known state (the
recovery point); and refuse, each with its own flag, to

- roll back past the ledger head (`--allow-rollback`): "serial 4 over newer serial 7";
- restore a foreign lineage (`--allow-foreign-lineage`): a state of another stack or another life of it;
- restore a candidate that fails Pulumi's integrity rules (`--allow-damaged`);
- restore a state whose resources' URNs name another stack or project (`--allow-foreign-stack`), with a
  ledger or without one: it is that stack's state, whatever its lineage says.

A fork (two writers) has no flag: groundctl does not pick a side.

`decide` never downloads anything. Candidates whose verdict is not known yet make it answer `Need`
(evaluate this one, then ask again), so the caller downloads newest first and only as far as the
decision needs: with an intact ledger that is usually one download. Its inputs are built from the
ledger and the candidates by `recovery.choice.choose_inputs`; what the choice loses is `recovery.choice.recovery_point`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Optional, Sequence, Union

Ident = tuple[str, Optional[str]]  # (key, version id)

FLAG_ROLLBACK = "--allow-rollback"
FLAG_FOREIGN = "--allow-foreign-lineage"
FLAG_DAMAGED = "--allow-damaged"
FLAG_TAMPERED = "--allow-tampered-ledger"
FLAG_FOREIGN_STACK = "--allow-foreign-stack"


@dataclass(frozen=True)
class Option:
    """One candidate as the decision sees it."""

    ident: Ident
    source: str                       # current | version | bak | history | backup
    when: datetime
    verdict: Optional[str] = None     # integral | damaged | unreadable | missing; None: not evaluated yet
    lineage: Optional[str] = None     # its own `groundctl_lineage` output
    sha256: Optional[str] = None
    serial: Optional[int] = None      # the ledger serial it is recorded as
    after_serial: Optional[int] = None  # unledgered: written after this serial (and before the next)
    resources: Optional[int] = None
    findings: int = 0
    pending: tuple[str, ...] = ()
    is_current: bool = False
    foreign: tuple[str, ...] = ()      # `<stack>::<project>` its URNs name other than this stack's

    @property
    def position(self) -> Optional[tuple[int, int]]:
        """Where it sits on the ledger's timeline: (serial, 0) recorded, (serial, 1) just after it."""
        if self.serial is not None:
            return (self.serial, 0)
        if self.after_serial is not None:
            return (self.after_serial, 1)
        return None

    def label(self) -> str:
        if self.serial is not None:
            where = f"serial {self.serial}"
        elif self.after_serial is not None:
            where = (f"an unledgered state written after serial {self.after_serial}" if self.after_serial
                     else "an unledgered state written before serial 1")
        else:
            where = "an unplaced state"
        return f"{where} ({self.source} {self.ident[0]} version {self.ident[1] or '-'}, {self.when.isoformat()})"

    def to_dict(self) -> dict:
        return {"key": self.ident[0], "version_id": self.ident[1], "source": self.source,
                "time": self.when.isoformat(), "verdict": self.verdict, "lineage": self.lineage,
                "sha256": self.sha256, "serial": self.serial, "after_serial": self.after_serial,
                "resources": self.resources, "findings": self.findings, "pending": list(self.pending),
                "is_current": self.is_current, "foreign_stacks": list(self.foreign)}


@dataclass(frozen=True)
class Fork:
    """Two states that both claim to follow the same point of the history."""

    serial: int
    left: str
    right: str
    message: str


@dataclass(frozen=True)
class Evidence:
    """What the ledger (or its absence) says about the stack."""

    strength: str                      # "ledger" | "weaker" (ledger missing or damaged)
    lineage: Optional[str] = None      # the stack's lineage as recorded
    head_serial: Optional[int] = None
    serials: tuple[int, ...] = ()
    forks: tuple[Fork, ...] = ()
    notes: tuple[str, ...] = ()
    head_resources: Optional[int] = None
    tampered: tuple[str, ...] = ()     # S3's own history contradicts the ledger: each says how

    def to_dict(self) -> dict:
        return {"strength": self.strength, "lineage": self.lineage, "head_serial": self.head_serial,
                "tampered": list(self.tampered),
                "serials": len(self.serials), "forks": [f.__dict__ for f in self.forks], "notes": list(self.notes),
                "head_resources": self.head_resources}


@dataclass(frozen=True)
class Flags:
    allow_rollback: bool = False
    allow_foreign_lineage: bool = False
    allow_damaged: bool = False
    allow_tampered_ledger: bool = False
    allow_foreign_stack: bool = False


@dataclass(frozen=True)
class Refusal:
    code: str              # rollback | foreign-lineage | damaged | fork | no-candidate
    flag: Optional[str]    # the flag that lifts it; None when no flag does
    message: str

    def to_dict(self) -> dict:
        return {"code": self.code, "flag": self.flag, "message": self.message}


@dataclass(frozen=True)
class Need:
    """The decision needs this candidate evaluated (downloaded and judged) first."""

    ident: Ident


@dataclass(frozen=True)
class Choice:
    chosen: Optional[Option]
    refusals: tuple[Refusal, ...] = ()     # blocking: the restore must not happen
    overridden: tuple[Refusal, ...] = ()   # lifted by a flag the operator gave
    skipped: tuple[tuple[Option, str], ...] = ()
    newer: tuple[Option, ...] = ()         # candidates newer than the chosen one (displaced by it)
    serials_lost: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.chosen is not None and not self.refusals

    @property
    def already_current(self) -> bool:
        return self.chosen is not None and self.chosen.is_current

    def to_dict(self) -> dict:
        return {"chosen": self.chosen.to_dict() if self.chosen else None, "allowed": self.allowed,
                "already_current": self.already_current,
                "refusals": [r.to_dict() for r in self.refusals],
                "overridden": [r.to_dict() for r in self.overridden],
                "skipped": [{"candidate": o.label(), "reason": why} for o, why in self.skipped],
                "newer_candidates": len(self.newer), "serials_lost": list(self.serials_lost),
                "notes": list(self.notes)}


# -- ordering --------------------------------------------------------------------------------------


def ordered(options: Iterable[Option]) -> list[Option]:
    """Newest first: by ledger position when known, then by time; the current object first among equals.

    An option without a position (weaker evidence) is ordered by time alone.
    """
    opts = list(options)
    if opts and all(o.position is not None for o in opts):
        # Copies of one recorded state share a position: prefer the stack object's own version.
        return sorted(opts, key=lambda o: (o.position, o.serial is not None and o.source in ("current", "version"),
                                           o.when, o.is_current), reverse=True)
    return sorted(opts, key=lambda o: (o.when, o.is_current), reverse=True)


def _lineage_of(o: Option, ev: Evidence) -> Optional[str]:
    # A ledgered candidate's lineage is the ledger's (its sha256 or version id was recorded there).
    return o.lineage or (ev.lineage if o.serial is not None else None)


def _is_rollback(o: Option, ev: Evidence) -> bool:
    return ev.head_serial is not None and o.position is not None and o.position < (ev.head_serial, 0)


def _rollback_refusal(o: Option, ev: Evidence) -> Refusal:
    what = f"serial {o.serial}" if o.serial is not None else f"a state written after serial {o.after_serial}"
    return Refusal("rollback", FLAG_ROLLBACK,
                   f"Restoring {what} over newer serial {ev.head_serial} (the ledger head) rolls the stack back: "
                   f"what serials after it recorded is lost from state (the resources stay in the cloud and can be "
                   f"imported). Re-run with {FLAG_ROLLBACK} to accept that.")


def _foreign_refusal(o: Option, expected: Optional[str]) -> Refusal:
    theirs = _label_lineage(o.lineage)
    return Refusal("foreign-lineage", FLAG_FOREIGN,
                   f"The newest integral candidate, {o.label()}, has lineage {theirs} over the stack's lineage "
                   f"{_label_lineage(expected)}: it is another stack's state, or this stack's from before it was "
                   f"recreated. Re-run with {FLAG_FOREIGN} only if you know it is the state you want.")


def _damaged_refusal(o: Option) -> Refusal:
    return Refusal("damaged", FLAG_DAMAGED,
                   f"No integral candidate of this stack's lineage is left; the newest readable one, {o.label()}, "
                   f"breaks {o.findings} of Pulumi's integrity rules, so Pulumi may refuse it. Inspect it with "
                   f"`groundctl state versions`; re-run with {FLAG_DAMAGED} to restore it anyway.")


def _foreign_stack_refusal(o: Option) -> Refusal:
    named = ", ".join(f"stack {n.split('::')[0]} of project {n.split('::')[1]}" for n in o.foreign[:3])
    return Refusal("foreign-stack", FLAG_FOREIGN_STACK,
                   f"{o.label()} holds resources whose URNs name {named}, not this stack: it is another stack's "
                   f"state, copied or imported here. Restored, Pulumi would manage that stack's resources under "
                   f"this one's name. Re-run with {FLAG_FOREIGN_STACK} only if you mean to move them here.")


def _label_lineage(lineage: Optional[str]) -> str:
    return lineage if lineage else "(none recorded)"


# -- the decision ----------------------------------------------------------------------------------


def decide(options: Sequence[Option], evidence: Evidence, flags: Flags = Flags()) -> Union[Choice, Need]:
    """The newest integral candidate of the right lineage, or why not; `Need` when one must be evaluated."""
    opts = ordered(options)
    expected = evidence.lineage
    best: Optional[Option] = None
    foreign: Optional[Option] = None
    damaged: Optional[Option] = None
    foreign_stack: Optional[Option] = None
    skipped: list[tuple[Option, str]] = []
    notes: list[str] = list(evidence.notes)

    for o in opts:
        if o.verdict is None:
            return Need(o.ident)
        lineage = _lineage_of(o, evidence)
        if o.verdict in ("unreadable", "missing"):
            skipped.append((o, f"{o.verdict}"))
            continue
        if o.foreign and not flags.allow_foreign_stack:
            # Never a candidate, and never the one that names the lineage when there is no ledger.
            skipped.append((o, f"its URNs name another stack ({', '.join(o.foreign[:3])})"))
            foreign_stack = foreign_stack or o
            continue
        if expected is None and evidence.strength == "weaker" and o.verdict == "integral" and lineage:
            expected = lineage  # without a ledger, the newest integral state names the lineage
            notes.append(f"the lineage {lineage} is taken from the newest integral state (no ledger to confirm it)")
        right = lineage is not None and lineage == expected or (expected is None and lineage is None)
        if o.verdict == "integral" and right:
            best = o
            break
        if o.verdict == "integral":
            skipped.append((o, f"lineage {_label_lineage(lineage)}, not {_label_lineage(expected)}"))
            foreign = foreign or o
            continue
        skipped.append((o, f"damaged ({o.findings} integrity findings)"))
        if right or lineage is None:
            damaged = damaged or o

    current = next((o for o in opts if o.is_current), None)
    if best is not None and current is not None and best is not current and best.sha256:
        # A copy byte-identical to the current state (a backup or .bak Pulumi wrote of it) is the current
        # state: choosing it would "restore" what is already there.
        if current.verdict is None:
            return Need(current.ident)
        if current.sha256 == best.sha256:
            notes.append(f"{best.label()} holds the same bytes as the current state: the current state is chosen")
            best = current

    refusals: list[Refusal] = []
    overridden: list[Refusal] = []
    chosen: Optional[Option] = None

    def gate(o: Option, needed: list[Refusal]) -> bool:
        """Whether `o` may be chosen: every refusal on it lifted by its flag."""
        given = {FLAG_ROLLBACK: flags.allow_rollback, FLAG_FOREIGN: flags.allow_foreign_lineage,
                 FLAG_DAMAGED: flags.allow_damaged}
        if all(given.get(r.flag, False) for r in needed):
            overridden.extend(needed)
            return True
        refusals.extend(r for r in needed if not given.get(r.flag, False))
        return False

    if best is not None:
        needed = [_rollback_refusal(best, evidence)] if _is_rollback(best, evidence) else []
        # A newer damaged state at or past the head is the alternative to rolling back.
        if needed and damaged is not None and not _is_rollback(damaged, evidence) and flags.allow_damaged \
                and not flags.allow_rollback:
            chosen = damaged if gate(damaged, [_damaged_refusal(damaged)]) else None
        elif gate(best, needed):
            chosen = best
        if needed and damaged is not None and not _is_rollback(damaged, evidence) and chosen is None:
            notes.append(f"{FLAG_DAMAGED} would restore the newer damaged {damaged.label()} instead")
    else:
        fallbacks = [o for o in (foreign, damaged) if o is not None]
        for o in ordered(fallbacks):
            needed = [_foreign_refusal(o, expected)] if o is foreign else [_damaged_refusal(o)]
            if o is not foreign and _is_rollback(o, evidence):
                needed.append(_rollback_refusal(o, evidence))
            if gate(o, needed):
                chosen = o
                del refusals[:]  # an allowed fallback settles it; the others were alternatives
                break
        if not fallbacks and foreign_stack is not None:
            refusals.append(_foreign_stack_refusal(foreign_stack))
        elif not fallbacks:
            refusals.append(Refusal(
                "no-candidate", None,
                "No readable copy of this stack's state is left (no S3 version, .bak, history checkpoint or "
                "backup parses). The state cannot be restored from the bucket; rebuild it from a file you "
                "hold with `groundctl state import-plan <file>`, or import the live resources by hand."))

    blocking_forks = [f for f in evidence.forks
                      if chosen is None or chosen.position is None or f.serial >= chosen.position[0]]
    for f in blocking_forks:
        refusals.append(Refusal("fork", None, f"The history forked at serial {f.serial}: {f.message} Two writers "
                                "changed this stack independently; groundctl will not pick a side."))
    for f in evidence.forks:
        if f not in blocking_forks:
            notes.append(f"an older fork at serial {f.serial} is behind the chosen state: {f.message}")

    if evidence.tampered:
        tampered = Refusal("tampered-ledger", FLAG_TAMPERED,
                           "The ledger was tampered with: " + " ".join(evidence.tampered) + " Its serials cannot "
                           "be trusted to say which state is newest, so nothing is restored on its word.")
        if flags.allow_tampered_ledger:
            overridden.append(tampered)
        else:
            refusals.insert(0, tampered)

    if chosen is not None and chosen.foreign:
        overridden.append(_foreign_stack_refusal(chosen))  # only reachable with --allow-foreign-stack
    newer: tuple[Option, ...] = ()
    lost: tuple[int, ...] = ()
    if chosen is not None:
        newer = tuple(o for o in opts[:opts.index(chosen)])
        if chosen.position is not None:
            lost = tuple(s for s in evidence.serials if (s, 0) > chosen.position)
    return Choice(chosen, tuple(refusals), tuple(overridden), tuple(skipped), newer, lost, tuple(notes))
