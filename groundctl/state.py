"""`groundctl state …`: read and judge Pulumi state, on disk or in the state bucket.

This module owns the `state` group (`state_app`) and the commands `inspect` and `versions`. Other
command modules add theirs to the same group by importing `state_app`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer
from rich.text import Text

from bootstrap.kit import console
from groundctl.common import ENDPOINT_OPT, ENV_ARG, Group, json_opt, state_reader

if TYPE_CHECKING:
    from recovery.state.state_model import Finding, StateDoc
    from recovery.choice.versions import CandidateSet

# The recovery modules (and botocore) are imported by the commands that run, not to print --help.
# Added to the app by groundctl.cli; this module does not import the app, so the group's other command
# modules (state_import, state_verify) can import it in any order.
state_app = typer.Typer(cls=Group, help="Read, check and list Pulumi state.", no_args_is_help=True)


def printable(value: object) -> str:
    """User data made safe for a terminal: no control characters, no unencodable surrogates."""
    s = str(value)
    s = "".join(ch if ch.isprintable() or ch == " " else f"\\x{ord(ch):02x}" if ord(ch) < 256 else
                f"\\u{ord(ch):04x}" for ch in s)
    return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _t(value: object) -> Text:
    return Text(printable(value))


# -- inspect ---------------------------------------------------------------------------------------


def inspect_report(path: str, doc: StateDoc, findings: tuple[Finding, ...]) -> dict:
    """Everything `state inspect` says about one file, as plain data (the JSON output)."""
    return {
        "file": path,
        "kind": doc.kind,
        "version": doc.version,
        "stack": doc.stack,
        "compression": doc.compression,
        "size": doc.size,
        "sha256": doc.sha256,
        "secrets_provider": doc.secrets_provider,
        "pulumi_version": doc.manifest.version if doc.manifest else None,
        "lineage": doc.lineage,
        "integral": not findings,
        "findings": [f.to_dict() for f in findings],
        "pending_operations": [p.to_dict() for p in doc.pending_operations],
        "resources": len(doc.resources),
        "resources_by_type": doc.counts_by_type(),
    }


def _render_inspect(report: dict) -> None:
    from rich.table import Table

    head = (f"{printable(report['file'])}: Pulumi {report['kind']} (schema version {report['version']}"
            f"{', ' + report['compression'] if report['compression'] != 'none' else ''}), "
            f"{report['resources']} resources")
    if report["stack"]:
        head += f", stack {printable(report['stack'])}"
    console.data(head)
    console.data(f"sha256 {report['sha256']}  lineage {printable(report['lineage'] or '(none recorded)')}")
    if report["resources_by_type"]:
        table = Table("type", "count", title="Resources by type", title_justify="left")
        for type_, n in report["resources_by_type"].items():
            table.add_row(_t(type_ or "(no type)"), str(n))
        console.data(table)
    if report["pending_operations"]:
        table = Table("operation", "resource", "what it means for recovery", title="Pending operations",
                      title_justify="left")
        for p in report["pending_operations"]:
            table.add_row(_t(p["type"]), _t(p["urn"] or "(no URN)"), _t(p["meaning"]))
        console.data(table)
    if report["integral"]:
        console.data("Integrity: OK (Pulumi's integrity rules all hold).")
        return
    # Each message names its resource, so the URN is not repeated in a column of its own.
    table = Table("code", "problem", title=f"Integrity: {len(report['findings'])} problem(s)", title_justify="left")
    for f in report["findings"]:
        table.add_row(_t(f["code"]), _t(f["message"]))
    console.data(table)


@state_app.command("inspect")
def inspect(
    file: str = typer.Argument(..., help="A state file: a checkpoint (.json, .json.gz, .json.zst) or an export."),
    stack: Optional[str] = typer.Option(None, "--stack", help="The stack the file must belong to, e.g. organization/network/dev."),
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Integrity findings, pending operations and resource counts of a state file.

    Exit 0 when integral, 1 when Pulumi's integrity rules fail, 2 when the file is not a Pulumi state.
    """
    from recovery.lineage.integrity import verify_integrity
    from recovery.state.state_parse import read_state_file

    doc = read_state_file(file)
    findings = verify_integrity(doc, stack)
    report = inspect_report(file, doc, findings)
    if json_out:
        console.emit_json(report)
    else:
        _render_inspect(report)
    if findings:
        raise typer.Exit(1)


# -- versions --------------------------------------------------------------------------------------


def versions_rows(cset: CandidateSet, placements: Optional[dict] = None) -> list[dict]:
    """The rows of the candidate table, newest first, delete markers in their place (pure).

    `placements` ((key, version_id) -> recovery.lineage.placement.Placement) puts each evaluated candidate on the
    ledger: its serial when the ledger records its content, else "-" with where it sits ("after 2")."""
    placements = placements or {}
    rows: list[dict] = []
    for when, kind, item in cset.timeline():
        if kind == "delete-marker":
            rows.append({"time": when.isoformat(), "source": "delete-marker", "key": item.key,
                         "version_id": item.version_id, "size": None, "verdict": "deleted",
                         "resources": None, "pending": None, "lineage": None, "serial": "-",
                         "is_latest": item.is_latest})
            continue
        row = item.to_dict()
        row["time"] = row.pop("last_modified")
        row["verdict"] = row["verdict"] or "not evaluated"
        row["pending"] = row.pop("pending_operations")
        placed = placements.get((item.key, item.version_id))
        row["serial"] = placed.serial if placed is not None and placed.serial is not None else "-"
        row["placement"] = {"status": placed.status, "after_serial": placed.after_serial,
                            "before_serial": placed.before_serial, "sentence": placed.sentence} if placed else None
        rows.append(row)
    return rows


def _render_versions(cset: CandidateSet, rows: list[dict]) -> None:
    from rich import box
    from rich.table import Table

    table = Table(title=f"State candidates for {printable(cset.project)}/{printable(cset.stack)}, newest first",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  caption="* the newest version of its key", caption_justify="left")
    # The file name goes last and may fold: the other columns are short and must stay readable.
    for name in ("time (UTC)", "source", "version", "bytes", "verdict", "res", "pending", "lineage", "serial", "file"):
        table.add_column(name, no_wrap=name not in ("file", "pending"), overflow="fold")
    for r in rows:
        pending = ",".join(r["pending"]) if r["pending"] else ("" if r["pending"] is None else "none")
        table.add_row(
            r["time"][:19].replace("T", " "), r["source"] + ("*" if r["is_latest"] and r["source"] != "current" else ""),
            _t((r["version_id"] or "-")[:8]), "" if r["size"] is None else str(r["size"]), r["verdict"],
            "" if r["resources"] is None else str(r["resources"]), _t(pending),
            _t((r["lineage"] or "-")[:8]), _t(r["serial"]), _t(r["key"].rsplit("/", 1)[-1]),
        )
    console.data(table)
    if cset.current_deleted:
        console.warn("The stack's current state object is deleted (its newest version is a delete marker).")
    if not rows:
        console.warn(f"No state, history or backup objects were found for {cset.project}/{cset.stack}.")


@state_app.command("versions")
def versions(
    environment: str = ENV_ARG,
    layer: str = typer.Argument(..., help="Layer (Pulumi project): backend, network, cluster or flux."),
    json_out: bool = json_opt("the candidates"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
    limit: Optional[int] = typer.Option(None, "--limit", min=0, help="Evaluate only the newest N candidates (the rest are listed)."),
) -> None:
    """Every stored copy of a stack's state (versions, .bak, history, backups) with its verdict."""
    import botocore.exceptions

    from bootstrap.aws.clients import error_code
    from bootstrap.kit.errors import CloudError
    from bootstrap.layers import layer as layer_named
    from bootstrap.records.ledger import read_ledger
    from recovery.lineage.placement import place_candidates
    from recovery.choice.evaluator import SCAN_PREFETCH, CandidateEvaluator
    from recovery.choice.versions import list_candidates

    lay = layer_named(layer)
    with state_reader(environment, endpoint_url) as target:
        try:
            cset = list_candidates(target.store, lay.project, target.name)
            evaluator = CandidateEvaluator(target.store, expected_stack=f"organization/{lay.project}/{target.name}")
            wanted = cset.candidates if limit is None else cset.candidates[:limit]
            cset = cset.with_evaluations(evaluator.newest_first(wanted, prefetch=SCAN_PREFETCH))
            records = read_ledger(target.store, lay.project, target.name).records
        except botocore.exceptions.ClientError as exc:
            raise CloudError(f"Listing the state of {lay.project}/{target.name} failed ({error_code(exc)}). Check "
                             "the credentials' S3 permissions on the state bucket and re-run.") from None
    # Only evaluated candidates have a sha256 to match; the others would be placed by time alone.
    placed = place_candidates(records, [c for c in cset.candidates if getattr(c, "sha256", None)])
    rows = versions_rows(cset, {(p.key, p.version_id): p for p in placed})
    if json_out:
        console.emit_json({"project": cset.project, "stack": cset.stack, "current_deleted": cset.current_deleted,
                           "downloads": evaluator.downloads, "candidates": rows})
    else:
        _render_versions(cset, rows)
