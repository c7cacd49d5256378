"""`groundctl state verify <env> <layer>`: is the current state integral, of the stack's lineage, and
the head of an intact ledger? Exit 0 when all hold, 1 on any problem (each named with what to do)."""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from bootstrap import console
from bootstrap.cli.state import open_state_store, printable, state_app
from bootstrap.layers import layer as layer_named
from bootstrap.spec import load_spec
from recovery.verify import verify_report


@state_app.command("verify")
def verify(
    environment: str = typer.Argument(..., help="Environment name (environments/<name>.yaml) or a spec path."),
    layer: str = typer.Argument(..., help="Layer (Pulumi project): backend, network, cluster or flux."),
    json_out: bool = typer.Option(False, "--json", help="Print the verdict as JSON."),
    endpoint_url: Optional[str] = typer.Option(None, "--endpoint-url", help="AWS endpoint (an emulator)."),
) -> None:
    """Integrity, lineage and ledger chain of a stack's current state. Exit 1 on any problem."""
    spec = load_spec(environment)
    lay = layer_named(layer)
    report = verify_report(open_state_store(spec, endpoint_url), lay.project, spec.name)
    if json_out:
        console.emit_json(report)
    else:
        cur = report["current"] or {}
        console.data(f"{lay.project}/{spec.name}: current {printable(cur.get('key', '(none)'))} version "
                     f"{printable(cur.get('version_id', '-'))}, serial {cur.get('serial', '-')}, ledger head "
                     f"{report['ledger']['head_serial']}, lineage {printable(report['ledger']['lineage'] or '-')}")
        if report["problems"]:
            table = Table("problem", "what it means", title=f"{len(report['problems'])} problem(s)", title_justify="left")
            for p in report["problems"]:
                table.add_row(p["code"], printable(p["message"]))
            console.data(table)
        else:
            console.data("OK: integral, of the ledger's lineage, and the head of an intact ledger.")
        for w in report["warnings"]:
            console.warn(w)
    if not report["ok"]:
        raise typer.Exit(1)
