"""`groundctl state rehearse <env>`: prove, layer by layer, that the state a recovery would restore today can be
restored, decrypted and matches the cloud, in a scratch backend; optionally record the proof.

Exit codes: 0 every rehearsed layer proven (no change), 1 a layer failed (not restorable, or not proven) or
drifted (restorable, the cloud differs), 2 bad input, 3 refused (the credentials' account), 4 the engine or a
cloud call failed before any verdict, or the record could not be written, 5 no layer could be rehearsed
(nothing deployed).
"""

from __future__ import annotations

import time
from typing import Optional

import typer
from rich.text import Text

from bootstrap.kit import console
from bootstrap.kit.errors import GroundctlError
from groundctl.common import ENDPOINT_OPT, ENV_ARG, json_opt, split_layers, state_reader, table
from groundctl.state import printable, state_app

RUNBOOK = "runbooks/rehearsal-failed.md"


def age_text(seconds: Optional[float]) -> str:
    """`3d 4h`, `2h 5m`, `4m 10s`, `12s`: the age of a version at a glance. Pure."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            return f"{s // size}{unit} {(s % size) // sub_size}{sub}"
    return f"{s}s"


def layer_cells(layer: dict) -> list[str]:
    """One table row of a rehearsed layer. Pure."""
    version = layer.get("version") or {}
    decrypt, preview = layer.get("decrypt") or {}, layer.get("preview") or {}
    named = "-"
    if version:
        serial = version.get("serial")
        named = (f"serial {serial}" if serial is not None else "unledgered") + \
            f" ({(version.get('version_id') or '-')[:8]})"
    seconds = sum((layer.get("seconds") or {}).values())
    return [layer["layer"], layer["outcome"], named, age_text(layer.get("age_seconds")),
            age_text(layer.get("rpo_seconds")),
            decrypt.get("kind") or decrypt.get("result") or "-",
            preview.get("summary") or preview.get("result") or "-", f"{seconds:.1f}"]


def _render(record: dict) -> None:
    rows = table(f"restore rehearsal of {record['environment']}", "layer", "outcome", "version", "age", "RPO now",
                 "decrypt", "preview", "seconds")
    for layer in record["layers"]:
        rows.add_row(*(Text(printable(c)) for c in layer_cells(layer)))
    console.data(rows)
    for layer in record["layers"]:
        why = layer.get("reason") or layer.get("skipped_reason")
        if layer["outcome"] in ("failed", "drift", "skipped") and why:
            say = console.info if layer["outcome"] == "skipped" else console.warn
            say(f"{layer['layer']}: {why}")
        if layer["outcome"] == "drift":
            changes = (layer.get("preview") or {}).get("changes") or []
            console.warn(f"{layer['layer']}: restorable, but the cloud differs from it: " + "; ".join(
                f"{c['operation']} {c['urn'].rsplit('::', 1)[-1]} ({', '.join(c.get('diff_keys') or []) or '-'})"
                for c in changes[:10]))
        for other in layer.get("others") or []:
            console.info(f"{layer['layer']}: also rehearsed {other['version']['label']}: {other['outcome']}"
                         + (f" ({other['reason']})" if other.get("reason") else ""))
        for passed in layer.get("not_rehearsed") or []:
            console.info(f"{layer['layer']}: not rehearsed: {passed['label']}: {passed['reason']}")
    verdict = {"proven": "every rehearsed layer can be restored now and matches the cloud",
               "drift": "restorable, but the cloud differs from the restored state (see above)",
               "failed": f"a layer cannot be proven restorable: see above and {RUNBOOK}",
               "skipped": "no layer could be rehearsed"}[record["outcome"]]
    console.info(f"rehearsal {record['outcome']}: {verdict}")


def exit_code(record: dict) -> int:
    return {"proven": 0, "drift": 1, "failed": 1, "skipped": 5}[record["outcome"]]


@state_app.command("rehearse")
def rehearse(
    environment: str = ENV_ARG,
    layers: Optional[list[str]] = typer.Option(None, "--layers", help="Only these layers (the layers they read are "
                                               "restored too)."),
    newest: int = typer.Option(0, "--newest", min=0, max=20, help="Also rehearse the N newest versions of each "
                               "stack object, beside the one a recovery would choose."),
    record: bool = typer.Option(False, "--record", help="Keep the result in the state bucket under "
                                ".groundctl/rehearsals/<env>/ (what scheduled runs do)."),
    json_out: bool = json_opt("the rehearsal record"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Restore each layer's state, as a recovery would choose it today, into a scratch backend; decrypt it with
    its own secrets provider and preview it against the cloud. Writes nothing but its record (--record)."""
    from groundctl.cli import installed_version
    from groundctl.status import record_failure, require_flux_secrets
    from recovery.evidence.rehearsal_record import rehearsal_record, save_rehearsal_record
    from recovery.rehearsal.scope import plan_scope
    from recovery.rehearsal.services import rehearse_target

    with state_reader(environment, endpoint_url) as target:
        scope = plan_scope(split_layers(layers), emulated=target.emulated)
        require_flux_secrets(target.spec, scope)
        try:
            doc, secrets = rehearse_target(target, scope, newest=newest, groundctl_version=installed_version(),
                                           report=console.step)
        except GroundctlError as exc:
            if record:  # a scheduled rehearsal that could not run is seen as failed, with its reason
                now = time.time()
                failed = rehearsal_record(target.name, [], started=now, finished=now, reason=exc.message,
                                          groundctl_version=installed_version(), pulumi_version=None)
                record_failure(target, failed, save_rehearsal_record, "rehearsal", "Rehearsal record")
            raise
        code = exit_code(doc)
        if record:
            try:
                key = save_rehearsal_record(target.store, doc, secrets())
                console.info(f"Rehearsal record: {key} in the state bucket")
            except Exception as exc:  # noqa: BLE001 - the rehearsal's result is still printed below
                console.warn(f"the rehearsal could not be recorded in the state bucket "
                             f"({getattr(exc, 'message', None) or type(exc).__name__}); its result follows")
                code = 4
    if json_out:
        console.emit_json(doc)
    else:
        _render(doc)
    raise typer.Exit(code)
