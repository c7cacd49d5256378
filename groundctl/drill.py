"""`groundctl drill …`: rehearse a recovery, time it against the RTO, report it; and list past drills."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from bootstrap.kit import console
from groundctl.cli import app
from groundctl.common import (Group, ENDPOINT_OPT, ENV_ARG, announce_emulator, json_opt, state_reader, table,
                                 writable_dir)

if TYPE_CHECKING:  # the drills' modules load only when a drill command runs
    from recovery.drills.report import DrillReport

drill_app = typer.Typer(cls=Group, help="Rehearse recoveries, time them against the RTO, and keep their reports.",
                        no_args_is_help=True)
app.add_typer(drill_app, name="drill")

_DRY = typer.Option(False, "--dry-run", help="Show the phases and plans; change nothing.")
_YES = typer.Option(False, "--yes", help="Do not ask before the drill's destructive step.")
_OUT = typer.Option(None, "--out", help="Directory for the Markdown, JSON and SVG report (default: .groundctl/drills/<env>; "
                    "a dry run writes files only when given).")


def _context(target, clock=time.time):
    from recovery.drills.report import write_report

    from bootstrap.kube.api import client_for
    from bootstrap.records.lock_status import lock_status
    from bootstrap.records.locks import EnvironmentLock
    from recovery.drills.rebuild_cluster import DrillContext, orchestrated_layers

    def inventory(environment: str, layer: str):
        from recovery.survivors.inventory import collect
        return collect(target.clients, environment, layer)

    def kube_for(kubeconfig: str):
        return client_for(target.spec, kubeconfig)

    ctx = DrillContext(
        spec=target.spec, store=target.store, engine=lambda: target.engine, emulated=target.emulated,
        run_layers=orchestrated_layers(target, clock=clock),
        lock_factory=lambda store, environment, run_id: EnvironmentLock(store, environment, run_id),
        require_bucket=target.require_bucket, kube_for=kube_for, lock_status=lock_status, confirm=console.confirm,
        clock=clock, secrets=set(target.secret_values()), inventory=inventory)

    def checkpoint(report: "DrillReport") -> None:
        # Progress after each phase, so a drill that dies part-way still says where it stopped; only
        # once the preflight passed (before that the bucket may not exist, and nothing was changed).
        pre = report.phase("preflight")
        if pre is None or not pre.achieved:
            return
        try:
            write_report(report, store=target.store, secret_values=ctx.secrets)
        except Exception as exc:  # noqa: BLE001 - losing progress must not stop the drill
            console.warn(f"drill progress could not be stored: {type(exc).__name__}")
    ctx.checkpoint = checkpoint
    return ctx


def _drill(environment: str, endpoint_url: Optional[str], run, out: Optional[Path], json_out: bool,
           dry_run: bool) -> None:
    """Run one drill (`run(ctx) -> DrillReport`) against the environment, then report it."""
    from bootstrap.target import open_target

    writable_dir(out)  # before the drill: finding out afterwards would lose its report files
    with open_target(environment, endpoint_url=endpoint_url, on_emulator=announce_emulator) as target:
        ctx = _context(target)
        _finish(run(ctx), ctx, target.store, out, json_out, dry_run)


def _finish(report: DrillReport, ctx, store, out: Optional[Path], json_out: bool, dry_run: bool) -> None:
    from recovery.drills.report import write_report

    out_dir = out if out is not None else (None if dry_run else Path(".groundctl") / "drills" / report.environment)
    files, key, notes = (), None, []
    try:
        files = write_report(report, out_dir=out_dir, secret_values=ctx.secrets).files
    except OSError as exc:
        notes.append(f"the report files could not be written under {out_dir} ({exc.strerror})")
    if not dry_run:
        # A drill refused at its preflight is stored too (a scheduled run that failed must show as failed),
        # wherever the state bucket exists to hold it.
        pre = report.phase("preflight")
        bucket = True
        if pre is None or not pre.achieved:
            try:
                ctx.require_bucket()
            except Exception:  # noqa: BLE001 - the preflight's own message already says why, once
                bucket = False
                notes.append("the drill record was not stored: the state bucket cannot hold it (see the preflight)")
        if bucket:
            try:
                key = write_report(report, store=store, secret_values=ctx.secrets).bucket_key
            except Exception as exc:  # noqa: BLE001 - the outcome is still shown, and the files hold it
                notes.append(f"the drill record could not be stored in the state bucket "
                             f"({getattr(exc, 'message', None) or type(exc).__name__})")
    if json_out:
        from recovery.drills.report import redact_obj
        doc = redact_obj(report.to_dict(), ctx.secrets)
        doc["written"] = {"bucket_key": key, "files": list(files)}
        console.emit_json(doc)
    else:
        # Phase messages can quote engine output; mask before anything reaches the terminal.
        from recovery.drills.report import redact_report
        _render(redact_report(report, ctx.secrets))
        if key:
            console.info(f"Drill record: {key} in the state bucket")
        for f in files:
            console.info(f"Wrote {f}")
    for note in notes:
        console.warn(note)
    if report.exit_code:
        raise typer.Exit(report.exit_code)


def _render(report: DrillReport) -> None:
    from recovery.drills.report import what_to_look_at

    v = report.verdict
    phases = table(f"drill {report.kind} {report.environment}" + (f" ({report.layer})" if report.layer else "")
                   + f" — {report.drill_id}", "phase", "status", "reason", "seconds", "message")
    for p in report.phases:
        # The stopping phase's whole message is in the verdict line; the table keeps its first sentence.
        message = _first_sentence(p.message) if p.name == v.failed_phase else p.message
        phases.add_row(p.name, p.status, p.reason, "" if p.seconds is None else f"{p.seconds:.1f}", message)
    console.data(phases)
    for plan in report.plans:
        console.info(f"  plan {plan.get('phase')}: {plan.get('summary')}")
    if v.outcome == "dry-run":
        console.info(f"verdict: dry run (the RTO is {v.rto_seconds:.0f} s). {v.message}")
    else:
        took = ("the recovery was not timed" if v.recovery_seconds is None else
                f"the recovery took {v.recovery_seconds:.1f} s of the {v.rto_seconds:.0f} s RTO")
        console.info(f"verdict: {v.outcome} ({v.reason}); {took}. {v.message}")
    if v.outcome not in ("passed", "dry-run"):
        # The first item repeats the stopping phase's message, which the verdict line has just said.
        items = what_to_look_at(report)[1:] if v.failed_phase else what_to_look_at(report)
        for item in items:
            console.warn(item.replace("**", ""))


def _first_sentence(text: str, limit: int = 90) -> str:
    head = text.split(". ", 1)[0].rstrip(".")
    head = head if len(head) <= limit else head[: limit - 1].rstrip() + "…"
    return head + ("" if head == text.rstrip(".") else " (see the verdict)")


@drill_app.command("rebuild-cluster")
def rebuild_cluster(
    environment: str = ENV_ARG,
    dry_run: bool = _DRY,
    yes: bool = _YES,
    i_mean_production: bool = typer.Option(False, "--i-mean-production", help="Needed to drill a production environment."),
    timeout: Optional[int] = typer.Option(None, "--timeout", min=1, help="Minutes to wait for Flux Ready (default: the RTO)."),
    out: Optional[Path] = _OUT,
    json_out: bool = json_opt("the report"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Destroy flux and cluster, recreate them, wait for Flux Ready, check the revisions; time it against the RTO."""
    from recovery.drills.rebuild_cluster import RebuildOptions, run_rebuild

    options = RebuildOptions(dry_run=dry_run, yes=yes, i_mean_production=i_mean_production, timeout_minutes=timeout)
    _drill(environment, endpoint_url, lambda ctx: run_rebuild(ctx, options), out, json_out, dry_run)


@drill_app.command("state-loss")
def state_loss(
    environment: str = ENV_ARG,
    layer: str = typer.Option(..., "--layer", help="The layer whose state is deleted and recovered."),
    dry_run: bool = _DRY,
    yes: bool = _YES,
    out: Optional[Path] = _OUT,
    json_out: bool = json_opt("the report"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Delete a stack's current state (non-production only), recover it unattended, require a clean verification."""
    from bootstrap.layers import layer as layer_named
    from recovery.drills.state_loss import StateLossOptions, run_state_loss

    layer_named(layer)  # a typo is bad input before anything is opened, in a dry run as in a real one

    options = StateLossOptions(layer=layer, dry_run=dry_run, yes=yes)
    _drill(environment, endpoint_url, lambda ctx: run_state_loss(ctx, options), out, json_out, dry_run)


@drill_app.command("history")
def history(
    environment: str = ENV_ARG,
    last: int = typer.Option(5, "--last", min=2, help="How many recent measured drills the trend covers."),
    json_out: bool = json_opt("the report"),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Past drills of an environment with their times and verdicts, and whether recovery gets faster; beside
    them, per layer, the last proven restore of its state (restore rehearsals) and its measured RPO."""
    from recovery.drills.report import load_history, summarize_history
    from recovery.rehearsal.history import rehearsal_history

    with state_reader(environment, endpoint_url) as target:
        records, unreadable = load_history(target.store, target.name)
        restores = rehearsal_history(target.store, target.name, rpo_seconds=target.spec.recovery.rpo_minutes * 60.0)
    unreadable += restores["unreadable"]
    summary = summarize_history(records, last_n=last) | {"environment": environment, "unreadable": unreadable,
                                                         "rehearsals": restores}
    if json_out:
        console.emit_json(summary)
        if unreadable:
            raise typer.Exit(1)  # a record that cannot be read is a problem found
        return
    drills = table(f"drills of {environment}", "drill", "kind", "started", "verdict", "recovery s", "RTO s")
    for row in summary["drills"]:
        verdict = f"{row['verdict']} ({row['reason']})"
        if row["verdict"] in ("failed", "refused") and row.get("failed_phase"):
            verdict += f" at {row['failed_phase']}"
        drills.add_row(str(row["drill_id"]), f"{row['kind']}" + (f" ({row['layer']})" if row["layer"] else ""),
                      str(row["started_at"]), verdict,
                      "—" if row["recovery_seconds"] is None else f"{row['recovery_seconds']:.1f}",
                      "—" if row["rto_seconds"] is None else f"{row['rto_seconds']:.0f}")
    console.data(drills)
    for kind, t in summary["trends"].items():
        times = ", ".join(f"{s:.0f}" for s in t["recovery_seconds"]) or "none"
        console.info(f"{kind}: last {t['last_n']} measured recovery times (s): {times} — {t['trend']}; "
                     f"{t['passed']} passed")
    _show_rehearsals(environment, restores)
    for key in unreadable:
        console.warn(f"{key} is not a readable drill or rehearsal record")
    if not summary["drills"]:
        console.info(f"No drill has been recorded for {environment} yet.")
    if unreadable:
        raise typer.Exit(1)


def _show_rehearsals(environment: str, restores: dict) -> None:
    """Per layer: the last restore rehearsal, the last proven restore and its measured RPO, the seconds."""
    from rich.text import Text

    from groundctl.state import printable
    from groundctl.state_rehearse import age_text

    if not restores["layers"]:
        console.info(f"No restore rehearsal has been recorded for {environment} yet "
                     f"(`groundctl state rehearse {environment} --record`).")
        return
    rows = table(f"restore rehearsals of {environment} (RPO {restores['rpo_seconds'] / 60:.0f} min)", "layer",
                 "last rehearsal", "last proven restore", "measured RPO", "seconds")
    for layer, x in restores["layers"].items():
        last, proven = x["last"], x["last_proven"]
        said = f"{last['outcome']} {age_text(last['age_seconds'])} ago" if last else "never"
        if last and last.get("reason"):
            said += f" ({last['reason']})"
        rows.add_row(Text(printable(layer)), Text(printable(said)),
                     Text(f"{age_text(proven['age_seconds'])} ago" if proven else "never"),
                     Text(age_text(proven["rpo_seconds"]) if proven else "-"),
                     Text("-" if x.get("seconds") is None else f"{x['seconds']:.1f}"))
    console.data(rows)
    if restores["stopped"]:
        console.warn(f"the last rehearsal stopped before any verdict: {printable(str(restores['stopped']['reason']))}")
