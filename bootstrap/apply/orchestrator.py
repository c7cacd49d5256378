"""The runner: executes the steps `bootstrap.apply.steps` builds, and alone does the I/O for up/destroy/plan/drift.

Nothing is written before the engine is known to run (the "engine" preflight: CLI, version, plugins). Per
layer, `up` runs (for a new stack or the backend's adoption: setup gate → create → adopt) → preview → render
→ gate → up → ledger record → output contract check, and the run record is saved after every phase. A failure stops at that layer with the record kept; a re-run
resumes cleanly because a layer that is already up to date previews to no changes and is not applied
again (its contract is still checked). Everything the runner calls that is not the engine comes in
through `Services`, so tests can count, fail or replace any of it.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from bootstrap import console
from bootstrap.apply import gate, setup as layer_setup
from bootstrap.aws.clients import error_code
from bootstrap.planning import render as plan_render
from bootstrap.interrupts import shielded
from bootstrap.errors import BadInput, EngineError, GroundctlError, Refused
from bootstrap.layers import layer as layer_def, missing_outputs
from bootstrap.planning.plan import NO_CHANGE_OPS, Plan
from bootstrap.records.runs import RunLog, RunRecord, error_outcome, git_commit, redact, start_run
from bootstrap.apply.steps import (
    LayerStep, Steps, StackAction, build_preview, kubernetes_endpoint, not_deployed_reason, stack_action,
)
from bootstrap.engine import preflight
from bootstrap.engine.errors import StackLost
from bootstrap.target import Target, open_target, probe_tcp

LINEAGE_CONFIG = "groundctl:lineage"


def _ledger_serial(store, layer: str, environment: str) -> int:
    from bootstrap.records.ledger import read_ledger
    return read_ledger(store, layer, environment).highest_serial


@dataclass
class Services:
    """The I/O the runner performs besides the engine. Defaults are the product's modules."""
    check_account: Callable
    ensure_backend: Callable
    environment_lock: Callable  # (store, environment, run_id) -> context manager
    append_record: Callable
    confirm: Callable[[str], bool] = console.confirm
    clock: Callable[[], float] = time.time
    probe: Callable[[str, int], Optional[str]] = probe_tcp
    git_commit: Callable[[], Optional[str]] = git_commit
    # (store, layer, environment) -> the highest serial the layer's ledger holds, 0 for none
    ledger_serial: Callable[..., int] = _ledger_serial


def default_services(**overrides) -> Services:
    """The product's services; anything in `overrides` replaces (and never imports) the default."""
    def lock(store, environment, run_id):
        from bootstrap.records.locks import EnvironmentLock
        return EnvironmentLock(store, environment, run_id)

    def append(*args, **kwargs):
        from bootstrap.records.ledger import append_record
        return append_record(*args, **kwargs)

    def account(spec, clients):
        from bootstrap.aws.backend import check_account
        return check_account(spec, clients)

    def backend(spec, clients):
        from bootstrap.aws.backend import ensure_backend
        return ensure_backend(spec, clients)

    base = dict(check_account=account, ensure_backend=backend, environment_lock=lock, append_record=append)
    base.update(overrides)
    return Services(**base)


@dataclass(frozen=True)
class RunOutcome:
    record: RunRecord
    error: Optional[GroundctlError] = None
    plans: tuple[Plan, ...] = field(default=())
    stored: bool = False  # whether the run record reached the state bucket

    @property
    def exit_code(self) -> int:
        return self.error.exit_code if self.error else 0


def plan_summary(plan: Plan) -> str:
    if plan.skipped_reason:
        return f"skipped: {plan.skipped_reason}"
    counts = {op: n for op, n in plan.counts.items() if op not in NO_CHANGE_OPS}
    text = ", ".join(f"{n} to {op}" for op, n in counts.items()) or "no changes"
    return text + (f" ({len(plan.risky)} risky)" if plan.risky else "")


def _counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {op}" for op, n in sorted(counts.items()))


def _render(plan: Plan) -> None:
    console.info(f"  {plan.layer}: {plan_summary(plan)}")
    for change, reason in plan.risky:
        console.warn(f"{plan.layer}: {change.operation} {change.name} ({change.type}): {reason}")


# -- preflight ------------------------------------------------------------------------------------------


def _preflight(name: str, target: Target, services: Services, log: RunLog, *, layers: Sequence[str] = (),
               persist: bool = True, held: Optional[list] = None) -> Optional[object]:
    """Run one preflight phase; returns the lock context manager for "lock", also put in `held`
    before it is taken, so the caller's `finally` releases it even when an interrupt lands in between.

    Once the state bucket is known to exist the run record is attached to it (`persist`); previews
    (plan, drift) keep theirs in memory, as they change nothing worth an audit record.
    """
    with log.phase(name) as note:
        if name == "account":
            console.step(f"Checking the AWS account ({target.endpoint.source})")
            account = services.check_account(target.spec, target.clients)
            note["detail"] = f"account {account}"
        elif name == "backend":
            console.step(f"Ensuring the state backend (bucket {target.spec.backend.bucket})")
            report = services.ensure_backend(target.spec, target.clients)
            target.backend_report = report
            note["detail"] = _describe(report)
            if persist:
                log.attach(target.store.put)
        elif name == "state-bucket":
            target.require_bucket()
            if persist:
                log.attach(target.store.put)
        elif name == "lock":
            console.step(f"Taking the environment lock on '{target.name}' (run {log.record.run_id})")
            lock = services.environment_lock(target.store, target.name, log.record.run_id)
            if held is not None:
                held.append(lock)
            lock.__enter__()
            note["detail"] = f"run {log.record.run_id}"
            return lock
        elif name == "engine":
            # Before the first write: the CLI, its version and settings (building the engine checks them),
            # and the provider plugins the `layers` programs need.
            target.engine_check()
            preflight.require_engine(target.engine, layers)
            note["detail"] = "engine available" + (f" for {', '.join(layers)}" if layers else "")
    return None


def _describe(report: object) -> str:
    created = tuple(getattr(report, "created", ()) or ())
    updated = tuple(getattr(report, "updated", ()) or ())
    if not (created or updated):
        return "already in place"
    return "; ".join(part for part in (f"created {', '.join(created)}" if created else "",
                                       f"updated {', '.join(updated)}" if updated else "") if part)


# -- up -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpOptions:
    yes: bool = False
    allow_destroy: bool = False
    plan_dir: Optional[Path] = None


def run(target: Target, steps: Steps, services: Services, options: UpOptions = UpOptions()) -> RunOutcome:
    """Run `up` or `destroy` as built; never raises a GroundctlError, it is returned with the record."""
    opts = {"layers": steps.layer_names, "yes": options.yes, "allow_destroy": options.allow_destroy,
            "plan_dir": str(options.plan_dir) if options.plan_dir else None}
    log = start_run(target.name, steps.command, opts, clock=services.clock, git_commit=services.git_commit(),
                    secret_values=target.secret_values)
    log.plan_layers(steps.layer_names, steps.command)
    lock = None
    held: list = []
    plans: list[Plan] = []
    error: Optional[GroundctlError] = None
    try:
        try:
            approved = _approved_plans(options.plan_dir, target.name) if options.plan_dir else None
            for name in steps.preflight:
                got = _preflight(name, target, services, log, held=held, layers=_engine_layers(steps))
                lock = got or lock
            if steps.command == "destroy":
                _destroy_all(target, steps, services, log, lock, yes=options.yes)
            else:
                for step in steps.layers:
                    _still_locked(lock)
                    plan = _up_layer(target, step, services, log, options, approved)
                    plans.append(plan)
        except GroundctlError as exc:
            error = exc
        except BaseException as exc:
            # Ctrl-C, SIGTERM or a bug: release, and say where the run stopped, before it goes on up.
            _close(log, held, *_stopped_by(exc, log))
            raise
        if error is not None:
            _scrub(error, target)
            for lay in log.record.layers:
                if lay.achieved == "pending":
                    log.set_layer(lay.layer, achieved=error_outcome(error), message=error.message)
            _close(log, held, error_outcome(error), f"stopped at {log.record.stopped_at or ''}: {error.message}")
        else:
            _close(log, held, "succeeded", _closing_message(log.record))
    except KeyboardInterrupt:
        # A signal that landed between two steps of the ending: the record still gets its outcome.
        if log.record.outcome == "running":
            _close(log, held, *_stopped_by(KeyboardInterrupt(), log))
        raise
    if log.save_error:
        console.warn(f"the run record could not be stored: {log.save_error}")
    return RunOutcome(log.record, error, tuple(plans), log.stored)


def _engine_layers(steps: Steps) -> list[str]:
    # The layers the engine will run a program for (not the ones already known to be skipped).
    return [s.layer for s in steps.layers if not s.skip_reason]


def _stopped_by(exc: BaseException, log: RunLog) -> tuple[str, str]:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", f"interrupted at {log.record.stopped_at or 'start-up'}; the lock was released"
    return "failed", f"stopped by {type(exc).__name__}"


def _close(log: RunLog, held: list, outcome: str, message: str) -> None:
    # Shielded: a Ctrl-C here waits until the lock is released and the record says how the run ended.
    with shielded():
        _release(held, log)
        log.finish(outcome, message)


def _release(held: list, log: RunLog) -> None:
    while held:
        lock = held.pop()
        try:
            with log.phase("unlock"):
                lock.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001 - the lock expires by its TTL; the run's outcome stands
            why = getattr(exc, "message", None) or f"{type(exc).__name__} {error_code(exc)}".strip()
            console.warn(f"the environment lock was not released cleanly ({why}); it expires by its TTL")


def _still_locked(lock: object) -> None:
    # The heartbeat thread notices a broken or stolen lock; stop before writing any more state.
    check = getattr(lock, "check", None)
    if callable(check):
        check()


def _scrub(error: GroundctlError, target: Target) -> None:
    # An engine error may quote what Pulumi printed; no secret value leaves through it.
    error.message = redact(error.message, target.secret_values())
    error.args = (error.message,)


def _closing_message(record: RunRecord) -> str:
    parts = [f"{lay.layer} {lay.achieved}" for lay in record.layers]
    skipped = [f"{lay.layer} skipped: {lay.message}" for lay in record.layers if lay.achieved == "skipped"]
    return "; ".join(parts) + (". " + " ".join(skipped) if skipped else "")


def _skip_reason(target: Target, step: LayerStep, services: Services) -> Optional[str]:
    if step.skip_reason or not step.needs_kubernetes:
        return step.skip_reason
    outputs = target.engine.outputs("cluster").values
    endpoint = kubernetes_endpoint(outputs)
    if endpoint is None:
        return ("the cluster layer exports no reachable API endpoint (cluster_endpoint is missing), so there is "
                "no Kubernetes API to install Flux into; apply the cluster layer first")
    host, port = endpoint
    why = services.probe(host, port)
    if why:
        return (f"the cluster API at {host}:{port} is not reachable from here ({why}); a private endpoint "
                "needs a run from inside the VPC (or endpoint_public_access with your address allowed)")
    return None


def _up_layer(target: Target, step: LayerStep, services: Services, log: RunLog, options: UpOptions,
              approved: Optional[dict]) -> Plan:
    layer, engine = step.layer, target.engine
    log.set_layer(layer, achieved="pending")
    reason = _skip_reason(target, step, services)
    if reason:
        console.step(f"{layer}: skipped — {reason}")
        log.set_layer(layer, achieved="skipped", message=reason)
        return Plan(layer, target.name, (), skipped_reason=reason)
    with log.phase("stack", layer) as note:
        exists = _stack(target, services, layer, "up") == "use"
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
    lineage = target.lineage_for(layer) or str(uuid.uuid4())
    target.lineages[layer] = lineage
    engine.set_config(layer, LINEAGE_CONFIG, lineage)
    # An adoption writes state without running the program: the up that follows registers the outputs
    # (and converges the imported resources) even when the preview shows no resource change.
    adopted = needs.adoption is not None and _adopt_backend(target, services, log, needs.adoption)
    console.step(f"{layer}: preview")
    saved = engine.supports_saved_plans()
    with log.phase("preview", layer) as note, console.progress(f"{layer}: preview") as tick:
        plan = engine.preview(layer, save_plan=saved, on_progress=tick)
        note["detail"] = plan_summary(plan)
    log.set_layer(layer, counts=plan.counts, fingerprint=plan.fingerprint)
    _render(plan)
    with log.phase("gate", layer) as note:
        decision = gate.check_fresh(approved, plan, str(options.plan_dir)) if approved is not None else None
        if decision is None:
            decision = gate.decide_apply(plan, yes=options.yes, allow_destroy=options.allow_destroy)
            if decision.outcome == "ask":
                decision = gate.after_confirm(decision, services.confirm(decision.reason))
        if decision.outcome == "refused":
            raise decision.refusal(layer)
        note["detail"] = decision.reason
    serial = None
    apply = plan.has_changes or adopted
    if apply:
        if not saved:
            _same_as_approved(target, log, layer, plan)
        with log.phase("up", layer) as note, console.progress(f"{layer}: up") as tick:
            result = engine.up(layer, use_saved_plan=saved, on_progress=tick)
            note["detail"] = _counts_text(result.counts) + (" (within the saved plan)" if saved else "")
        log.set_layer(layer, applied_with="saved-plan" if saved else "re-preview")
        serial = _ledger(target, services, log, layer, "up", lineage)
    with log.phase("contract", layer) as note:
        outputs = engine.outputs(layer)
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
    return plan


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
        lineage = target.lineages["backend"]  # set (config included) by _up_layer before the adoption
        with console.progress("backend: import") as tick:
            result = target.engine.import_resources("backend", document, on_progress=tick)
        note["detail"] = f"imported {len(document['resources'])} resources ({_counts_text(result.counts)})"
    _ledger(target, services, log, "backend", "import", lineage)
    return True


def _stack(target: Target, services: Services, layer: str, operation) -> StackAction:
    """Whether the layer's stack is used, created or reported; StackLost (exit 3) when the ledger knows it
    but the backend no longer has it."""
    exists = target.engine.stack_exists(layer)
    serial = 0 if exists else services.ledger_serial(target.store, layer, target.name)
    action = stack_action(operation, exists, serial)
    if action == "lost":
        raise StackLost(target.name, layer, serial)
    return action


def _ledger(target: Target, services: Services, log: RunLog, layer: str, operation: str,
            lineage: Optional[str]) -> Optional[int]:
    # Recorded before the contract check: the state changed whether or not the contract holds, and
    # every stored state version the run produced must be in the ledger.
    with log.phase("ledger", layer) as note:
        rec = services.append_record(target.store, layer, target.name, operation=operation,
                                     run_id=log.record.run_id, git_commit=log.record.git_commit,
                                     lineage=lineage, clock=services.clock)
        serial = getattr(rec, "serial", None)
        note["detail"] = f"serial {serial}"
    return serial


# -- destroy ------------------------------------------------------------------------------------------


def _destroy_all(target: Target, steps: Steps, services: Services, log: RunLog, lock: object, *,
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
        _still_locked(lock)
        if step.skip_reason:
            log.set_layer(layer, achieved="skipped", message=step.skip_reason)
            continue
        log.set_layer(layer, achieved="pending")
        with log.phase("stack", layer):
            action = _stack(target, services, layer, "destroy")
        if action == "not-deployed":
            log.set_layer(layer, achieved="skipped", message=not_deployed_reason(target.name, layer))
            continue
        console.step(f"{layer}: destroy")
        with log.phase("destroy", layer) as note, console.progress(f"{layer}: destroy") as tick:
            result = target.engine.destroy(layer, on_progress=tick)
            note["detail"] = _counts_text(result.counts)
        serial = _ledger(target, services, log, layer, "destroy", target.lineage_for(layer))
        log.set_layer(layer, achieved="destroyed", serial=serial, counts=dict(result.counts))


# -- approved plans -----------------------------------------------------------------------------------


def _approved_plans(plan_dir: Path, environment: str) -> dict:
    if not plan_dir.is_dir():
        raise BadInput(f"--plan-dir {plan_dir} is not a directory. Give the --out directory of `groundctl plan`.")
    documents = {}
    for path in sorted(plan_dir.glob(f"{plan_render.live_plan_prefix(environment)}*.json")):
        try:
            documents[str(path)] = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise BadInput(f"{path} is not readable JSON ({exc}). Re-create it with `groundctl plan`.") from None
    approved = gate.approved_from_documents(documents, environment)
    if not approved:
        raise BadInput(f"{plan_dir} holds no plan for '{environment}'. Write one with "
                       f"`groundctl plan {environment} --out {plan_dir}` and review it first.")
    return approved


# -- previews: plan and drift -------------------------------------------------------------------------


def preview_all(target: Target, steps: Steps, services: Services) -> list[Plan]:
    """Preview (or refresh-preview for drift) every layer in order; skipped layers carry their reason."""
    log = start_run(target.name, steps.command, {}, clock=services.clock, secret_values=target.secret_values)
    for name in steps.preflight:
        _preflight(name, target, services, log, persist=False, layers=_engine_layers(steps))
    plans = []
    for step in steps.layers:
        reason = _skip_reason(target, step, services)
        if reason:
            plans.append(Plan(step.layer, target.name, (), skipped_reason=reason))
            continue
        if _stack(target, services, step.layer, step.operation) == "not-deployed":
            plans.append(Plan(step.layer, target.name, (), skipped_reason=not_deployed_reason(target.name, step.layer),
                              not_deployed=True))
            continue
        with console.progress(f"{step.layer}: {'refresh-preview' if step.operation == 'drift' else 'preview'}") as tick:
            plans.append(target.engine.preview(step.layer, refresh=step.operation == "drift", on_progress=tick))
    return plans


def plan_live(environment: str, *, out_dir: Optional[Path] = None, json_out: bool = False, endpoint_url: Optional[str] = None, layers: Optional[list[str]] = None,
              services: Optional[Services] = None, **target_args) -> int:
    """`groundctl plan <env>` through the engine: preview every layer, write the plan files, report.

    `target_args` go to `open_target` (tests pass their engine factory and spec there)."""
    out_dir = out_dir or Path(".groundctl/plans")
    with open_target(environment, endpoint_url=endpoint_url, **target_args,
                     on_emulator=lambda url: console.info(f"Started the embedded AWS emulator at {url}.")) as target:
        steps = build_preview(target.spec, layers, emulated=target.emulated, refresh=False)
        plans = preview_all(target, steps, services or default_services())
    from bootstrap.destinations import write_files

    written = write_files(out_dir, plan_render.plan_files(plans))
    if json_out:
        console.emit_json({**plan_render.combined_json(plans), "files": [str(f) for f in written]})
    else:
        for plan in plans:
            _render(plan)
        console.info(f"Wrote {len(written)} plan files under {out_dir}.")
    return 0
