"""The Restore phase: the chosen copy becomes the current state, under the lock, recorded in the ledger."""

from __future__ import annotations

from recovery.guide.model import Condition, Stop
from recovery.guide.run import Run
from recovery.restoring.restore import RestorePlan, restore as restore_state


def restore(run: Run) -> Condition:
    o, s, c = run.o, run.s, run.choice.chosen
    if run.nothing_to_restore:
        return Condition("restore", "skipped", "NothingToRestore", "The current state is already the one "
                         "chosen and recorded; nothing was written.", "reconcile", details={})
    question = (f"Restore {c.label()} as the current state of {o.project}/{o.environment}? The displaced "
                "current object is kept under .groundctl/quarantine/.")
    if not (o.yes or s.confirm(question)):
        raise Stop("declined")
    plan = RestorePlan(o.project, o.environment, o.environment, c.ident[0], c.ident[1] or "", c.sha256 or "",
                       lineage=c.lineage or run.evidence.lineage,
                       secrets_provider=s.secrets_provider() if s.secrets_provider else None)
    result = restore_state(s.store, plan, lock_factory=s.lock_factory, run_id=o.run_id,
                           append_record=s.append_record, after_step=s.after_restore_step, clock=s.clock)
    return Condition("restore", "achieved", "Restored",
                     f"{plan.dest_key} now holds the chosen state as version {result.new_version}, recorded "
                     f"as ledger serial {result.serial}; the displaced object is at "
                     f"{', '.join(result.quarantined) or '(nothing to quarantine)'}.",
                     "reconcile the restored state with what is live", details=result.to_dict())
