"""`groundctl up <env>` and `groundctl destroy <env>`: read the flags, run the orchestrator, report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.text import Text

from bootstrap.kit import console
from groundctl.cli import app
from groundctl.common import ENDPOINT_OPT, ENV_ARG, announce_emulator, json_opt, split_layers, table

_LAYERS = typer.Option(None, "--layers",
                       help="Only these layers (repeat, or comma-separated); order is always the layer order.")
_JSON = json_opt("the run record")

if TYPE_CHECKING:
    from bootstrap.apply.runner import RunOutcome


def report(outcome: "RunOutcome", json_out: bool) -> None:
    record = outcome.record
    if json_out:
        console.emit_json(record.to_dict())
    else:
        rows = table(f"{record.command} {record.environment} — run {record.run_id}: {record.outcome}",
                     "layer", "attempted", "achieved", "serial", "detail")
        for lay in record.layers:
            # Text, not markup: a message holding "[redacted]" or a resource name must show as written.
            rows.add_row(*(Text(v) for v in (lay.layer, lay.attempted, lay.achieved,
                                              "" if lay.serial is None else str(lay.serial), lay.message)))
        console.data(rows)
        where = f".groundctl/runs/{record.environment}/{record.run_id}.json"
        stopped = f" (stopped at {record.stopped_at})" if record.stopped_at else ""
        console.info(f"Run record: {where} in the state bucket{stopped}" if outcome.stored else
                     f"The run record was not stored: the run stopped before the state bucket was ready{stopped}.")
    if outcome.error is not None:
        raise outcome.error


@app.command("up")
def up(
    environment: str = ENV_ARG,
    layers: Optional[list[str]] = _LAYERS,
    yes: bool = typer.Option(False, "--yes", help="Approve plans without destructive changes."),
    allow_destroy: bool = typer.Option(False, "--allow-destroy", help="Also approve deletes and replacements."),
    plan_dir: Optional[Path] = typer.Option(None, "--plan-dir",
                                            help="Apply only what the reviewed plan files here say."),
    json_out: bool = _JSON,
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Create or update an environment, layer by layer: preview, gate, apply, check, record."""
    from bootstrap.apply.layer_up import UpOptions
    from bootstrap.apply.runner import run
    from bootstrap.apply.services import default_services
    from bootstrap.apply.steps import build_up
    from bootstrap.target import open_target

    with open_target(environment, endpoint_url=endpoint_url, on_emulator=announce_emulator) as target:
        steps = build_up(target.spec, split_layers(layers), emulated=target.emulated, reviewed=plan_dir is not None)
        outcome = run(target, steps, default_services(),
                      UpOptions(yes=yes, allow_destroy=allow_destroy, plan_dir=plan_dir))
    report(outcome, json_out)


@app.command("destroy")
def destroy(
    environment: str = ENV_ARG,
    layers: Optional[list[str]] = _LAYERS,
    yes: bool = typer.Option(False, "--yes", help="Do not ask before destroying."),
    i_mean_production: bool = typer.Option(False, "--i-mean-production",
                                           help="Needed to destroy a production environment."),
    include_backend: bool = typer.Option(False, "--include-backend", help="Also destroy the state backend layer."),
    json_out: bool = _JSON,
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Destroy an environment's layers in reverse order (never the backend unless --include-backend)."""
    from bootstrap.apply.layer_up import UpOptions
    from bootstrap.apply.runner import run
    from bootstrap.apply.services import default_services
    from bootstrap.apply.steps import build_destroy
    from bootstrap.target import open_target

    with open_target(environment, endpoint_url=endpoint_url, on_emulator=announce_emulator) as target:
        steps = build_destroy(target.spec, split_layers(layers), emulated=target.emulated,
                              include_backend=include_backend, i_mean_production=i_mean_production)
        outcome = run(target, steps, default_services(), UpOptions(yes=yes))
    report(outcome, json_out)
