"""The Choose phase: the newest integral state of the lineage the evidence allows, and what choosing
it loses."""

from __future__ import annotations

from recovery.choice import choose as ch
from recovery.choice import window
from recovery.choice.choose_inputs import options_from
from recovery.choice.recovery_point import RecoveryPoint, newest_readable, recovery_point
from recovery.lineage import placement
from recovery.guide import newest
from recovery.guide.model import Condition
from recovery.guide.run import Run
from recovery.state.state_bytes import NotAState


def _decide(run: Run) -> ch.Choice:
    cands = {c.ident: c for c in run.cset.candidates}
    while True:
        evaluated = [c for c in cands.values() if c.evaluation is not None]
        evidence = _with_out_of_band_forks(run, evaluated)
        result = ch.decide(options_from(list(cands.values()), run.ledger.records, evidence),
                           evidence, run.o.flags)
        if isinstance(result, ch.Choice):
            run.evidence = evidence
            run.chosen_candidate = cands.get(result.chosen.ident) if result.chosen else None
            return result
        cands[result.ident] = run.evaluator.evaluate(cands[result.ident])


def _with_out_of_band_forks(run: Run, evaluated) -> ch.Evidence:
    ev = run.evidence
    if ev.strength != "ledger":
        return ev
    like = [placement.Candidate(c.key, c.version_id, c.sha256, c.last_modified, c.lineage)
            for c in evaluated if c.sha256 and c.verdict != "missing"]
    verdict = placement.assess_lineage(run.ledger, like)
    known = {f.message for f in ev.forks}
    extra = tuple(ch.Fork(f.serial or 0, "", "", f.sentence) for f in verdict.forks if f.sentence not in known)
    return ch.Evidence(ev.strength, ev.lineage, ev.head_serial, ev.serials, ev.forks + extra, ev.notes,
                       ev.head_resources) if extra else ev


def choose(run: Run) -> Condition:
    choice = _decide(run)
    if run.ledger.window_start > 1 and not window.proven(choice, run.ledger.window_start):
        # The choice lies below what was read of the newest end (or there is none there): read it all, decide again.
        newest.settle(run, newest.read_whole(run))
        choice = _decide(run)
    run.choice = choice
    details = choice.to_dict()
    if not choice.allowed:
        first = choice.refusals[0]
        flags = [r.flag for r in choice.refusals if r.flag]
        nxt = (f"re-run with {' and '.join(dict.fromkeys(flags))} if you accept that" if flags and
               all(r.flag for r in choice.refusals) else "resolve it by hand (see runbooks/recover-state.md)")
        return Condition("choose", "refused", _reason(first.code),
                         " ".join(r.message for r in choice.refusals), nxt, details=details)
    point = _recovery_point(run, choice)
    details["recovery_point"] = point.to_dict()
    c = choice.chosen
    recorded_here = c.is_current and c.serial is not None and c.serial == run.evidence.head_serial and \
        any(r.version_id == c.ident[1] for r in run.ledger.records)
    if c.is_current and (recorded_here or run.evidence.strength == "weaker"):
        run.nothing_to_restore = True
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


def _recovery_point(run: Run, choice: ch.Choice) -> RecoveryPoint:
    chosen_doc = run.evaluator.load(run.chosen_candidate)
    newest = newest_readable(choice)
    newest_urns = None
    if newest is not None and newest.ident != choice.chosen.ident:
        cand = next(c for c in run.cset.candidates if c.ident == newest.ident)
        try:
            newest_urns = [r.urn for r in run.evaluator.load(cand).resources if not r.delete]
        except NotAState:
            newest_urns = None
        run.evaluator.load(run.chosen_candidate)  # keep the chosen document as the last one
    elif newest is not None and not choice.serials_lost:
        newest_urns = [r.urn for r in chosen_doc.resources if not r.delete]
    # When newer recorded serials exist but none of their states can be read, only the ledger's
    # resource count of the head says what is lost.
    return recovery_point(choice, [r.urn for r in chosen_doc.resources if not r.delete], newest, newest_urns,
                             run.evidence.head_resources)


def _reason(code: str) -> str:
    return {"rollback": "RollbackRefused", "foreign-lineage": "ForeignLineageRefused", "damaged": "DamagedRefused",
            "fork": "ForkRefused", "no-candidate": "NoUsableCandidate", "tampered-ledger": "TamperedLedger",
            "foreign-stack": "ForeignStackRefused"}.get(code, "Refused")
