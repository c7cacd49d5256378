"""What both drills share: the context they run in, the phase runner, the lock they hold, the report.

`run_phases` runs the phases `recovery.drills.phases` lists, timing each with the injected clock; a
phase that fails stops the drill and the later phases are reported as not attempted. All I/O comes
in through `DrillContext`. The drills themselves are `recovery.drills.rebuild_cluster` (rebuild-cluster) and
`recovery.drills.state_loss`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional

from bootstrap.kit.errors import GroundctlError, Refused
from bootstrap.kube.api import KubeApi
from bootstrap.records.runs import redact
from recovery.drills import phases as dp
from recovery.drills.phases import PhasePlan, PhaseResult
from recovery.drills.report import DrillReport, recovery_phases
from recovery.lineage.verify import verify_report


@dataclass(frozen=True)
class LayerOutcome:
    """What the orchestrator achieved for the layers of one drill step."""
    status: str                 # achieved | skipped | failed | refused
    message: str
    run_id: Optional[str] = None
    outputs: dict = field(default_factory=dict)


@dataclass
class DrillContext:
    spec: Any                                           # EnvironmentSpec
    store: Any                                          # ObjectStore of the state bucket
    engine: Callable[[], Any]                           # the Engine, built on first use
    emulated: bool
    run_layers: Callable[[str, tuple[str, ...]], LayerOutcome]
    lock_factory: Callable                              # (store, environment, run_id) -> context manager
    require_bucket: Callable[[], None]
    kube_for: Callable[[str], KubeApi] = None           # kubeconfig text -> Kubernetes API client
    lock_status: Optional[Callable] = None              # (store, environment) -> LockStatus, for dry runs
    confirm: Callable[[str], bool] = lambda question: False
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    secrets: set = field(default_factory=set)           # grows as secret outputs are seen
    checkpoint: Optional[Callable[[DrillReport], None]] = None  # saves progress after each phase
    inventory: Optional[Callable[[str, str], Any]] = None       # (environment, layer) -> live inventory
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)  # the flux layer's SSH secrets

    def refuse_without_flux_secrets(self, layers: tuple[str, ...]) -> None:
        """A Refusal at preflight, before the lock or any change, when a layer the drill recreates is flux and
        its SSH deploy key or known hosts are not set (the rebuild would stop half-way, cluster gone)."""
        from bootstrap.spec.stack_config import flux_secrets_missing

        missing = flux_secrets_missing(self.spec, self.environ) if "flux" in layers and not self.emulated else None
        if missing:
            raise Refusal("FluxSecretsMissing", missing)

    @property
    def environment(self) -> str:
        return self.spec.name


class Failed(GroundctlError):
    """A phase did not achieve what it must; carries its Flux-style reason."""

    exit_code = 1

    def __init__(self, reason: str, message: str, details: Optional[dict] = None, exit_code: int = 1):
        super().__init__(message)
        self.reason = reason
        self.details = details or {}
        self.exit_code = exit_code  # a phase stopped by an unreachable cloud fails as that does (4)


class Refusal(Refused):
    def __init__(self, reason: str, message: str, details: Optional[dict] = None):
        super().__init__(message)
        self.reason = reason
        self.details = details or {}


def take_lock(ctx: DrillContext, drill_id: str, dry_run: bool, held_note: str = ""):
    """The environment lock, entered, for a real run; for a dry run (None) only a check that nobody holds it."""
    if not dry_run:
        lock = ctx.lock_factory(ctx.store, ctx.environment, drill_id)
        lock.__enter__()
        return lock
    if ctx.lock_status is not None:
        status = ctx.lock_status(ctx.store, ctx.environment)
        if status.holder is not None:
            raise Refusal("LockHeld", f"The environment is locked by {status.holder.holder}{held_note}.")
    return None


def check_lock(lock) -> None:
    """Raise if the held lock was lost (taken over after its TTL); a lock without `check` cannot tell."""
    check = getattr(lock, "check", None)
    if callable(check):
        check()


def release_lock(lock) -> Optional[str]:
    """Release a held lock; what went wrong as a note for the report, since the drill's outcome stands
    (the lock expires by its TTL)."""
    if lock is None:
        return None
    try:
        lock.__exit__(None, None, None)
    except GroundctlError as exc:
        return f"the environment lock was not released cleanly: {exc.message}"
    return None


def verify_layer_state(store, layer: str, environment: str) -> tuple[bool, str, dict]:
    """Is the stack's current state present, integral, of its lineage, and the ledger's head?

    The judgement is `groundctl state verify`'s (one definition of "verified"); a drill also needs a
    ledger, because its recovery is checked against the serials recorded there.
    """
    report = verify_report(store, layer, environment)
    current = report.get("current") or {}
    details = {"key": current.get("key"), "version_id": current.get("version_id"), "sha256": current.get("sha256"),
               "resources": current.get("resources"), "serial": (report.get("ledger") or {}).get("head_serial")}
    if report["problems"]:
        first = report["problems"][0]
        more = f" (and {len(report['problems']) - 1} more problem(s))" if len(report["problems"]) > 1 else ""
        return False, (f"{layer}: {first['code']}: {first['message']}{more}; see `groundctl state verify "
                       f"{environment} {layer}`"), details
    if details["serial"] is None:
        return False, f"{layer} has no ledger record, so its state cannot be verified", details
    return True, f"{layer}: serial {details['serial']}, {details['resources']} resources, state verified", details


def public_outputs(outputs) -> dict:
    """Stack outputs without any secret one (not even masked: the kubeconfig is never reported)."""
    return {k: v for k, v in outputs.values.items() if k not in outputs.secret_keys}


def _result_from_error(plan: PhasePlan, exc: GroundctlError, environment: str, layer: str,
                       kind: str) -> PhaseResult:
    refused = isinstance(exc, Refused)
    reason = getattr(exc, "reason", None) or type(exc).__name__
    return PhaseResult(plan.name, dp.REFUSED if refused else dp.FAILED, reason, exc.message, True,
                       dp.next_step(plan.name, environment, layer, kind=kind, error=exc),
                       details=getattr(exc, "details", {}) or {}, exit_code=exc.exit_code)


def run_phases(ctx: DrillContext, plans: tuple[PhasePlan, ...], methods: dict[str, Callable[[], tuple]], *,
               dry_run: bool, read_only: frozenset[str], dry_details: Callable[[str], dict], layer: str,
               snapshot: Callable[[list[PhaseResult]], DrillReport],
               kind: str = "rebuild-cluster") -> list[PhaseResult]:
    """Run each phase (a method returns (reason, message, details)); stop at the first that does not succeed."""
    results: list[PhaseResult] = []
    stopped = False
    for plan in plans:
        at = ctx.clock()
        if stopped:
            results.append(dp.not_attempted(plan.name))
        elif plan.skip_reason:
            results.append(dp.skipped(plan, "NoKubernetesApi", at=at))
        elif dry_run and plan.name not in read_only:
            result = dp.skipped(plan, "DryRun", "dry run: nothing is changed", at=at)
            try:
                details = dry_details(plan.name)
            except Exception as exc:  # noqa: BLE001 - a dry run shows what it can, and says what it could not
                why = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                details = {"phase": plan.name, "summary": f"not known: {why}"}
            results.append(replace(result, details=details))
        else:
            try:
                reason, message, details = methods[plan.name]()
                result = PhaseResult(plan.name, dp.ACHIEVED, reason, message, True, details=details)
            except GroundctlError as exc:
                exc.message = redact(exc.message, ctx.secrets)  # an engine error may quote a secret output
                result = _result_from_error(plan, exc, ctx.environment, layer, kind)
                stopped = True
            results.append(dp.with_timing(result, at, ctx.clock()))
            if dry_run and result.status != dp.ACHIEVED:
                stopped = False  # a dry run shows every read-only check it can
        if ctx.checkpoint is not None and not dry_run:
            ctx.checkpoint(snapshot(results))
    return results


def build_report(kind: str, ctx: DrillContext, drill_id: str, started: float, results: list[PhaseResult],
                  plans: tuple[PhasePlan, ...], options: dict, *, dry_run: bool, layer: Optional[str] = None,
                  **extra) -> DrillReport:
    done = {r.name for r in results}
    phases = tuple(results) + tuple(PhaseResult(p.name, dp.NOT_ATTEMPTED, "Pending", "Not reached yet.", False)
                                    for p in plans if p.name not in done)
    verdict = dp.decide(phases, recovery_phases(kind), ctx.spec.recovery.rto_minutes, dry_run=dry_run)
    if len(done) < len(plans):  # a progress checkpoint: the drill is still running
        verdict = replace(verdict, outcome="running", reason="InProgress", message="The drill is still running.")
    plans_shown = tuple(r.details for r in phases if r.reason == "DryRun" and r.details)
    return DrillReport(drill_id, kind, ctx.environment, started, ctx.clock(), ctx.spec.recovery.rto_minutes, phases,
                       verdict, options, layer=layer, plans=plans_shown,
                       left_half_done=tuple(dp.left_half_done(phases, ctx.environment)), **extra)


def run_and_release(ctx: DrillContext, plans: tuple[PhasePlan, ...], runner, *, dry_run: bool, layer: str,
                    snapshot: Callable[[list], DrillReport], kind: str = "rebuild-cluster") -> DrillReport:
    """Run a drill's phases, always release its lock, and report a lock that could not be released."""
    try:
        results = run_phases(ctx, plans, runner.methods(), dry_run=dry_run,
                             read_only=frozenset({"preflight", "baseline"}), dry_details=runner.dry_details,
                             layer=layer, snapshot=snapshot, kind=kind)
    finally:
        lock_note = release_lock(runner.lock)
    report = snapshot(results)
    if lock_note:
        report = replace(report, left_half_done=report.left_half_done + (lock_note,))
    return report
