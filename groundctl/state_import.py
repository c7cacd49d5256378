"""`groundctl state import-plan <file>`: re-adopt what an old state file describes into a fresh stack.

For the day the state bucket is gone but a backup, a download or an export survived: the file names
every resource with its logical name, parent and provider, and the resources themselves still exist.
This writes the `pulumi import --file` plan that brings them all back under the same names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from bootstrap.kit import console
from groundctl.state import printable, state_app
from bootstrap.kit.errors import BadInput, StateUnusable

if TYPE_CHECKING:
    from recovery.survivors.import_plan import ImportPlan


def raw_resources(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The file's resources as plain dicts (with inputs, which `StateDoc` does not keep), and its stack.

    The file is parsed first: it turns every unreadable or foreign file into a `BadInput`
    with a plain message, so the navigation below only ever sees a real checkpoint or export.
    """
    from recovery.state.state_bytes import decompress, load_json, read_state_bytes
    from recovery.state.state_parse import parse_state

    raw = read_state_bytes(path)
    doc = parse_state(raw, str(path))
    data, _ = decompress(raw, str(path))
    obj = load_json(data, str(path))
    if "deployment" in obj:
        deployment = obj["deployment"]
    else:
        checkpoint = obj.get("checkpoint", obj)
        deployment = (checkpoint or {}).get("latest") or {}
    resources = deployment.get("resources") if isinstance(deployment, dict) else None
    return [r for r in resources or [] if isinstance(r, dict)], doc.stack


def plan_report(path: Path, out: Path, plan: ImportPlan, stack: str | None) -> dict[str, Any]:
    return {"file": str(path), "stack": stack, "out": str(out), "plan": plan.to_pulumi_json(), **plan.summary()}


@state_app.command("import-plan")
def import_plan(
    file: Path = typer.Argument(..., help="A state file: a checkpoint (.json, .gz, .zst) or a `pulumi stack export`."),
    out: Path = typer.Option(Path("import.json"), "--out", help="Where to write the `pulumi import --file` plan."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it already exists."),
    json_out: bool = typer.Option(False, "--json", help="Print the plan and what was left out as JSON."),
) -> None:
    """Write the import plan that re-adopts every custom resource of FILE with its original names.

    Exit 0 when every custom resource is in the plan, 1 when some had to be left out (each with its
    reason), 2 when FILE is not a Pulumi state.
    """
    from bootstrap.destinations import check_file, write_text

    if out.exists() and not force:
        raise BadInput(f"{out} already exists. Choose another path with --out, or pass --force to replace it.")
    check_file(out)  # before the state is read: a destination that cannot be written wastes that work
    resources, stack = raw_resources(file)
    from recovery.survivors.import_plan import plan_from_state

    plan = plan_from_state(resources)
    write_text(out, json.dumps(plan.to_pulumi_json(), indent=4, ensure_ascii=False) + "\n")

    if json_out:
        console.emit_json(plan_report(file, out, plan, stack))
    else:
        console.step(f"Import plan for {printable(file)}" + (f" (stack {printable(stack)})" if stack else ""))
        console.info(f"{plan.custom_count} resource(s) to import, {len(plan.resources) - plan.custom_count} "
                     f"component(s) recreated, {len(plan.name_table)} reference(s) in the name table.")
        for skipped in plan.skipped:
            console.warn(f"left out {printable(skipped.urn)}: {printable(skipped.reason)}")
        for note in plan.notes:
            console.info(f"note: {printable(note)}")
        console.info(f"Wrote {printable(out)}. Next, in a fresh stack of the same project and name, run "
                     f"`pulumi import --file {printable(out)}`, then `pulumi preview --refresh` to check.")
    if plan.skipped:
        raise StateUnusable(
            f"{len(plan.skipped)} resource(s) of {file} could not be put in the plan (listed above with the "
            f"reason). The plan in {out} holds the rest; add the missing ones by hand before importing."
        )
