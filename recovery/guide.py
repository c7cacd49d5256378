"""The guided recovery of one stack: Assess → Candidates → Lineage/serial → Choose → Restore →
Reconcile → Import → Pending creates → Verify.

Each phase ends in a `Condition` (like a Flux condition: a status, a CamelCase reason, a message and
the operator's next step), and "attempted" is kept apart from "achieved": a restore that was refused
was not attempted; an import that failed was attempted and not achieved. `plan_phases` (pure) says
which phases a run will attempt; `run_guide` runs them, doing I/O only through `GuideServices`, and
stops at the first refusal or failure, marking the rest not attempted. The recovery is complete only
when the final verification (`preview --refresh --expect-no-changes`) shows no changes.

Interactive by default (`confirm` is asked before each write); `yes` answers it, but never lifts a
refusal that needs a flag; `dry_run` stops before any write (reconcile still runs, read-only, against
the chosen state, so the import plan can be reviewed, and the pending-creates phase says what it would
do, or refuses as the real run would).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Optional

import botocore.exceptions

from bootstrap.aws.objectstore import ListedOnce
from bootstrap.engine.automation import other_pending_operations, refuse_other_pending
from bootstrap.engine.errors import UnexpectedChanges
from bootstrap.errors import CloudError, GroundctlError, Refused
from bootstrap.planning.plan import NO_CHANGE_OPS, Plan
from recovery import choose as ch
from bootstrap.records import ledger as led
from recovery import placement
from bootstrap.records import layout
from recovery.restore import RestorePlan, restore
from recovery.state_bytes import NotAState, decompress, load_json
from recovery.tamper import tamper_findings
from recovery.evaluator import CandidateEvaluator
from recovery.versions import list_candidates

PHASES = ("assess", "candidates", "lineage", "choose", "restore", "reconcile", "import", "pending", "verify")
WRITES = frozenset({"restore", "import", "pending"})


@dataclass(frozen=True)
class Condition:
    phase: str
    status: str            # achieved | refused | failed | skipped | not-attempted
    reason: str
    message: str
    next_step: str = ""
    attempted: bool = True
    details: dict = field(default_factory=dict)
    exit_code: Optional[int] = None  # set when an error stopped the phase: the exit code its class stands for

    def to_dict(self) -> dict:
        return {"phase": self.phase, "status": self.status, "attempted": self.attempted,
                "achieved": self.status == "achieved", "reason": self.reason, "message": self.message,
                "next_step": self.next_step, "details": self.details, "exit_code": self.exit_code}


@dataclass(frozen=True)
class GuideOptions:
    environment: str
    layer: str
    yes: bool = False
    dry_run: bool = False
    flags: ch.Flags = ch.Flags()
    clear_unchecked_creates: bool = False  # pending creates inventory cannot see were checked by hand: made nothing
    run_id: str = field(default_factory=lambda: f"recover-{uuid.uuid4().hex[:12]}")

    @property
    def project(self) -> str:
        return self.layer

    @property
    def expected_stack(self) -> str:
        return f"organization/{self.layer}/{self.environment}"


@dataclass
class GuideServices:
    store: Any
    engine: Callable[[], Any]                     # built lazily: a dry run never needs it
    inventory: Callable[[str, str], Any]           # (environment, layer) -> recovery.inventory.Inventory
    lock_factory: Callable                         # (store, environment, run_id) -> context manager
    confirm: Callable[[str], bool]
    append_record: Callable = led.append_record
    clock: Callable[[], float] = time.time
    lock_status: Optional[Callable] = None         # (store, environment) -> LockStatus
    after_restore_step: Optional[Callable[[int, str], None]] = None
    # Raises (a GroundctlError saying what is missing) when the phases after a write could not run: called
    # once, before the first phase that writes, so nothing is written when the way forward is blocked.
    ready: Optional[Callable[[], None]] = None


@dataclass(frozen=True)
class Transcript:
    environment: str
    layer: str
    run_id: str
    started_at: str
    finished_at: str
    options: dict
    conditions: tuple[Condition, ...]
    outcome: str            # complete | nothing-to-do | dry-run | refused | declined | incomplete
    downloads: int = 0

    @property
    def exit_code(self) -> int:
        """The README's contract; a stop caused by an error exits as that error's class does (no
        credentials: 4, whether or not it was a dry run)."""
        stop = next((c for c in self.conditions if c.status in ("refused", "failed")), None)
        if stop is not None and stop.exit_code is not None:
            return stop.exit_code
        return {"complete": 0, "nothing-to-do": 0, "dry-run": 0, "refused": 3, "declined": 3}.get(self.outcome, 1)

    def to_dict(self) -> dict:
        return {"environment": self.environment, "layer": self.layer, "run_id": self.run_id,
                "started_at": self.started_at, "finished_at": self.finished_at, "options": self.options,
                "outcome": self.outcome, "complete": self.outcome == "complete", "exit_code": self.exit_code,
                "state_downloads": self.downloads, "phases": [c.to_dict() for c in self.conditions]}


def plan_phases(opts: GuideOptions) -> tuple[tuple[str, Optional[str]], ...]:
    """(phase, why it is skipped or None) for every phase, in order. Pure."""
    skip = {"restore": "dry run: nothing is written", "import": "dry run: nothing is written",
            "verify": "dry run: the verification needs the restored state"} if opts.dry_run else {}
    return tuple((p, skip.get(p)) for p in PHASES)


def _now(clock: Callable[[], float]) -> str:
    return datetime.fromtimestamp(clock(), timezone.utc).isoformat(timespec="seconds")


class _Stop(Exception):
    def __init__(self, outcome: str):
        self.outcome = outcome


class _Run:
    """The state carried from phase to phase. Only `run_guide` makes one."""

    def __init__(self, opts: GuideOptions, svc: GuideServices):
        self.o, self.s = opts, svc
        self.evaluator = CandidateEvaluator(svc.store, expected_stack=opts.expected_stack)
        # Assess, Candidates and Lineage only read: the stack's version listing is taken once for both the
        # candidates and the tamper check, and the ledger is read while the candidates are listed.
        self.reads = ListedOnce(svc.store)
        self._background = ThreadPoolExecutor(max_workers=2, thread_name_prefix="ledger-read")
        self._ledger_reads = None
        self.cset = None
        self.ledger: Optional[led.LedgerRead] = None
        self.evidence: Optional[ch.Evidence] = None
        self.choice: Optional[ch.Choice] = None
        self.chosen_candidate = None
        self.nothing_to_restore = False
        self.import_plan: Optional[dict] = None
        self.classification = None              # recovery.state_vs_live.Classification of the chosen state
        self.covered: frozenset[str] = frozenset()  # the types inventory looked for
        self.planned_urns: frozenset[str] = frozenset()  # resources of the chosen state, and those the import adds
        self.never_made: frozenset[str] = frozenset()    # pending creates cleared as having made nothing
        self.other_pending: tuple[tuple[str, str], ...] = ()  # pending operations that are not creates

    # -- Assess ------------------------------------------------------------------------------------

    def close(self) -> None:
        self._background.shutdown(wait=True, cancel_futures=True)

    def assess(self) -> Condition:
        o, s = self.o, self.s
        self._ledger_reads = (self._background.submit(led.read_ledger, s.store, o.project, o.environment),
                              self._background.submit(led.ledger_object_versions, s.store, o.project, o.environment))
        self.cset = list_candidates(self.reads, o.project, o.environment)
        details: dict = {"current_objects": []}
        if s.lock_status is not None:
            st = s.lock_status(s.store, o.environment)
            details["lock"] = {"held": st.holder is not None, "holder": st.holder.holder if st.holder else None,
                               "stale": st.stale, "pulumi_locks": len(st.pulumi_locks)}
            if st.unreadable:
                return Condition("assess", "refused", "LockUnreadable",
                                 f"Environment '{o.environment}' is locked by a lock object that cannot be read: "
                                 f"{st.reason}.", f"if no run is active, `groundctl lock break {o.environment} "
                                 "--force`", details=details)
            if st.holder is not None and not st.stale:
                return Condition("assess", "refused", "LockHeld",
                                 f"Environment '{o.environment}' is locked by {st.holder.holder}: another run is "
                                 "changing it, so its state must not be restored under it.",
                                 f"wait for that run, or check `groundctl lock status {o.environment}`",
                                 details=details)
        current = self.cset.current
        if self.cset.current_deleted:
            return Condition("assess", "achieved", "StateDeleted",
                             "The stack's state object is deleted (its newest version is a delete marker): "
                             "Pulumi sees no state at all.", "look for the last good version", details=details)
        if not current:
            return Condition("assess", "achieved", "StateMissing",
                             "The stack has no state object.", "look for copies of it", details=details)
        c = self.evaluator.evaluate(current[0])
        details["current_objects"] = [c.to_dict()]
        if c.verdict == "integral":
            return Condition("assess", "achieved", "StateIntegral",
                             f"The current state is readable and integral ({c.evaluation.resource_count} "
                             "resources).", "check its lineage and serial against the ledger", details=details)
        what = c.evaluation.error if c.verdict == "unreadable" else f"{len(c.evaluation.findings)} integrity findings"
        return Condition("assess", "achieved", "StateUnreadable" if c.verdict == "unreadable" else "StateDamaged",
                         f"The current state is {c.verdict}: {what}.", "look for the last good version",
                         details=details)

    # -- Candidates --------------------------------------------------------------------------------

    def candidates(self) -> Condition:
        by_source: dict[str, int] = {}
        for c in self.cset.candidates:
            by_source[c.source] = by_source.get(c.source, 0) + 1
        n = len(self.cset.candidates)
        details = {"count": n, "by_source": by_source, "delete_markers": len(self.cset.delete_markers)}
        if not n and self._ledger_reads[0].result().missing:
            o = self.o
            return Condition("candidates", "refused", "NeverDeployed",
                             f"{o.layer} has never been deployed in {o.environment}: the bucket holds no copy of "
                             f"organization/{o.layer}/{o.environment}'s state and no ledger record, so there is "
                             "nothing to recover.", f"`groundctl up {o.environment} --layers {o.layer}` creates it (only "
                             "if it was deployed and its whole history is gone: rebuild its state from a file you hold "
                             "with `groundctl state import-plan <file>`)",
                             details=details)
        if not n:
            return Condition("candidates", "refused", "NoCandidates",
                             "No copy of this stack's state exists in the bucket (no version, .bak, history "
                             "checkpoint or backup).", "rebuild the state from a file you hold with "
                             "`groundctl state import-plan <file>`", details=details)
        return Condition("candidates", "achieved", "CandidatesListed",
                         f"{n} candidate copies found ({', '.join(f'{v} {k}' for k, v in by_source.items())}), "
                         f"{len(self.cset.delete_markers)} delete markers; they are downloaded only as needed.",
                         "place them against the ledger", details=details)

    # -- Lineage/serial ----------------------------------------------------------------------------

    def lineage(self) -> Condition:
        o = self.o
        ledger_read, ledger_versions = self._ledger_reads
        self.ledger = ledger_read.result()
        chain = led.verify_chain(self.ledger.records)
        # Every stack key (.json, .json.gz, .json.zst) starts with the plain one: the listing the candidates used.
        stack_versions = self.reads.versions(layout.stack_key(o.project, o.environment))
        tampered = tamper_findings(self.ledger.records, stack_versions, ledger_versions.result())
        # A tampered ledger is damaged evidence: the choice falls back to integrity and S3's own time order,
        # and is refused outright unless the operator accepts that with --allow-tampered-ledger.
        self.evidence = ch.evidence_from(self.ledger.records, chain.findings, (*self.ledger.problems, *tampered),
                                         self.ledger.missing)
        if tampered:
            self.evidence = dataclasses.replace(self.evidence, tampered=tuple(f.sentence for f in tampered))
        ev = self.evidence
        details = ev.to_dict() | {"records": len(self.ledger.records),
                                  "findings": [f.sentence for f in (*self.ledger.problems, *chain.findings)]}
        if ev.strength == "weaker":
            reason = "LedgerMissing" if self.ledger.missing or not self.ledger.records else "LedgerDamaged"
            return Condition("lineage", "achieved", reason, "Weaker evidence: " + " ".join(ev.notes),
                             "choose by integrity and time; check the result carefully", details=details)
        msg = (f"The ledger is intact: {len(ev.serials)} records, lineage {ev.lineage}, head serial "
               f"{ev.head_serial}.")
        if ev.forks:
            msg += " It shows a fork: " + " ".join(f.message for f in ev.forks)
        return Condition("lineage", "achieved", "Forked" if ev.forks else "LedgerIntact", msg,
                         "choose the newest integral state of this lineage", details=details)

    # -- Choose ------------------------------------------------------------------------------------

    def _decide(self) -> ch.Choice:
        cands = {c.ident: c for c in self.cset.candidates}
        while True:
            evaluated = [c for c in cands.values() if c.evaluation is not None]
            evidence = self._with_out_of_band_forks(evaluated)
            result = ch.decide(ch.options_from(list(cands.values()), self.ledger.records, evidence),
                               evidence, self.o.flags)
            if isinstance(result, ch.Choice):
                self.evidence = evidence
                self.chosen_candidate = cands.get(result.chosen.ident) if result.chosen else None
                return result
            cands[result.ident] = self.evaluator.evaluate(cands[result.ident])

    def _with_out_of_band_forks(self, evaluated) -> ch.Evidence:
        ev = self.evidence
        if ev.strength != "ledger":
            return ev
        like = [placement.Candidate(c.key, c.version_id, c.sha256, c.last_modified, c.lineage)
                for c in evaluated if c.sha256 and c.verdict != "missing"]
        verdict = placement.assess_lineage(self.ledger, like)
        known = {f.message for f in ev.forks}
        extra = tuple(ch.Fork(f.serial or 0, "", "", f.sentence) for f in verdict.forks if f.sentence not in known)
        return ch.Evidence(ev.strength, ev.lineage, ev.head_serial, ev.serials, ev.forks + extra, ev.notes,
                           ev.head_resources) if extra else ev

    def choose(self) -> Condition:
        choice = self._decide()
        self.choice = choice
        details = choice.to_dict()
        if not choice.allowed:
            first = choice.refusals[0]
            flags = [r.flag for r in choice.refusals if r.flag]
            nxt = (f"re-run with {' and '.join(dict.fromkeys(flags))} if you accept that" if flags and
                   all(r.flag for r in choice.refusals) else "resolve it by hand (see runbooks/recover-state.md)")
            return Condition("choose", "refused", _reason(first.code),
                             " ".join(r.message for r in choice.refusals), nxt, details=details)
        point = self._recovery_point(choice)
        details["recovery_point"] = point.to_dict()
        c = choice.chosen
        recorded_here = c.is_current and c.serial is not None and c.serial == self.evidence.head_serial and \
            any(r.version_id == c.ident[1] for r in self.ledger.records)
        if c.is_current and (recorded_here or self.evidence.strength == "weaker"):
            self.nothing_to_restore = True
            return Condition("choose", "achieved", "CurrentIsNewest",
                             f"The current state, {c.label()}, is already the newest integral state of this "
                             "lineage: there is nothing to restore.", "reconcile it with what is live",
                             details=details)
        lost = (f" It loses serials {', '.join(map(str, point.serials_lost))} and "
                f"{len(point.resources_lost)} resources from state (they can be imported)."
                if not point.loses_nothing else " Nothing recorded is lost.")
        return Condition("choose", "achieved", "ChoseNewestIntegral",
                         f"Chose {c.label()}.{lost}" + (" Lifted by flag: " + "; ".join(
                             r.flag for r in choice.overridden) + "." if choice.overridden else ""),
                         "restore it as the current state", details=details)

    def _recovery_point(self, choice: ch.Choice) -> ch.RecoveryPoint:
        chosen_doc = self.evaluator.load(self.chosen_candidate)
        newest = ch.newest_readable(choice)
        newest_urns = None
        if newest is not None and newest.ident != choice.chosen.ident:
            cand = next(c for c in self.cset.candidates if c.ident == newest.ident)
            try:
                newest_urns = [r.urn for r in self.evaluator.load(cand).resources if not r.delete]
            except NotAState:
                newest_urns = None
            self.evaluator.load(self.chosen_candidate)  # keep the chosen document as the last one
        elif newest is not None and not choice.serials_lost:
            newest_urns = [r.urn for r in chosen_doc.resources if not r.delete]
        # When newer recorded serials exist but none of their states can be read, only the ledger's
        # resource count of the head says what is lost.
        return ch.recovery_point(choice, [r.urn for r in chosen_doc.resources if not r.delete], newest, newest_urns,
                                 self.evidence.head_resources)

    # -- Restore -----------------------------------------------------------------------------------

    def restore(self) -> Condition:
        o, s, c = self.o, self.s, self.choice.chosen
        if self.nothing_to_restore:
            return Condition("restore", "skipped", "NothingToRestore", "The current state is already the one "
                             "chosen and recorded; nothing was written.", "reconcile", details={})
        question = (f"Restore {c.label()} as the current state of {o.project}/{o.environment}? The displaced "
                    "current object is kept under .groundctl/quarantine/.")
        if not (o.yes or s.confirm(question)):
            raise _Stop("declined")
        plan = RestorePlan(o.project, o.environment, o.environment, c.ident[0], c.ident[1] or "", c.sha256 or "",
                           lineage=c.lineage or self.evidence.lineage)
        result = restore(s.store, plan, lock_factory=s.lock_factory, run_id=o.run_id,
                         append_record=s.append_record, after_step=s.after_restore_step, clock=s.clock)
        return Condition("restore", "achieved", "Restored",
                         f"{plan.dest_key} now holds the chosen state as version {result.new_version}, recorded "
                         f"as ledger serial {result.serial}; the displaced object is at "
                         f"{', '.join(result.quarantined) or '(nothing to quarantine)'}.",
                         "reconcile the restored state with what is live", details=result.to_dict())

    # -- Reconcile ---------------------------------------------------------------------------------

    def _state_json(self) -> dict:
        c = self.chosen_candidate
        obj = self.s.store.get(c.key, c.version_id)
        doc = load_json(decompress(obj.body, c.key)[0], c.key) if obj is not None else {}
        dep = doc.get("deployment") or (doc.get("checkpoint") or {}).get("latest") or {}
        return dep if isinstance(dep, dict) else {}

    def reconcile(self) -> Condition:
        from recovery.import_plan import plan_for_survivors
        from recovery.state_vs_live import classify

        dep = self._state_json()
        resources = [r for r in dep.get("resources") or [] if isinstance(r, dict)]
        pending = [p for p in dep.get("pending_operations") or [] if isinstance(p, dict)]
        self.other_pending = tuple(other_pending_operations(dep))
        inv = self.s.inventory(self.o.environment, self.o.layer)
        cls = classify(resources, inv.items, pending, inv.types_covered or None)
        plan = plan_for_survivors(cls.survivors, resources)
        self.import_plan = plan.to_pulumi_json()
        self.classification = cls
        self.covered = frozenset(inv.types_covered or {i.type for i in inv.items})
        entries = {(e["type"], e.get("id")) for e in self.import_plan.get("resources", [])}
        self.planned_urns = frozenset(
            [r["urn"] for r in resources if isinstance(r.get("urn"), str) and r.get("delete") is not True]
            + [p.urn for p in cls.pending_creates if p.live and (p.type, p.live.import_id) in entries])
        details = {"counts": cls.counts(), "tagging_pages": inv.tagging_pages,
                   "import_plan": self.import_plan,
                   "in_state_not_live": [r.urn for r in cls.in_state_not_live],
                   "pending_creates": [{"urn": p.urn, "live": p.live is not None,
                                        "import_id": p.live.import_id if p.live else None} for p in cls.pending_creates],
                   "unnamed": [i.arn or i.import_id for i in cls.unnamed], "warnings": list(inv.warnings)}
        n = len(self.import_plan.get("resources", []))
        msg = (f"{len(cls.in_state_and_live)} resources are in state and live; {len(cls.survivors)} live ones are "
               f"missing from state and go into the import plan ({n} entries); {len(cls.in_state_not_live)} in "
               f"state are not live; {len(cls.pending_creates)} pending creates.")
        nxt = "import the survivors" if n else "verify with a refresh preview"
        if cls.in_state_not_live:
            # The verification is a preview: it refreshes in memory only (a DIY preview never saves a
            # snapshot), so these stay in the state whatever it shows.
            nxt += ("; review the resources in state that are not live: they stay in the state (the verification "
                    "is a preview, which writes no state) and its plan shows each one the program still declares "
                    f"as a create; `groundctl up {self.o.environment} --layers {self.o.layer}` makes them again")
        return Condition("reconcile", "achieved", "SurvivorsFound" if n else "StateMatchesLive", msg, nxt,
                         details=details)

    # -- Import and Verify -------------------------------------------------------------------------

    def import_(self) -> Condition:
        o, s = self.o, self.s
        entries = self.import_plan.get("resources", []) if self.import_plan else []
        if not entries:
            return Condition("import", "skipped", "NothingToImport", "No live resource is missing from state.",
                             "verify", details={})
        if self.other_pending:  # `pulumi import` is an update: it would drop them too
            return self._other_pending_refusal("import")
        if not (o.yes or s.confirm(f"Import {len(entries)} live resources into {o.project}/{o.environment}?")):
            raise _Stop("declined")
        with s.lock_factory(s.store, o.environment, o.run_id):
            result = s.engine().import_resources(o.layer, self.import_plan)
            rec = s.append_record(s.store, o.project, o.environment, operation="import", run_id=o.run_id,
                                  lineage=self.evidence.lineage, clock=s.clock)
        return Condition("import", "achieved", "Imported",
                         f"Imported {result.counts.get('import', len(entries))} resources; ledger serial "
                         f"{getattr(rec, 'serial', '-')}.", "verify", details={"counts": dict(result.counts)})

    def pending(self) -> Condition:
        from recovery.pending_creates import resolve_pending

        o, s = self.o, self.s
        creates = self.classification.pending_creates if self.classification else ()
        if self.other_pending:
            return self._other_pending_refusal("pending")
        if not creates:
            return Condition("pending", "skipped", "NoPendingCreates", "The state holds no pending create.",
                             "verify", details={})
        if o.dry_run:
            tracked = self.planned_urns
        else:
            deployment = s.engine().export_state(o.layer).get("deployment") or {}
            # Only URNs are read from the export (it holds plaintext secrets): nothing of it is kept.
            tracked = frozenset(r.get("urn") for r in deployment.get("resources") or []
                                if isinstance(r, dict) and r.get("delete") is not True)
        res = resolve_pending(creates, self.covered, tracked, clear_unchecked=o.clear_unchecked_creates)
        details = res.to_dict()
        if res.refused:
            flags = {d.flag for d in res.refused}
            lifted = flags == {res.refused[0].flag} and None not in flags
            return Condition("pending", "refused", "PendingCreateUnchecked" if lifted else "PendingCreateNotAdopted",
                             f"{len(res.refused)} of {len(creates)} pending creates cannot be dropped safely: "
                             + " ".join(f"{d.urn}: {d.reason}." for d in res.refused),
                             f"check each one by hand; re-run with {res.refused[0].flag} once you know they made "
                             "nothing" if lifted else "import the live ones by hand as the message says, then re-run",
                             details=details)
        if o.dry_run:
            return Condition("pending", "skipped", "DryRun", f"Would drop {len(creates)} pending creates from the "
                             f"state ({res.summary()}).", "re-run without --dry-run", attempted=False,
                             details=details)
        if not (o.yes or s.confirm(f"Drop {len(creates)} pending creates from {o.project}/{o.environment}'s state "
                                   f"({res.summary()})?")):
            raise _Stop("declined")
        with s.lock_factory(s.store, o.environment, o.run_id):
            s.engine().clear_pending_creates(o.layer, res.to_drop)
            rec = s.append_record(s.store, o.project, o.environment, operation="clear-pending-creates",
                                  run_id=o.run_id, lineage=self.evidence.lineage, clock=s.clock)
        self.never_made = res.never_made
        details["ledger_serial"] = getattr(rec, "serial", None)
        return Condition("pending", "achieved", "PendingCreatesResolved",
                         f"Dropped {len(creates)} pending creates from state ({res.summary()}); ledger serial "
                         f"{getattr(rec, 'serial', '-')}.", "verify", details=details)

    def _other_pending_refusal(self, phase: str) -> Condition:
        o = self.o
        refusal = refuse_other_pending(o.environment, o.layer, self.other_pending)
        return Condition(phase, "refused", "OtherPendingOperations", refusal.message,
                         f"check each of those resources in the cloud, refresh them (`pulumi refresh --stack "
                         f"{o.environment} --target <urn>` in stacks/{o.layer}), then re-run `groundctl recover "
                         f"{o.environment} {o.layer}`",
                         details={"operations": [{"type": t, "urn": u} for t, u in self.other_pending]})

    def verify(self) -> Condition:
        o = self.o
        try:
            plan = self.s.engine().preview(o.layer, refresh=True, expect_no_changes=True)
        except UnexpectedChanges as exc:
            if only_unfinished_creates(exc.plan, self.never_made):
                return self._unfinished(exc.plan)
            return Condition("verify", "failed", "ChangesRemain", exc.message,
                             "review the plan; the recovery is not complete until it shows no changes",
                             details={"plan": exc.plan.to_dict()})
        except GroundctlError as exc:
            # The preview itself failed (a resource it could not read, the CLI, the cloud): nothing was
            # verified, which is neither drift nor success.
            return Condition("verify", "failed", "VerificationFailed",
                             f"The verification preview of {o.project}/{o.environment} failed, so the recovery is "
                             f"not verified: {exc.message}",
                             f"fix what the engine names, then re-run `groundctl recover {o.environment} {o.layer}`, "
                             "which finds the restored state current and verifies it again",
                             exit_code=exc.exit_code)
        if only_unfinished_creates(plan, self.never_made):
            return self._unfinished(plan)
        if plan.has_changes:
            return Condition("verify", "failed", "ChangesRemain", f"The verification plan shows {plan.counts}.",
                             "review the plan; the recovery is not complete until it shows no changes",
                             details={"plan": plan.to_dict()})
        return Condition("verify", "achieved", "NoChanges",
                         "The refresh preview shows no changes: state and live resources agree.", "none",
                         details={"counts": plan.counts})

    def _unfinished(self, plan: Plan) -> Condition:
        names = sorted(c.name for c in plan.changes if c.operation == "create")
        return Condition("verify", "achieved", "OnlyUnfinishedCreates",
                         f"The refresh preview shows only the creates the interrupted update never finished "
                         f"({', '.join(names)}): state and live resources agree.",
                         f"`groundctl up {self.o.environment} --layers {self.o.layer}` makes them",
                         details={"counts": plan.counts, "plan": plan.to_dict()})


def only_unfinished_creates(plan: Plan, never_made: frozenset[str]) -> bool:
    """Whether every change the plan shows is the create of a resource whose pending create was dropped as
    having made nothing: the program still declares it, and only the next `up` makes it. Pure."""
    changes = [c for c in plan.changes if c.operation not in NO_CHANGE_OPS]
    return bool(changes) and all(c.operation == "create" and c.urn in never_made for c in changes)


def _reason(code: str) -> str:
    return {"rollback": "RollbackRefused", "foreign-lineage": "ForeignLineageRefused", "damaged": "DamagedRefused",
            "fork": "ForkRefused", "no-candidate": "NoUsableCandidate", "tampered-ledger": "TamperedLedger",
            "foreign-stack": "ForeignStackRefused"}.get(code, "Refused")


def run_guide(opts: GuideOptions, svc: GuideServices,
              on_condition: Callable[[Condition], None] = lambda c: None) -> Transcript:
    """Run the phases `plan_phases` gives, in order; stop at the first refusal or failure."""
    run = _Run(opts, svc)
    try:
        return _run_phases(run, opts, svc, on_condition)
    finally:
        run.close()


def _run_phases(run: _Run, opts: GuideOptions, svc: GuideServices,
                on_condition: Callable[[Condition], None]) -> Transcript:
    started = _now(svc.clock)
    conditions: list[Condition] = []
    outcome: Optional[str] = None
    checked = svc.ready is None or opts.dry_run  # a dry run writes nothing and never needs the engine
    for phase, skip in plan_phases(opts):
        if outcome is not None:
            conditions.append(Condition(phase, "not-attempted", "NotAttempted", "An earlier phase stopped the "
                                        "recovery.", attempted=False))
            continue
        if skip:
            cond = Condition(phase, "skipped", "DryRun", f"Skipped: {skip}.", "re-run without --dry-run",
                             attempted=False)
        else:
            try:
                if phase in WRITES and not checked:
                    checked = True
                    svc.ready()
                cond = getattr(run, "import_" if phase == "import" else phase)()
            except _Stop as stop:
                outcome = stop.outcome
                cond = Condition(phase, "not-attempted", "Declined", "The operator declined; nothing was written "
                                 "in this phase.", "re-run when ready", attempted=False)
            except GroundctlError as exc:
                cond = Condition(phase, "refused" if isinstance(exc, Refused) else "failed", type(exc).__name__,
                                 exc.message, "fix the cause and re-run: every step is safe to repeat",
                                 exit_code=exc.exit_code)
            except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
                # Not retryable or out of retries; the code names the cause without any payload.
                code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
                cond = Condition(phase, "failed", "CloudError", f"An AWS call failed in the {phase} phase ({code}).",
                                 "check credentials, permissions and the endpoint, then re-run: every step is "
                                 "safe to repeat", exit_code=CloudError.exit_code)
        conditions.append(cond)
        on_condition(cond)
        if outcome is None and cond.status in ("refused", "failed"):
            outcome = "refused" if cond.status == "refused" else "incomplete"
    if outcome is None:
        outcome = "dry-run" if opts.dry_run else "complete"
    return Transcript(opts.environment, opts.layer, opts.run_id, started, _now(svc.clock),
                      {"yes": opts.yes, "dry_run": opts.dry_run, "allow_rollback": opts.flags.allow_rollback,
                       "allow_foreign_lineage": opts.flags.allow_foreign_lineage,
                       "allow_damaged": opts.flags.allow_damaged,
                       "allow_tampered_ledger": opts.flags.allow_tampered_ledger,
                       "allow_foreign_stack": opts.flags.allow_foreign_stack,
                       "allow_clear_unchecked_creates": opts.clear_unchecked_creates},
                      tuple(conditions), outcome, run.evaluator.downloads)
