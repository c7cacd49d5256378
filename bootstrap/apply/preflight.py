"""The preflight phases a run takes before its first layer: the AWS account, the engine, the state backend
(or only its bucket), the environment lock and the layers' pending operations, and the lock's check between
layers.

Nothing is written before the engine is known to run (the "engine" phase: CLI, version, plugins), and no
layer changes while any layer's state holds pending operations (the "pending" phase).
"""

from __future__ import annotations

from typing import Optional, Sequence

from bootstrap.kit import console
from bootstrap.apply.services import Services
from bootstrap.apply.steps import Steps
from bootstrap.engine import preflight as engine_preflight
from bootstrap.engine.pending import refuse_pending_layers
from bootstrap.records.runs import RunLog
from bootstrap.target import Target


def engine_layers(steps: Steps) -> list[str]:
    # The layers the engine will run a program for (not the ones already known to be skipped).
    return [s.layer for s in steps.layers if not s.skip_reason]


def run_states(target: Target) -> engine_preflight.StateOf:
    """The reader of the layers' current states one run shares between its phases: each read once."""
    return engine_preflight.stored_states(target.store, target.name)


def preflight_phase(name: str, target: Target, services: Services, log: RunLog, *, layers: Sequence[str] = (),
                    operation: Optional[str] = None, states: Optional[engine_preflight.StateOf] = None,
                    persist: bool = True, held: Optional[list] = None) -> Optional[object]:
    """Run one preflight phase; returns the lock context manager for "lock", also put in `held`
    before it is taken, so the caller's `finally` releases it even when an interrupt lands in between.
    `states` reads the `layers`' states (`run_states`), for the engine's plugins and the pending operations.

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
            # Before the first write: the Flux manifest the flux layer will install (the engine checks it again
            # when it opens that layer, after the layers before it were applied), the CLI, its version and
            # settings (building the engine checks them), and the provider plugins the `layers` programs need.
            if "flux" in layers:
                from bootstrap.flux.manifest import require_manifest

                require_manifest(target.spec)
            target.engine_check()
            # `operation` (the command) decides whether the plugins the states record are needed too.
            engine_preflight.require_engine(target.engine, layers, operation=operation,
                                            states=states if operation else None)
            note["detail"] = "engine available" + (f" for {', '.join(layers)}" if layers else "")
        elif name == "pending":
            # Every layer at once, under the lock where the command takes one: a refusal at a layer's own
            # preview would come after the layers before it were applied (or destroyed).
            read = states or run_states(target)
            refusal = refuse_pending_layers(target.name, operation or "", {layer: read(layer) for layer in layers})
            if refusal is not None:
                for layer in refusal.layers:
                    log.set_layer(layer, achieved="refused", message="its state holds pending operations")
                raise refusal
            note["detail"] = "no pending operations" + (f" in {', '.join(layers)}" if layers else "")
    return None


def _describe(report: object) -> str:
    created = tuple(getattr(report, "created", ()) or ())
    updated = tuple(getattr(report, "updated", ()) or ())
    if not (created or updated):
        return "already in place"
    return "; ".join(part for part in (f"created {', '.join(created)}" if created else "",
                                       f"updated {', '.join(updated)}" if updated else "") if part)


def still_locked(lock: object) -> None:
    # The heartbeat thread notices a broken or stolen lock; stop before writing any more state.
    check = getattr(lock, "check", None)
    if callable(check):
        check()
