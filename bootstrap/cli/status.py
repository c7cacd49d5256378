"""`groundctl status <env>` (what the ledger and lock say) and `groundctl drift <env>` (refresh-previews)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from bootstrap import console
from bootstrap.cli import app
from bootstrap.cli.up import announce_emulator, split_layers
from bootstrap.layers import select
from bootstrap.orchestrator import default_services, plan_summary, preview_all
from bootstrap.plan import Plan
from bootstrap.steps import build_preview
from bootstrap.target import open_target

_ENV = typer.Argument(..., help="Environment name (environments/<name>.yaml) or a spec path.")
_ENDPOINT = typer.Option(None, "--endpoint-url", help="AWS endpoint (an emulator) for a non-production environment.")


def _plain(obj: object) -> object:
    if obj is None or isinstance(obj, (str, int, float, bool, dict, list)):
        return obj
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    return str(obj)


def _bucket_exists(target) -> bool:
    from bootstrap.errors import BadInput

    try:
        target.require_bucket()
    except BadInput:
        return False
    return True


def layer_status(store, layer: str, environment: str) -> dict:
    from recovery.ledger import read_ledger

    ledger = read_ledger(store, layer, environment)
    records = list(getattr(ledger, "records", []) or [])
    if not records:
        return {"layer": layer, "deployed": False, "operation": None, "serial": None, "lineage": None,
                "resources": None, "at": None, "run_id": None}
    head = records[-1]
    return {"layer": layer, "deployed": head.operation != "destroy", "operation": head.operation,
            "serial": head.serial, "lineage": head.lineage, "resources": getattr(head, "resources", None),
            "at": str(getattr(head, "at", "")), "run_id": getattr(head, "run_id", None)}


def holder_text(lock: object) -> str:
    if lock is None:
        return "not locked"
    info = getattr(lock, "holder", None)
    if info is None:
        return getattr(lock, "reason", None) or "not locked"
    who = getattr(info, "holder", None) or str(_plain(info))
    return who + (f" — stale: {lock.reason}" if getattr(lock, "stale", False) else "")


@app.command("status")
def status(
    environment: str = _ENV,
    json_out: bool = typer.Option(False, "--json", help="Print the status as JSON on stdout."),
    endpoint_url: Optional[str] = _ENDPOINT,
) -> None:
    """Per layer: the last recorded operation, serial, lineage and resource count; and the lock holder."""
    from bootstrap.locks import lock_status

    with open_target(environment, endpoint_url=endpoint_url, on_emulator=announce_emulator) as target:
        if not _bucket_exists(target):
            layers = [{"layer": lay.name, "deployed": False, "operation": None, "serial": None, "lineage": None,
                       "resources": None, "at": None, "run_id": None} for lay in select(None)]
            lock = None
            note = f"the state bucket {target.spec.backend.bucket} does not exist: nothing is deployed"
        else:
            layers = [layer_status(target.store, lay.name, target.name) for lay in select(None)]
            lock = lock_status(target.store, target.name)
            note = ""
    doc = {"environment": environment, "layers": layers, "lock": _plain(lock), "lock_holder": holder_text(lock),
           "note": note}
    if json_out:
        console.emit_json(doc)
        return
    table = Table(title=f"status of {environment}")
    for column in ("layer", "last operation", "serial", "lineage", "resources", "at"):
        table.add_column(column)
    for row in layers:
        table.add_row(*(Text(v) for v in (row["layer"], row["operation"] or "never applied", _s(row["serial"]),
                                          _s(row["lineage"]), _s(row["resources"]), _s(row["at"]))))
    console.data(table)
    console.info(f"lock: {doc['lock_holder']}" + (f" ({note})" if note else ""))


def _s(value: object) -> str:
    return "" if value is None else str(value)


def drift_row(plan: Plan) -> dict:
    if plan.skipped_reason:
        state = "skipped"
    elif not plan.has_changes:
        state = "clean"
    elif all(c.operation == "create" for c in plan.changes):
        state = "not deployed"  # nothing of it exists: that differs from its declaration too
    else:
        state = "drift"
    changed = [{"urn": c.urn, "type": c.type, "operation": c.operation, "diff_keys": list(c.diff_keys)}
               for c in plan.changes if c.operation not in ("same", "read")]
    return {"layer": plan.layer, "state": state, "summary": plan_summary(plan), "counts": plan.counts,
            "skipped_reason": plan.skipped_reason, "changes": changed}


@app.command("drift")
def drift(
    environment: str = _ENV,
    layers: Optional[list[str]] = typer.Option(None, "--layers", help="Only these layers."),
    json_out: bool = typer.Option(False, "--json", help="Print the drift report as JSON on stdout."),
    endpoint_url: Optional[str] = _ENDPOINT,
) -> None:
    """Refresh-preview every layer expecting no changes; exit 0 when clean, 1 when drift is found."""
    with open_target(environment, endpoint_url=endpoint_url, on_emulator=announce_emulator) as target:
        steps = build_preview(target.spec, split_layers(layers), emulated=target.emulated, refresh=True)
        plans = preview_all(target, steps, default_services())
    rows = [drift_row(p) for p in plans]
    drifted = [r["layer"] for r in rows if r["state"] in ("drift", "not deployed")]
    if json_out:
        console.emit_json({"environment": environment, "drift": bool(drifted), "layers": rows})
    else:
        table = Table(title=f"drift of {environment}")
        for column in ("layer", "state", "detail"):
            table.add_column(column)
        for row in rows:
            table.add_row(Text(row["layer"]), Text(row["state"]), Text(row["summary"]))
        console.data(table)
        console.info(f"drift found in {', '.join(drifted)}" if drifted else "no drift: every layer matches its state")
    if drifted:
        raise typer.Exit(1)
