"""`groundctl state verify <env> <layer>`: is the current state integral, of the stack's lineage, and
the head of an intact ledger? Exit 0 when all hold, 1 on any problem (each named with what to do), 5
when nothing is wrong with the state but the stack has no ledger to check its lineage and serial with."""

from __future__ import annotations

from typing import Optional

import typer

from bootstrap.kit import console
from groundctl.common import ENDPOINT_OPT, ENV_ARG, json_opt, state_reader
from groundctl.state import printable, state_app

# docs/exit-codes.md: a check that could not reach a verdict because what it needs is missing.
UNVERIFIED_EXIT = 5


@state_app.command("verify")
def verify(
    environment: str = ENV_ARG,
    layer: str = typer.Argument(..., help="Layer (Pulumi project): backend, network, cluster or flux."),
    json_out: bool = json_opt("the verdict"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Integrity, lineage and ledger chain of a stack's current state. Exit 1 on any problem, 5 without a ledger."""
    from rich.table import Table

    from bootstrap.layers import layer as layer_named
    from recovery.lineage.verify import verify_report

    lay = layer_named(layer)
    with state_reader(environment, endpoint_url) as target:
        name, report = target.name, verify_report(target.store, lay.project, target.name)
    if json_out:
        console.emit_json(report)
    else:
        cur = report["current"] or {}
        led = report["ledger"]
        current = (f"current {printable(cur['key'])} version {printable(cur.get('version_id') or '-')}, serial "
                   f"{cur.get('serial', '-')}" if cur else "no current state object")
        head = f"ledger head serial {led['head_serial']}" if led["head_serial"] is not None else "no ledger record"
        console.data(f"{lay.project}/{name}: {current}, {head}, lineage {printable(led['lineage'] or '-')}")
        if report["problems"]:
            table = Table("problem", "what it means", title=f"{len(report['problems'])} problem(s)", title_justify="left")
            for p in report["problems"]:
                table.add_row(p["code"], printable(p["message"]))
            console.data(table)
        elif report["verdict"] == "unverified":
            console.data(f"UNVERIFIED: the state is readable and integral, but {printable(report['unverified_reason'])}.")
        else:
            console.data("OK: integral, of the ledger's lineage, and the head of an intact ledger.")
        for w in report["warnings"]:
            console.warn(w)
    if report["verdict"] == "unverified":
        raise typer.Exit(UNVERIFIED_EXIT)
    if not report["ok"]:
        raise typer.Exit(1)
