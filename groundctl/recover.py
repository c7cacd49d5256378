"""`groundctl recover <env> <layer>`: the guided state recovery. Reads flags, runs the guide, reports.

Exit codes: 0 complete (or a dry run, or nothing to do), 3 refused or declined (nothing written from that
phase on), 1 not complete (a phase failed, or the verification plan shows changes), 2 bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from bootstrap.kit import console
from groundctl.cli import app
from groundctl.common import ENDPOINT_OPT, ENV_ARG, announce_emulator, json_opt, writable_dir
from bootstrap.kit.errors import BadInput, EngineError, GroundctlError, Refused
from bootstrap.layers import layer as layer_named

_STATUS = {"achieved": "ok", "skipped": "skipped", "refused": "REFUSED", "failed": "FAILED",
           "not-attempted": "not attempted"}


def _show(cond) -> None:
    console.step(f"{cond.phase}: {_STATUS.get(cond.status, cond.status)} ({cond.reason})")
    console.info(f"  {cond.message}")
    if cond.next_step and cond.status != "achieved":
        console.info(f"  next: {cond.next_step}")


def write_reports(out: Path, transcript: dict, secrets: list[str]) -> tuple[Path, Path]:
    from bootstrap.destinations import write_files
    from recovery.restoring.report import render_markdown, transcript_json

    stem = f"recover-{transcript['environment']}-{transcript['layer']}-{transcript['run_id']}"
    js, md = write_files(out, {f"{stem}.json": transcript_json(transcript, secrets),
                               f"{stem}.md": render_markdown(transcript, secrets)})
    return js, md


def state_may_have_changed(transcript: dict) -> bool:
    """Whether a phase that writes the state was attempted: from then on the outcome is what must be told."""
    from recovery.guide.flow import WRITES

    return any(p.get("attempted") and p.get("phase") in WRITES for p in transcript.get("phases") or ())


def engine_ready(target, layer: str, chosen=None) -> None:
    """What the phases after the restore need, checked before it: the account of the credentials in use, the
    Pulumi CLI and its version, the engine's settings (the passphrase) and the provider plugins: the layer
    program's, and the versions the `chosen` state (its providers) binds them to, which its refresh runs."""
    from bootstrap.aws.backend import check_account
    from bootstrap.engine.preflight import require_engine

    try:
        check_account(target.spec, target.clients)
        target.engine_check()
        require_engine(target.engine, [layer], operation="recover", states=lambda _layer: chosen)
    except GroundctlError as exc:
        message = (f"Nothing was restored or written: the phases after the restore (reconcile, import, pending "
                   f"creates, verify) could not run here. {exc.message}")
        for kind in (Refused, BadInput, EngineError):
            if isinstance(exc, kind):
                raise kind(message) from None
        raise GroundctlError(message) from None


def _flux_ready(target):
    """Flux's readiness, checked once a recovered flux layer's plan is clean (as `up` ends with it)."""
    def check():
        from bootstrap.flux.check import flux_readiness
        from bootstrap.kube.api import client_for

        return flux_readiness(target.spec, target.engine, kube_for=client_for, secrets=target.extra_secrets)
    return check


def secrets_provider(target) -> Optional[str]:
    """The secrets provider the engine holds this environment's states to; None from an engine that does not
    say (a test's in-memory one)."""
    return getattr(getattr(target.engine, "settings", None), "secrets_provider", None)


@app.command("recover")
def recover(
    environment: str = ENV_ARG,
    layer: str = typer.Argument(..., help="Layer whose state to recover: backend, network, cluster or flux."),
    yes: bool = typer.Option(False, "--yes", help="Unattended: do not ask before writing (refusals still refuse)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Assess, choose and plan the import; write nothing."),
    json_out: bool = json_opt("the transcript"),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory for the JSON transcript and Markdown report."),
    allow_rollback: bool = typer.Option(False, "--allow-rollback", help="Allow restoring a state older than the ledger head."),
    allow_foreign_lineage: bool = typer.Option(False, "--allow-foreign-lineage", help="Allow restoring a state of another lineage."),
    allow_damaged: bool = typer.Option(False, "--allow-damaged", help="Allow restoring a state that fails integrity checks."),
    allow_foreign_stack: bool = typer.Option(
        False, "--allow-foreign-stack",
        help="Allow restoring a state whose resources' URNs name another stack or project."),
    allow_tampered_ledger: bool = typer.Option(
        False, "--allow-tampered-ledger",
        help="Go on when S3's own history contradicts the ledger (a rewritten or forged record): the ledger is set "
             "aside and the choice rests on integrity and S3's time order."),
    allow_clear_unchecked_creates: bool = typer.Option(
        False, "--allow-clear-unchecked-creates",
        help="Drop pending creates whose resource type inventory cannot see: only once you have checked by hand "
             "that the interrupted creates made nothing (a live resource they made would no longer be tracked)."),
    endpoint_url: Optional[str] = ENDPOINT_OPT,
) -> None:
    """Walk a stack back from a lost or damaged state: assess, choose, restore, import, resolve pending creates,
    verify."""
    from bootstrap.records.lock_status import lock_status
    from bootstrap.records.locks import EnvironmentLock
    from bootstrap.target import open_target
    from recovery.choice.choose import Flags
    from recovery.guide.flow import run_guide
    from recovery.guide.model import GuideOptions, GuideServices
    from recovery.survivors.inventory import collect
    from recovery.restoring.report import redact

    lay = layer_named(layer)
    writable_dir(out)  # before the recovery: finding out after a restore would hide its outcome
    flags = Flags(allow_rollback=allow_rollback, allow_foreign_lineage=allow_foreign_lineage,
                  allow_damaged=allow_damaged, allow_tampered_ledger=allow_tampered_ledger,
                  allow_foreign_stack=allow_foreign_stack)
    with open_target(environment, endpoint_url=endpoint_url, on_emulator=announce_emulator) as target:
        opts = GuideOptions(target.name, lay.name, yes=yes, dry_run=dry_run, flags=flags,
                            clear_unchecked_creates=allow_clear_unchecked_creates)
        svc = GuideServices(
            store=target.store, engine=lambda: target.engine,
            inventory=lambda env, name: collect(target.clients, env, name),
            lock_factory=lambda store, env, run_id: EnvironmentLock(store, env, run_id),
            confirm=console.confirm, lock_status=lock_status,
            ready=lambda chosen: engine_ready(target, lay.name, chosen),
            flux_ready=_flux_ready(target) if lay.name == "flux" and not target.emulated else None,
            secrets_provider=lambda: secrets_provider(target))
        console.info(f"Recovering {lay.name}/{target.name} (run {opts.run_id})"
                     + (" — dry run, nothing will be written" if dry_run else ""))
        transcript = run_guide(opts, svc, on_condition=_show)
        secrets = target.secret_values()
    data = transcript.to_dict()
    if out is not None:
        try:
            js, md = write_reports(out, data, secrets)
            console.info(f"Transcript: {js}\nReport: {md}")
        except BadInput as exc:
            if not state_may_have_changed(data):
                raise
            # The state was (or may have been) changed: the outcome and its exit code are the answer, and the
            # transcript still reaches stdout below; losing the files is a warning, not "bad input".
            console.warn(f"{exc.message} The recovery itself ran: its outcome is "
                         + ("the JSON on stdout and the exit code." if json_out else "below, with its exit code."))
    if json_out:
        console.emit_json(redact(data, secrets))
    else:
        console.data(f"Recovery of {lay.name}/{target.name}: {transcript.outcome}")
    raise typer.Exit(transcript.exit_code)
