"""`groundctl status <env>` (what the ledger and lock say) and `groundctl drift <env>` (refresh-previews)."""

from __future__ import annotations

import os
from typing import Optional

import typer
from rich.text import Text

from bootstrap.kit import console
from groundctl.cli import app
from groundctl.common import ENDPOINT_OPT, ENV_ARG, announce_emulator, json_opt, refuse_embedded, split_layers, table
from bootstrap.kit.errors import BadInput
from bootstrap.layers import select


def layer_status(store, layer: str, environment: str) -> dict:
    """What the ledger's head says about one layer (store None: the bucket is absent, nothing applied)."""
    from bootstrap.records.ledger import read_ledger

    ledger = read_ledger(store, layer, environment) if store is not None else None
    head = ledger.head if ledger is not None else None
    # A record that cannot be read is named (its key and why), never skipped in silence.
    unreadable = [f.sentence for f in (ledger.problems if ledger else ()) if f.code == "unparseable-record"]
    if head is None:
        return {"layer": layer, "deployed": False, "operation": None, "serial": None, "lineage": None,
                "resources": None, "at": None, "run_id": None, "unreadable": unreadable}
    return {"layer": layer, "deployed": head.operation != "destroy", "operation": head.operation,
            "serial": head.serial, "lineage": head.lineage, "resources": head.resources, "at": head.at,
            "run_id": head.run_id, "unreadable": unreadable}


def holder_text(lock) -> str:
    if lock is None:
        return "not locked"
    if lock.holder is None:
        return lock.reason or "not locked"
    return lock.holder.holder + (f" — stale: {lock.reason}" if lock.stale else "")


@app.command("status")
def status(
    environment: str = ENV_ARG,
    json_out: bool = json_opt("the status"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Per layer: the last recorded operation, serial, lineage and resource count; and the lock holder."""
    from bootstrap.target import open_target

    from bootstrap.records.lock_status import lock_status

    # A history read from an emulator started for this command is always empty: say so, never "never applied".
    spec = refuse_embedded(environment, endpoint_url)
    with open_target(environment, endpoint_url=endpoint_url, spec=spec) as target:
        try:
            target.require_bucket()
            store, note = target.store, ""
        except BadInput:  # an absent bucket is an answer here: nothing is deployed
            store, note = None, f"the state bucket {target.spec.backend.bucket} does not exist: nothing is deployed"
        layers = [layer_status(store, lay.name, target.name) for lay in select(None)]
        lock = lock_status(store, target.name) if store is not None else None
    doc = {"environment": environment, "layers": layers, "lock": lock.to_dict() if lock else None,
           "lock_holder": holder_text(lock), "note": note}
    unreadable = [u for row in layers for u in row["unreadable"]] + (
        [f"the lock object {lock.unreadable} cannot be read"] if lock is not None and lock.unreadable else [])
    if json_out:
        console.emit_json(doc)
    else:
        rows = table(f"status of {environment}", "layer", "last operation", "serial", "lineage", "resources", "at")
        for row in layers:
            rows.add_row(*(Text(v) for v in (row["layer"], row["operation"] or "never applied", _s(row["serial"]),
                                              _s(row["lineage"]), _s(row["resources"]), _s(row["at"]))))
        console.data(rows)
        console.info(f"lock: {doc['lock_holder']}" + (f" ({note})" if note else ""))
        for problem in unreadable:
            console.warn(problem)
    if unreadable:
        raise typer.Exit(1)  # a record that cannot be read is a problem found, even when the rest reads


def record_failure(target, record: dict, save, what: str = "drift check", title: str = "Drift record") -> None:
    """Keep the failed check's record; when even that cannot be written, say so and let the error stand."""
    try:
        key = save(target.store, record, target.secret_values())
    except Exception as exc:  # noqa: BLE001 - the check's own error is the one to report
        console.warn(f"the failed {what} could not be recorded in the state bucket "
                     f"({getattr(exc, 'message', None) or type(exc).__name__})")
        return
    console.info(f"{title} (failed): {key} in the state bucket")


def _s(value: object) -> str:
    return "" if value is None else str(value)


def require_flux_secrets(spec, steps) -> None:
    """BadInput before any preview when the flux layer will run and its SSH secrets are not set: a scheduled
    drift check must fail at once with what to set, not after every other layer."""
    from bootstrap.spec.stack_config import flux_secrets_missing

    if any(s.layer == "flux" and not s.skip_reason for s in steps.layers):
        missing = flux_secrets_missing(spec, os.environ)
        if missing:
            raise BadInput(missing)


@app.command("drift")
def drift(
    environment: str = ENV_ARG,
    layers: Optional[list[str]] = typer.Option(None, "--layers", help="Only these layers."),
    json_out: bool = json_opt("the drift report"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
    record: bool = typer.Option(False, "--record", help="Also keep the result in the state bucket under "
                                ".groundctl/drift/<env>/ (what scheduled runs do; `groundctl fleet status` reads it)."),
) -> None:
    """Refresh-preview every layer expecting no changes; exit 0 when clean, 1 when drift is found."""
    from bootstrap.apply.preview import preview_all
    from bootstrap.apply.services import default_services
    from bootstrap.apply.steps import build_preview
    from bootstrap.kit.errors import GroundctlError
    from bootstrap.records.drift import drift_record, drift_row, failed_drift_record, save_drift_record
    from bootstrap.target import open_target

    with open_target(environment, endpoint_url=endpoint_url, on_emulator=announce_emulator) as target:
        steps = build_preview(target.spec, split_layers(layers), emulated=target.emulated, refresh=True)
        try:
            require_flux_secrets(target.spec, steps)
            plans = preview_all(target, steps, default_services())
        except GroundctlError as exc:
            if record:  # a scheduled check that failed is seen as failed, with its reason
                record_failure(target, failed_drift_record(target.name, exc.message), save_drift_record)
            raise
        rows = [drift_row(p) for p in plans]
        if record:
            key = save_drift_record(target.store, drift_record(target.name, rows), target.secret_values())
            console.info(f"Drift record: {key} in the state bucket")
    drifted = [r["layer"] for r in rows if r["state"] in ("drift", "not deployed")]
    if json_out:
        console.emit_json({"environment": environment, "drift": bool(drifted), "layers": rows})
    else:
        shown = table(f"drift of {environment}", "layer", "state", "detail")
        for row in rows:
            shown.add_row(Text(row["layer"]), Text(row["state"]), Text(row["summary"]))
        console.data(shown)
        console.info(f"drift found in {', '.join(drifted)}" if drifted else "no drift: every layer matches its state")
    if drifted:
        raise typer.Exit(1)
