"""The runner: executes the steps `bootstrap.apply.steps` builds for `up` and `destroy`, and keeps the run record.

Nothing is written before the engine is known to run (`bootstrap.apply.preflight`). Per layer, `up` runs
the phases in `bootstrap.apply.layer_up` and `destroy` those in `bootstrap.apply.destroy`; the run record is
saved before and after every phase that changes something (`bootstrap.records.runs`). A failure stops at that
layer with the record kept; a re-run resumes cleanly because a layer that is already up to date previews to no
changes and is not applied again. Everything the runner calls that is not the engine comes in through
`Services`, so tests can count, fail or replace any of it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from bootstrap.kit import console
from bootstrap.apply import gate
from bootstrap.apply.destroy import destroy_all
from bootstrap.apply.layer_up import UpOptions, up_layer
from bootstrap.apply.preflight import engine_layers, preflight_phase, run_states, still_locked
from bootstrap.apply.services import Services
from bootstrap.apply.steps import Steps
from bootstrap.aws.clients import error_code
from bootstrap.kit.errors import BadInput, GroundctlError
from bootstrap.kit.interrupts import shielded
from bootstrap.kit.user_files import read_user_file
from bootstrap.planning import render as plan_render
from bootstrap.planning.plan import Plan
from bootstrap.records.runs import RunLog, RunRecord, error_outcome, redact, start_run
from bootstrap.target import Target


# Pulumi's saved plan of one layer: its resources' inputs, a few MiB for the largest layer.
MAX_SAVED_PLAN_BYTES = 64 * 1024 * 1024
# groundctl's plan file: each change's URN, operation and field names, well under a MiB for the largest layer.
MAX_PLAN_FILE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class RunOutcome:
    record: RunRecord
    error: Optional[GroundctlError] = None
    plans: tuple[Plan, ...] = field(default=())
    stored: bool = False  # whether the run record reached the state bucket

    @property
    def exit_code(self) -> int:
        return self.error.exit_code if self.error else 0


def run(target: Target, steps: Steps, services: Services, options: UpOptions = UpOptions()) -> RunOutcome:
    """Run `up` or `destroy` as built; never raises a GroundctlError, it is returned with the record."""
    opts = {"layers": steps.layer_names, "yes": options.yes, "allow_destroy": options.allow_destroy,
            "plan_dir": str(options.plan_dir) if options.plan_dir else None}
    log = start_run(target.name, steps.command, opts, clock=services.clock, git_commit=services.git_commit(),
                    secret_values=target.secret_values)
    log.plan_layers(steps.layer_names, steps.command)
    lock = None
    held: list = []
    plans: list[Plan] = []
    error: Optional[GroundctlError] = None
    try:
        try:
            approved = approved_plans(options.plan_dir, target.name) if options.plan_dir else None
            states = run_states(target)
            for name in steps.preflight:
                got = preflight_phase(name, target, services, log, held=held, layers=engine_layers(steps),
                                      operation=steps.command, states=states)
                lock = got or lock
            if steps.command == "destroy":
                destroy_all(target, steps, services, log, lock, yes=options.yes)
            else:
                for step in steps.layers:
                    still_locked(lock)
                    plan = up_layer(target, step, services, log, options, approved)
                    plans.append(plan)
        except GroundctlError as exc:
            error = exc
        except BaseException as exc:
            # Ctrl-C, SIGTERM or a bug: release, and say where the run stopped, before it goes on up.
            _close(log, held, *_stopped_by(exc, log))
            raise
        if error is not None:
            _scrub(error, target)
            for lay in log.record.layers:
                if lay.achieved == "pending":
                    log.set_layer(lay.layer, achieved=error_outcome(error), message=error.message)
            _close(log, held, error_outcome(error), f"stopped at {log.record.stopped_at or ''}: {error.message}")
        else:
            _close(log, held, "succeeded", _closing_message(log.record))
    except KeyboardInterrupt:
        # A signal that landed between two steps of the ending: the record still gets its outcome.
        if log.record.outcome == "running":
            _close(log, held, *_stopped_by(KeyboardInterrupt(), log))
        raise
    if log.save_error:
        console.warn(f"the run record could not be stored: {log.save_error}")
    return RunOutcome(log.record, error, tuple(plans), log.stored)


def _stopped_by(exc: BaseException, log: RunLog) -> tuple[str, str]:
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", f"interrupted at {log.record.stopped_at or 'start-up'}; the lock was released"
    return "failed", f"stopped by {type(exc).__name__}"


def _close(log: RunLog, held: list, outcome: str, message: str) -> None:
    # Shielded: a Ctrl-C here waits until the lock is released and the record says how the run ended.
    with shielded():
        _release(held, log)
        log.finish(outcome, message)


def _release(held: list, log: RunLog) -> None:
    while held:
        lock = held.pop()
        try:
            with log.phase("unlock"):
                lock.__exit__(None, None, None)
        except Exception as exc:  # noqa: BLE001 - the lock expires by its TTL; the run's outcome stands
            why = getattr(exc, "message", None) or f"{type(exc).__name__} {error_code(exc)}".strip()
            console.warn(f"the environment lock was not released cleanly ({why}); it expires by its TTL")


def _scrub(error: GroundctlError, target: Target) -> None:
    # An engine error may quote what Pulumi printed; no secret value leaves through it.
    error.message = redact(error.message, target.secret_values())
    error.args = (error.message,)


def _closing_message(record: RunRecord) -> str:
    parts = [f"{lay.layer} {lay.achieved}" for lay in record.layers]
    skipped = [f"{lay.layer} skipped: {lay.message}" for lay in record.layers if lay.achieved == "skipped"]
    return "; ".join(parts) + (". " + " ".join(skipped) if skipped else "")


def approved_plans(plan_dir: Path, environment: str) -> dict:
    if not plan_dir.is_dir():
        raise BadInput(f"--plan-dir {plan_dir} is not a directory. Give the --out directory of `groundctl plan`.")
    documents = {}
    for path in sorted(plan_dir.glob(f"{plan_render.live_plan_prefix(environment)}*.json")):
        # A FIFO, a device or a hung mount among them is an error naming the file, never a wait.
        data = read_user_file(str(path), what="The plan file", max_bytes=MAX_PLAN_FILE_BYTES, follow_symlinks=False,
                              fix=f"Re-create the plan folder with `groundctl plan {environment} --out DIR`.")
        try:
            documents[str(path)] = json.loads(data)
        except ValueError as exc:
            raise BadInput(f"{path} is not readable JSON ({exc}). Re-create it with `groundctl plan`.") from None
    approved = gate.approved_from_documents(documents, environment)
    if not approved:
        raise BadInput(f"{plan_dir} holds no plan for '{environment}'. Write one with "
                       f"`groundctl plan {environment} --out {plan_dir}` and review it first.")
    return {layer: _with_saved_plan(plan_dir, entry) for layer, entry in approved.items()}


def _with_saved_plan(plan_dir: Path, entry: gate.ApprovedPlan) -> gate.ApprovedPlan:
    """The entry with its Pulumi saved plan read, refused unless it is the very file the plan file names."""
    import hashlib
    from dataclasses import replace

    if entry.saved_plan is None:
        return entry
    name, digest = entry.saved_plan
    again = f"Re-create the plan folder with `groundctl plan {entry.environment} --out DIR` and review it."
    data = read_user_file(str(plan_dir / name), what="The saved plan", max_bytes=MAX_SAVED_PLAN_BYTES,
                          follow_symlinks=False, fix=f"{entry.source} names it. {again}")
    if hashlib.sha256(data).hexdigest() != digest:
        raise BadInput(f"{plan_dir / name} is not the saved plan {entry.source} was written with (its sha256 "
                       f"differs), so it changed after `groundctl plan` wrote it. {again}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{plan_dir / name} is not UTF-8 text. {again}") from None
    return replace(entry, saved_plan_text=text)
