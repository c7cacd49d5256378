"""`destroy`'s layers: one gate for the whole list, then each layer's stack destroyed in order, with its
ledger record; a layer never deployed is skipped with the reason."""

from __future__ import annotations

from bootstrap.kit import console
from bootstrap.apply import gate
from bootstrap.apply.layer_stack import record_ledger, stack_action_for
from bootstrap.apply.preflight import still_locked
from bootstrap.apply.services import Services
from bootstrap.apply.steps import Steps, not_deployed_reason
from bootstrap.planning.summary import counts_text
from bootstrap.kit.errors import Refused
from bootstrap.records.runs import RunLog
from bootstrap.target import Target


def destroy_all(target: Target, steps: Steps, services: Services, log: RunLog, lock: object, *,
                yes: bool) -> None:
    names = [s.layer for s in steps.layers if not s.skip_reason]
    with log.phase("gate") as note:
        decision = gate.decide_destroy(target.name, names, yes=yes)
        if decision.outcome == "ask":
            decision = gate.after_destroy_confirm(decision, services.confirm(decision.reason))
        if decision.outcome == "refused":
            raise Refused(f"Nothing was destroyed: {decision.reason}.")
        note["detail"] = decision.reason
    for step in steps.layers:
        layer = step.layer
        still_locked(lock)
        if step.skip_reason:
            log.set_layer(layer, achieved="skipped", message=step.skip_reason)
            continue
        log.set_layer(layer, achieved="pending")
        with log.phase("stack", layer):
            action = stack_action_for(target, services, layer, "destroy")
        if action == "not-deployed":
            log.set_layer(layer, achieved="skipped", message=not_deployed_reason(target.name, layer))
            continue
        console.step(f"{layer}: destroy")
        with log.phase("destroy", layer) as note, console.progress(f"{layer}: destroy") as tick:
            result = target.engine.destroy(layer, on_progress=tick)
            note["detail"] = counts_text(result.counts)
        serial = record_ledger(target, services, log, layer, "destroy", target.lineage_for(layer))
        log.set_layer(layer, achieved="destroyed", serial=serial, counts=dict(result.counts))
