"""The phases that only read: Assess (the current state and the lock), Candidates (every copy of the
state the bucket holds) and Lineage/serial (what the ledger says, and whether it was tampered with)."""

from __future__ import annotations

from recovery.guide import newest
from recovery.guide.model import Condition
from recovery.guide.run import Run


def assess(run: Run) -> Condition:
    o, s = run.o, run.s
    newest.start(run)
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
    current = run.cset.current
    if run.cset.current_deleted:
        return Condition("assess", "achieved", "StateDeleted",
                         "The stack's state object is deleted (its newest version is a delete marker): "
                         "Pulumi sees no state at all.", "look for the last good version", details=details)
    if not current:
        return Condition("assess", "achieved", "StateMissing",
                         "The stack has no state object.", "look for copies of it", details=details)
    c = run.evaluator.evaluate(current[0])
    details["current_objects"] = [c.to_dict()]
    if c.verdict == "integral":
        return Condition("assess", "achieved", "StateIntegral",
                         f"The current state is readable and integral ({c.evaluation.resource_count} "
                         "resources).", "check its lineage and serial against the ledger", details=details)
    what = c.evaluation.error if c.verdict == "unreadable" else f"{len(c.evaluation.findings)} integrity findings"
    return Condition("assess", "achieved", "StateUnreadable" if c.verdict == "unreadable" else "StateDamaged",
                     f"The current state is {c.verdict}: {what}.", "look for the last good version",
                     details=details)


def candidates(run: Run) -> Condition:
    by_source: dict[str, int] = {}
    for c in run.cset.candidates:
        by_source[c.source] = by_source.get(c.source, 0) + 1
    n = len(run.cset.candidates)
    details = {"count": n, "by_source": by_source, "delete_markers": len(run.cset.delete_markers),
               "complete": run.pages.complete}
    if not n and run.ledger_reads.result().missing:
        o = run.o
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
    newest_only = "" if run.pages.complete else (" (the stack object's newest versions: older ones are listed "
                                                 "only if the choice needs them)")
    return Condition("candidates", "achieved", "CandidatesListed",
                     f"{n} candidate copies found{newest_only} ({', '.join(f'{v} {k}' for k, v in by_source.items())}"
                     f"), {len(run.cset.delete_markers)} delete markers; they are downloaded only as needed.",
                     "place them against the ledger", details=details)


def lineage(run: Run) -> Condition:
    chain, _tampered = newest.settle(run, run.ledger_reads.result())
    ev = run.evidence
    details = ev.to_dict() | {"records": len(run.ledger.records),
                              "findings": [f.sentence for f in (*run.ledger.problems, *chain.findings)],
                              "read": run.ledger.index_note}
    # How the records were read (index or one by one, and why) is said, so a stale or tampered index shows.
    read = f" Read: {run.ledger.index_note}." if run.ledger.index_note else ""
    if ev.strength == "weaker":
        reason = "LedgerMissing" if run.ledger.missing or not run.ledger.records else "LedgerDamaged"
        return Condition("lineage", "achieved", reason, "Weaker evidence: " + " ".join(ev.notes) + read,
                         "choose by integrity and time; check the result carefully", details=details)
    msg = (f"The ledger is intact: {len(ev.serials)} records, lineage {ev.lineage}, head serial "
           f"{ev.head_serial}.")
    if ev.forks:
        msg += " It shows a fork: " + " ".join(f.message for f in ev.forks)
    msg += read
    return Condition("lineage", "achieved", "Forked" if ev.forks else "LedgerIntact", msg,
                     "choose the newest integral state of this lineage", details=details)
