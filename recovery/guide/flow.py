"""The guided flow: which phases a run attempts, in what order, and where it stops (the first refusal
or failure; every phase after it is marked not attempted)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Callable, Optional

import botocore.exceptions

from bootstrap.kit.errors import CloudError, GroundctlError, Refused
from recovery.guide import choosing, reading, reconciling, restoring, verifying
from recovery.guide.model import Condition, GuideOptions, GuideServices, Stop, Transcript
from recovery.guide.run import Run

PHASES = ("assess", "candidates", "lineage", "choose", "restore", "reconcile", "import", "pending", "verify")
WRITES = frozenset({"restore", "import", "pending"})
_STEPS: dict[str, Callable[[Run], Condition]] = {
    "assess": reading.assess, "candidates": reading.candidates, "lineage": reading.lineage,
    "choose": choosing.choose, "restore": restoring.restore, "reconcile": reconciling.reconcile,
    "import": reconciling.import_, "pending": reconciling.pending, "verify": verifying.verify}


def plan_phases(opts: GuideOptions) -> tuple[tuple[str, Optional[str]], ...]:
    """(phase, why it is skipped or None) for every phase, in order. Pure."""
    skip = {"restore": "dry run: nothing is written", "import": "dry run: nothing is written",
            "verify": "dry run: the verification needs the restored state"} if opts.dry_run else {}
    return tuple((p, skip.get(p)) for p in PHASES)


def _now(clock: Callable[[], float]) -> str:
    return datetime.fromtimestamp(clock(), timezone.utc).isoformat(timespec="seconds")


def _chosen_providers(run: Run) -> Optional[dict]:
    """The chosen state's provider resources as the engine's plugin check reads a deployment (None when nothing
    was chosen). The parsed state keeps a resource's outputs, and a provider's outputs are its inputs, the
    version it is bound to among them (tests/data/pulumi-states/aws-bucket.json)."""
    if run.chosen_candidate is None:
        return None
    doc = run.evaluator.load(run.chosen_candidate)
    return {"resources": [{"type": r.type, "inputs": r.outputs} for r in doc.resources
                          if r.type.startswith("pulumi:providers:")]}


def run_guide(opts: GuideOptions, svc: GuideServices,
              on_condition: Callable[[Condition], None] = lambda c: None) -> Transcript:
    """Run the phases `plan_phases` gives, in order; stop at the first refusal or failure."""
    run = Run(opts, svc)
    try:
        return _run_phases(run, opts, svc, on_condition)
    finally:
        run.close()


def _run_phases(run: Run, opts: GuideOptions, svc: GuideServices,
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
                    svc.ready(_chosen_providers(run))
                cond = _STEPS[phase](run)
            except Stop as stop:
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
