"""The `up` of one layer: (for a new stack or the backend's adoption: setup gate → create → adopt) → preview
→ render → gate → up → ledger record → output contract check; and for the flux layer, Flux's own readiness.

A layer that is already up to date previews to no changes and is not applied again (its contract is
still checked), so a re-run resumes cleanly.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from bootstrap.kit import console
from bootstrap.apply import gate, setup as layer_setup
from bootstrap.apply.layer_stack import layer_skip_reason, record_ledger, stack_action_for
from bootstrap.apply.services import Services
from bootstrap.apply.steps import LayerStep
from bootstrap.planning.summary import counts_text, plan_summary, show_plan
from bootstrap.kit.errors import EngineError, Refused
from bootstrap.flux.owners import refuse_other_owner
from bootstrap.layers import layer as layer_def, missing_outputs
from bootstrap.planning.plan import Plan
from bootstrap.records.runs import RunLog
from bootstrap.target import Target

LINEAGE_CONFIG = "groundctl:lineage"


@dataclass(frozen=True)
class UpOptions:
    yes: bool = False
    allow_destroy: bool = False
    plan_dir: Optional[Path] = None
    await_flux: bool = True     # the rebuild drill waits for Flux in a phase of its own, with its own deadline


def up_layer(target: Target, step: LayerStep, services: Services, log: RunLog, options: UpOptions,
             approved: Optional[dict]) -> Plan:
    layer, engine = step.layer, target.engine
    log.set_layer(layer, achieved="pending")
    reason = layer_skip_reason(target, step, services)
    if reason:
        console.step(f"{layer}: skipped — {reason}")
        log.set_layer(layer, achieved="skipped", message=reason)
        return Plan(layer, target.name, (), skipped_reason=reason)
    if layer == "flux":  # flux bootstrap's objects: never two owners
        refuse_other_owner(target, lambda kubeconfig: services.kube_for(target.spec, kubeconfig), log)
    # The lineage the layer's stack is configured with when the engine first opens it: the ledger's, read once
    # (the engine asks target.lineage_for too), or a new one for a layer the ledger has never recorded.
    lineage = target.lineage_for(layer) or str(uuid.uuid4())
    target.lineages[layer] = lineage
    with log.phase("stack", layer) as note:
        exists = stack_action_for(target, services, layer, "up") == "use"
        needs = layer_setup.decide(layer, stack_exists=exists, environment=target.name,
                                   state=engine.export_state(layer) if exists and layer == "backend" else None,
                                   backend_report=target.backend_report)
        note["detail"] = "exists" if exists else "does not exist yet"
    if needs.needed:
        _setup_gate(target, services, log, layer, needs, options)
    if needs.create_stack:
        with log.phase("create", layer) as note:
            engine.create_stack(layer)
            note["detail"] = f"created the empty stack organization/{layer}/{target.name} (no ledger record yet)"
    # The program exports its lineage from config: set it before the preview, so that the plan approved
    # is the plan applied (a saved Pulumi plan refuses config that changed after it, seen on the real engine).
    engine.set_config(layer, LINEAGE_CONFIG, lineage)
    # An adoption writes state without running the program: the up that follows registers the outputs
    # (and converges the imported resources) even when the preview shows no resource change.
    adopted = needs.adoption is not None and _adopt_backend(target, services, log, needs.adoption)
    console.step(f"{layer}: preview")
    # With a reviewed plan (--plan-dir) the apply is held to the saved plan the reviewed preview wrote; this
    # preview, under the lock, is for the stale-plan check and the gate.
    reviewed = approved is not None
    saved = engine.supports_saved_plans() and not reviewed
    with log.phase("preview", layer) as note, console.progress(f"{layer}: preview") as tick:
        plan = engine.preview(layer, save_plan=saved, on_progress=tick)
        note["detail"] = plan_summary(plan)
    log.set_layer(layer, counts=plan.counts, fingerprint=plan.fingerprint)
    show_plan(plan)
    with log.phase("gate", layer) as note:
        decision = gate.check_fresh(approved, plan, str(options.plan_dir)) if approved is not None else None
        if decision is None:
            decision = gate.decide_apply(plan, yes=options.yes, allow_destroy=options.allow_destroy)
            if decision.outcome == "ask":
                decision = gate.after_confirm(decision, services.confirm(decision.reason))
        if decision.outcome == "refused":
            raise decision.refusal(layer)
        note["detail"] = decision.reason
    serial, result = None, None
    apply = plan.has_changes or adopted
    if apply:
        if reviewed:  # the gate refused a layer with changes whose reviewed plan has no saved plan
            engine.use_reviewed_plan(layer, approved[layer].saved_plan_text)
        elif not saved:
            _same_as_approved(target, log, layer, plan)
        with log.phase("up", layer) as note, console.progress(f"{layer}: up") as tick:
            result = engine.up(layer, use_saved_plan=saved or reviewed, on_progress=tick)
            note["detail"] = counts_text(result.counts) + (" (held to the reviewed plan)" if reviewed else
                                                           " (within the saved plan)" if saved else "")
        log.set_layer(layer, applied_with="reviewed-plan" if reviewed else "saved-plan" if saved else "re-preview")
        serial = record_ledger(target, services, log, layer, "up", lineage)
    with log.phase("contract", layer) as note:
        # The up's result carries the outputs it left, secrets marked (the SDK reads them right after the
        # update); a read of its own would start the CLI and pay the passphrase KDF twice more. Only a layer
        # that was not applied reads them.
        outputs = result.outputs if result is not None else engine.outputs(layer)
        target.extra_secrets.update(str(outputs.values[k]) for k in outputs.secret_keys if k in outputs.values)
        missing = missing_outputs(layer_def(layer), outputs.values)
        if missing:
            raise EngineError(
                f"The {layer} layer was applied but does not export {', '.join(missing)}, which its output "
                f"contract promises to the layers after it; they would fail in confusing ways, so the run "
                f"stops here. Fix stacks/{layer} to export them and re-run `groundctl up {target.name}`."
            )
        note["detail"] = f"{len(outputs.values)} outputs present"
    log.set_layer(layer, achieved="applied" if apply else "unchanged", serial=serial,
                  message=plan_summary(plan))
    if layer == "flux" and options.await_flux:
        _flux_ready(target, services, log, outputs.values, plan_summary(plan))
    return plan


def _flux_ready(target: Target, services: Services, log: RunLog, flux_outputs: dict, summary: str) -> None:
    """The flux layer ends when Flux is up, not when the API server has accepted its objects (the engine does
    not await the controllers: `bootstrap.flux.check`). Even an unchanged layer is checked: `up` succeeding
    says the environment works."""
    from bootstrap.flux.check import flux_readiness, not_ready

    minutes = target.spec.flux.ready_timeout_minutes
    console.step(f"flux: waiting for Flux's controllers and root Kustomization to be Ready (up to {minutes} min)")
    with log.phase("flux-ready", "flux") as note:
        result = flux_readiness(target.spec, target.engine, kube_for=services.kube_for, secrets=target.extra_secrets,
                                flux_outputs=flux_outputs, clock=services.clock, sleep=services.sleep)
        if result.outcome != "ready":
            error = not_ready(target.spec, result)
            log.set_layer("flux", message=f"{summary}; Flux not ready ({error.reason})")
            raise error
        note["detail"] = f"{result.message} ({result.polls} poll(s), {result.seconds:.0f} s)"


def _same_as_approved(target: Target, log: RunLog, layer: str, approved: Plan) -> None:
    """Without saved plans, preview again right before the apply (under the lock) and refuse when it
    differs from the approved one: what is applied is what was approved."""
    with log.phase("re-preview", layer) as note, console.progress(f"{layer}: re-preview") as tick:
        fresh = target.engine.preview(layer, on_progress=tick)
        note["detail"] = f"fingerprint {fresh.fingerprint[:12]}"
    if fresh.fingerprint != approved.fingerprint:
        raise Refused(
            f"The {layer} layer was not applied: a preview right before the apply (fingerprint "
            f"{fresh.fingerprint[:12]}: {plan_summary(fresh)}) differs from the approved one "
            f"({approved.fingerprint[:12]}: {plan_summary(approved)}); something changed in between. Nothing in "
            f"{layer} was changed; run `groundctl up {target.name}` again to review the new plan."
        )


def _setup_gate(target: Target, services: Services, log: RunLog, layer: str, needs: layer_setup.Setup,
                options: UpOptions) -> None:
    """Approve the writes the layer's preview needs first, before any of them is done."""
    what = layer_setup.summary(needs, layer, target.name)
    with log.phase("setup-gate", layer) as note:
        decision = gate.decide_setup(layer, target.name, what, yes=options.yes,
                                     plan_dir=str(options.plan_dir) if options.plan_dir else None)
        if decision.outcome == "ask":
            decision = gate.after_confirm(decision, services.confirm(decision.reason))
        if decision.outcome == "refused":
            raise decision.refusal(layer)
        note["detail"] = decision.reason


def _adopt_backend(target: Target, services: Services, log: RunLog, document: dict) -> bool:
    """Import the bucket and key the bootstrap made into the backend stack (approved at its setup gate), so
    the preview that follows plans no second key, alias or bucket."""
    with log.phase("adopt", "backend") as note:
        lineage = target.lineages["backend"]  # set (config included) by up_layer before the adoption
        with console.progress("backend: import") as tick:
            result = target.engine.import_resources("backend", document, on_progress=tick)
        note["detail"] = f"imported {len(document['resources'])} resources ({counts_text(result.counts)})"
    record_ledger(target, services, log, "backend", "import", lineage)
    return True
