"""The Verify phase: a refresh preview that must show no changes (or only the creates an interrupted
update never finished) for the recovery to be complete; for the flux layer, Flux must be Ready too (its
controllers available, its root Kustomization at the spec's ref), as at the end of `up`."""

from __future__ import annotations

from bootstrap.engine.errors import UnexpectedChanges
from bootstrap.kit.errors import GroundctlError
from bootstrap.planning.plan import NO_CHANGE_OPS, Plan
from recovery.guide.model import Condition
from recovery.guide.run import Run


def verify(run: Run) -> Condition:
    o = run.o
    try:
        plan = run.s.engine().preview(o.layer, refresh=True, expect_no_changes=True)
    except UnexpectedChanges as exc:
        if only_unfinished_creates(exc.plan, run.never_made):
            return _unfinished(run, exc.plan)
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
    if only_unfinished_creates(plan, run.never_made):
        return _unfinished(run, plan)
    if plan.has_changes:
        return Condition("verify", "failed", "ChangesRemain", f"The verification plan shows {plan.counts}.",
                         "review the plan; the recovery is not complete until it shows no changes",
                         details={"plan": plan.to_dict()})
    if run.s.flux_ready is not None:
        return _flux(run, plan)
    return Condition("verify", "achieved", "NoChanges",
                     "The refresh preview shows no changes: state and live resources agree.", "none",
                     details={"counts": plan.counts})


def _flux(run: Run, plan: Plan) -> Condition:
    """State and live resources agree; does Flux itself work? The engine does not await its controllers."""
    from bootstrap.flux.check import FluxNotReady

    o = run.o
    try:
        result = run.s.flux_ready()
    except GroundctlError as exc:
        return Condition("verify", "failed", "FluxNotChecked", f"The refresh preview shows no changes, but Flux's "
                         f"readiness could not be checked: {exc.message}", "fix what the message names, then re-run "
                         f"`groundctl recover {o.environment} {o.layer}`, which verifies the restored state again",
                         exit_code=exc.exit_code)
    details = {"counts": plan.counts, "flux": result.to_dict()}
    if result.outcome != "ready":
        reason = result.last_reason or result.reason
        return Condition("verify", "failed", reason, f"The refresh preview shows no changes, but Flux is not ready "
                         f"({reason}): {result.message}.", "see what Flux says (`flux get all -n flux-system`), fix the "
                         f"cause, then re-run `groundctl recover {o.environment} {o.layer}` or "
                         f"`groundctl up {o.environment} --layers flux`", details=details,
                         exit_code=FluxNotReady.exit_code)
    return Condition("verify", "achieved", "NoChanges", "The refresh preview shows no changes: state and live "
                     f"resources agree, and Flux is Ready ({result.message}).", "none", details=details)


def _unfinished(run: Run, plan: Plan) -> Condition:
    names = sorted(c.name for c in plan.changes if c.operation == "create")
    return Condition("verify", "achieved", "OnlyUnfinishedCreates",
                     f"The refresh preview shows only the creates the interrupted update never finished "
                     f"({', '.join(names)}): state and live resources agree.",
                     f"`groundctl up {run.o.environment} --layers {run.o.layer}` makes them",
                     details={"counts": plan.counts, "plan": plan.to_dict()})


def only_unfinished_creates(plan: Plan, never_made: frozenset[str]) -> bool:
    """Whether every change the plan shows is the create of a resource whose pending create was dropped as
    having made nothing: the program still declares it, and only the next `up` makes it. Pure."""
    changes = [c for c in plan.changes if c.operation not in NO_CHANGE_OPS]
    return bool(changes) and all(c.operation == "create" and c.urn in never_made for c in changes)
