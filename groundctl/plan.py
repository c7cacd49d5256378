"""`groundctl plan <env> [--offline]`: what each layer would declare or change, written for review.

`--offline` runs the layer programs under Pulumi's mock runtime and checks posture: no engine, no
cloud, no credentials (bootstrap/planning/offline.py). Without it, the live plan previews through the engine;
that path lives in `bootstrap.apply.preview.plan_live`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bootstrap.kit import console
from groundctl.cli import app
from groundctl.common import ENV_ARG, json_opt, split_layers, writable_dir
from bootstrap.kit.errors import BadInput

DEFAULT_OUT = Path(".groundctl/plans")


@app.command("plan")
def plan(
    environment: str = ENV_ARG,
    offline: bool = typer.Option(False, "--offline", help="Mock runtime and posture checks; no cloud access."),
    out: Path = typer.Option(DEFAULT_OUT, "--out", help="Directory for the plan files (Markdown and JSON)."),
    json_out: bool = json_opt("the plan (instead of tables)"),
    layers: Optional[list[str]] = typer.Option(
        None, "--layers", help="Live plan only: these layers (repeat, or comma-separated)."),
    endpoint_url: Optional[str] = typer.Option(
        None, "--endpoint-url", help="Live plan only: AWS endpoint (an emulator) for a non-production environment."),
) -> None:
    """Plan every layer; --offline checks posture without any cloud credentials (exit 1 on a failed rule)."""
    raise typer.Exit(dispatch(environment, offline=offline, out=out, json_out=json_out, layers=split_layers(layers),
                              endpoint_url=endpoint_url))


def dispatch(environment: str, *, offline: bool, out: Path, json_out: bool,
             layers: Optional[list[str]] = None, endpoint_url: Optional[str] = None) -> int:
    """The exit code of `groundctl plan`: the offline path here, the live one in the orchestrator."""
    writable_dir(out)  # the plan runs first and writes last: a file in the way must stop it up front
    if offline:
        if layers or endpoint_url:
            raise BadInput(
                "--layers and --endpoint-url apply to the live plan only: an offline plan runs every layer (each "
                "needs the outputs of the ones before) and talks to no endpoint. Drop them, or drop --offline."
            )
        return plan_offline(environment, out=out, json_out=json_out)
    # Imported here: the offline path must not pay for the engine's imports.
    from bootstrap.apply.preview import plan_live

    return plan_live(environment, out_dir=out, json_out=json_out, endpoint_url=endpoint_url, layers=layers)


def plan_offline(environment: str, *, out: Path, json_out: bool) -> int:
    from bootstrap.planning import offline_render
    from bootstrap.planning.offline import run_offline

    from bootstrap.spec import load_spec

    spec = load_spec(environment)
    with console.progress(f"{spec.name}: offline plan") as tick:
        result = run_offline(spec, on_layer=tick)
    doc = offline_render.document(result)
    written = _write(out, offline_render.files(doc))
    if json_out:
        console.emit_json(doc)
    else:
        for table in offline_render.tables(doc):
            console.data(table)
    console.info(f"{offline_render.summary(doc)} ({result.seconds:.1f} s)")
    console.info(f"Wrote {', '.join(str(p) for p in written)}")
    if result.failed_rules:
        console.error(
            f"{spec.name}: posture rule{'s' if len(result.failed_rules) != 1 else ''} failed: "
            f"{', '.join(result.failed_rules)}. See the failing findings above or in the plan files, fix the "
            "spec or the layer program, and plan again."
        )
    return result.exit_code


def _write(out: Path, files: dict[str, str]) -> list[Path]:
    from bootstrap.destinations import write_files

    return write_files(out, files)
