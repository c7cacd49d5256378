"""What a drill will do and how it is judged: phase lists, phase results, the verdict. Pure.

A phase ends like a Flux condition: a status, a CamelCase reason, a message, and the operator's next
step. "Attempted" and "achieved" are kept apart: a preflight that refused was attempted and not
achieved; a phase after a failure was not attempted at all. The recovery time is measured over the
recovery phases only (recreate → verified for a rebuild; recover → verified for a state loss): the
destroy is the simulated disaster, not part of the recovery. The whole drill's time is reported too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

from bootstrap.apply.steps import EMULATOR_HAS_NO_KUBERNETES

# status values of a phase
ACHIEVED, FAILED, REFUSED, SKIPPED, NOT_ATTEMPTED, RUNNING = (
    "achieved", "failed", "refused", "skipped", "not-attempted", "running")

REBUILD = ("preflight", "baseline", "destroy-flux", "destroy-cluster", "recreate-cluster", "recreate-flux",
           "flux-ready", "verify-kustomizations")
REBUILD_RECOVERY = ("recreate-cluster", "recreate-flux", "flux-ready", "verify-kustomizations")
FLUX_PHASES = ("destroy-flux", "recreate-flux", "flux-ready", "verify-kustomizations")
STATE_LOSS = ("preflight", "baseline", "delete-state", "recover", "verify")
STATE_LOSS_RECOVERY = ("recover", "verify")

TITLES = {
    "preflight": "lock, spec, production guard, backend and network healthy, current state verified",
    "baseline": "record what must come back",
    "destroy-flux": "destroy the flux layer",
    "destroy-cluster": "destroy the cluster layer",
    "recreate-cluster": "recreate the cluster layer through the orchestrator",
    "recreate-flux": "recreate the flux layer through the orchestrator",
    "flux-ready": "wait for Flux's Ready conditions",
    "verify-kustomizations": "the same Kustomizations at the same revisions",
    "delete-state": "delete the stack's current state object (a delete marker; older versions stay)",
    "recover": "run the guided recovery unattended",
    "verify": "clean verification plan, nothing lost",
}


@dataclass(frozen=True)
class PhasePlan:
    name: str
    title: str
    skip_reason: Optional[str] = None
    destructive: bool = False


def build_rebuild(*, kubernetes_reason: Optional[str]) -> tuple[PhasePlan, ...]:
    """The rebuild's phases; without a Kubernetes API (`kubernetes_reason`) the Flux ones are skipped."""
    return tuple(PhasePlan(n, TITLES[n], kubernetes_reason if n in FLUX_PHASES else None,
                           n.startswith("destroy")) for n in REBUILD)


def build_state_loss() -> tuple[PhasePlan, ...]:
    return tuple(PhasePlan(n, TITLES[n], None, n == "delete-state") for n in STATE_LOSS)


def kubernetes_reason(*, emulated: bool, cluster_outputs: dict) -> Optional[str]:
    """Why there is no Kubernetes API to check Flux with, or None when there should be one."""
    if emulated:
        return EMULATOR_HAS_NO_KUBERNETES
    if not cluster_outputs.get("kubeconfig"):
        return "the cluster layer exports no kubeconfig, so its Kubernetes API cannot be reached"
    return None


@dataclass(frozen=True)
class PhaseResult:
    name: str
    status: str
    reason: str
    message: str
    attempted: bool
    next_step: str = ""
    started_at: Optional[float] = None      # seconds, from the drill's injected clock
    ended_at: Optional[float] = None
    details: dict = field(default_factory=dict)
    exit_code: Optional[int] = None  # set when an error stopped the phase: the exit code its class stands for

    @property
    def achieved(self) -> bool:
        return self.status == ACHIEVED

    @property
    def seconds(self) -> Optional[float]:
        if self.started_at is None or self.ended_at is None:
            return None
        return round(self.ended_at - self.started_at, 3)

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "attempted": self.attempted, "achieved": self.achieved,
                "reason": self.reason, "message": self.message, "next_step": self.next_step,
                "started_at": self.started_at, "ended_at": self.ended_at, "seconds": self.seconds,
                "details": self.details, "exit_code": self.exit_code}

    @classmethod
    def from_dict(cls, d: dict) -> "PhaseResult":
        return cls(d["name"], d["status"], d.get("reason", ""), d.get("message", ""), bool(d.get("attempted")),
                   d.get("next_step", ""), d.get("started_at"), d.get("ended_at"), dict(d.get("details") or {}))


def skipped(plan: PhasePlan, reason: str = "Skipped", why: Optional[str] = None, at: Optional[float] = None) -> PhaseResult:
    return PhaseResult(plan.name, SKIPPED, reason, f"Skipped: {why or plan.skip_reason}.", False,
                       started_at=at, ended_at=at)


def not_attempted(name: str) -> PhaseResult:
    return PhaseResult(name, NOT_ATTEMPTED, "NotAttempted", "An earlier phase stopped the drill.", False)


def next_step(phase: str, environment: str, layer: str = "cluster", *, kind: str = "rebuild-cluster",
              error: Optional[BaseException] = None) -> str:
    """What the operator does when `phase` failed (the environment may be half-rebuilt): the real cause's fix,
    from the drill's kind and the error that stopped the phase."""
    from bootstrap.engine.errors import CliMissing

    if isinstance(error, CliMissing):
        again = (f"`groundctl drill {kind} {environment}" + (f" --layer {layer}" if kind == "state-loss" else "")
                 + " --dry-run`")
        return (("nothing was changed; " if phase in ("preflight", "baseline") else "")
                + "the Pulumi CLI is not on PATH: install it (https://www.pulumi.com/docs/install/), check "
                f"`pulumi version` in this shell, then run {again}")
    if kind == "state-loss" and phase == "baseline":
        if getattr(error, "reason", None) == "BaselineDrift":
            return (f"nothing was changed; {layer} differs from what is live: review `groundctl drift {environment} "
                    f"--layers {layer}`, converge it with `groundctl up {environment} --layers {layer}`, then run "
                    "the drill again")
        return (f"nothing was changed; the refresh preview of {layer} failed: fix the cause the message names, "
                f"check with `groundctl drift {environment} --layers {layer}`, then run the drill again")
    up = f"groundctl up {environment} --layers cluster,flux --yes"
    return {
        "preflight": "nothing was changed; fix what the preflight names (see its message) and run the drill again",
        "baseline": "nothing was changed; make the cluster's API and Flux readable from here, then run the drill again",
        "destroy-flux": f"flux may be partly destroyed: run `{up}` to bring it back, then check `groundctl status {environment}`",
        "destroy-cluster": f"the cluster is partly destroyed and flux is gone: run `{up}` (see runbooks/rehearse-cluster-rebuild.md)",
        "recreate-cluster": f"the cluster and flux are DOWN: read the run record named in the message, fix the cause, run `{up}`",
        "recreate-flux": f"the cluster is back but flux is not: fix the cause, then `groundctl up {environment} --layers flux --yes`",
        "flux-ready": "the layers are applied but Flux is not Ready: read the Kustomizations' Ready messages "
                      "(`flux get kustomizations -A`) and fix the source or the manifests they name",
        "verify-kustomizations": "Flux is Ready but not at the baseline revisions: compare the revisions listed "
                                 "(the Git ref may have moved during the drill) before calling the rebuild good",
        "delete-state": f"the state of {layer} may be deleted: run `groundctl state verify {environment} {layer}`; "
                        f"if it is gone, `groundctl recover {environment} {layer} --dry-run` (runbooks/recover-state.md)",
        "recover": f"the state of {layer} is still deleted or only partly restored: run `groundctl recover "
                   f"{environment} {layer} --dry-run` and follow runbooks/recover-state.md with this report",
        "verify": f"the state of {layer} was restored but does not match what is live: review the verification plan "
                  f"(`groundctl drift {environment}`) before any `up`",
    }.get(phase, "see the message")


@dataclass(frozen=True)
class Verdict:
    outcome: str                # passed | failed | refused | unverified | dry-run
    reason: str
    message: str
    recovery_seconds: Optional[float]
    rto_seconds: float
    within_rto: Optional[bool]
    failed_phase: Optional[str] = None

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "passed": self.passed, "reason": self.reason, "message": self.message,
                "recovery_seconds": self.recovery_seconds, "rto_seconds": self.rto_seconds,
                "within_rto": self.within_rto, "failed_phase": self.failed_phase}


def recovery_seconds(phases: Iterable[PhaseResult], recovery: tuple[str, ...]) -> Optional[float]:
    """From the start of the first recovery phase to the end of the last one that ran."""
    timed = [p for p in phases if p.name in recovery and p.attempted and p.started_at is not None
             and p.ended_at is not None]
    if not timed:
        return None
    return round(max(p.ended_at for p in timed) - min(p.started_at for p in timed), 3)


def decide(phases: tuple[PhaseResult, ...], recovery: tuple[str, ...], rto_minutes: int, *,
           dry_run: bool = False) -> Verdict:
    """Pass only if every phase was achieved and the recovery took no longer than the RTO."""
    rto = float(rto_minutes * 60)
    took = recovery_seconds(phases, recovery)
    within = None if took is None else took <= rto
    if dry_run:
        stop = next((p for p in phases if p.status in (REFUSED, FAILED)), None)
        tail = (f" The drill would stop at {stop.name}: {stop.message}" if stop else
                " The read-only checks passed.")
        return Verdict("dry-run", "DryRun", "Dry run: nothing was changed and nothing was measured." + tail,
                       None, rto, None, stop.name if stop else None)
    for p in phases:
        if p.status in (REFUSED, FAILED):
            kind = "refused" if p.status == REFUSED else "failed"
            return Verdict(kind, p.reason or f"{p.name}Failed", f"The {p.name} phase {kind}: {p.message}", took, rto,
                           within, p.name)
    if within is False:
        return Verdict("failed", "OverRTO", f"Every phase succeeded, but the recovery took {took:.0f} s, over the "
                       f"RTO of {rto_minutes} min ({rto:.0f} s).", took, rto, within)
    skipped_phases = [p for p in phases if p.status == SKIPPED]
    if skipped_phases or any(p.status != ACHIEVED for p in phases):
        why = "; ".join(f"{p.name}: {p.message}" for p in skipped_phases) or "a phase did not finish"
        timing = f"the measured part took {took:.0f} s of the {rto:.0f} s RTO" if took is not None else "nothing was timed"
        return Verdict("unverified", "NotFullyVerified", f"The drill could not be fully verified ({timing}). {why}",
                       took, rto, within)
    return Verdict("passed", "WithinRTO", f"Every phase succeeded; the recovery took {took:.0f} s, within the RTO "
                   f"of {rto_minutes} min.", took, rto, within)


def left_half_done(phases: tuple[PhaseResult, ...], environment: str) -> list[str]:
    """What the drill left changed and not restored, for the report: nothing may go unsaid."""
    by = {p.name: p for p in phases}
    out = []

    def touched(name: str) -> bool:
        return name in by and by[name].attempted

    def back(name: str) -> bool:
        return name in by and by[name].status in (ACHIEVED, SKIPPED)

    if touched("destroy-cluster") and not back("recreate-cluster"):
        out.append(f"the cluster layer of {environment} is destroyed or partly destroyed and was not recreated")
    if touched("destroy-flux") and not back("recreate-flux"):
        out.append(f"the flux layer of {environment} is destroyed and was not recreated")
    if "delete-state" in by and by["delete-state"].achieved and not by.get("recover", not_attempted("recover")).achieved:
        recover = by.get("recover")
        guide = ((recover.details.get("transcript") or {}).get("phases") or []) if recover else []
        restored = any(c.get("phase") == "restore" and c.get("status") in (ACHIEVED, SKIPPED) for c in guide)
        out.append(f"the stack state the drill deleted in {environment} was restored but not verified" if restored
                   else f"the stack state the drill deleted in {environment} is still deleted (a delete marker)")
    return out


def with_timing(result: PhaseResult, started: float, ended: float) -> PhaseResult:
    return replace(result, started_at=started, ended_at=ended)
