"""The rebuild-cluster drill (the phase runner and context both drills share are `recovery.drills.runner`).

`rebuild-cluster`: preflight → baseline → destroy flux → destroy cluster → recreate cluster → recreate
flux → wait for Flux Ready → verify the Kustomizations. The layers are destroyed and recreated through
the orchestrator (`bootstrap.apply.runner.run` with steps built here, so its gates, ledger records,
output-contract checks and run records apply); the drill holds the environment lock for its whole
length, so those steps carry no lock preflight of their own. A phase that fails stops the drill: the
later phases are reported as not attempted, and what was left changed is listed in the report. The
lock is released on every path. `--dry-run` runs the read-only checks and shows the plans.

All I/O comes in through `DrillContext`; `orchestrated_layers` builds the product's `run_layers`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

from bootstrap.kit.errors import GroundctlError, Refused
from bootstrap.flux.check import install_for
from bootstrap.flux.ready import compare_revisions, revisions
from bootstrap.flux.wait import observe, wait_ready
from bootstrap.kube.api import KubeApiError
from bootstrap.layers import layer as layer_def, missing_outputs
from recovery.drills import phases as dp
from recovery.drills.phases import PhaseResult
from recovery.drills.report import DrillReport, new_drill_id
from recovery.drills.runner import (DrillContext, Failed, LayerOutcome, Refusal, build_report, check_lock,
                                   run_and_release, public_outputs, take_lock, verify_layer_state)


@dataclass(frozen=True)
class RebuildOptions:
    dry_run: bool = False
    yes: bool = False
    i_mean_production: bool = False
    timeout_minutes: Optional[int] = None               # Flux wait; the RTO when not given


# -- rebuild-cluster ----------------------------------------------------------------------------------

class _Rebuild:
    def __init__(self, ctx: DrillContext, opts: RebuildOptions, drill_id: str):
        self.ctx, self.opts, self.drill_id = ctx, opts, drill_id
        self.lock = None
        self.kubeconfig: Optional[str] = None
        self.flux_outputs: dict = {}
        self.baseline: dict = {}
        self.after: dict = {}
        self.runs: list[str] = []
        self.wait_result = None

    # preflight: every check that can be made without changing anything
    def preflight(self) -> tuple:
        ctx, opts, spec = self.ctx, self.opts, self.ctx.spec
        if spec.production and not opts.i_mean_production:
            raise Refusal("ProductionRefused", f"'{spec.name}' is a production environment; a rebuild drill destroys "
                          "its cluster. Pass --i-mean-production as well if that is really intended.")
        ctx.refuse_without_flux_secrets(("cluster", "flux"))
        ctx.require_bucket()
        # Taken before the checks, so nothing changes between checking and destroying.
        self.lock = take_lock(ctx, self.drill_id, opts.dry_run, "; the drill would wait for that run")
        checks, problems = {}, []
        layers = ["backend", "network", "cluster"] + ([] if ctx.emulated else ["flux"])
        for name in layers:
            ok, message, details = verify_layer_state(ctx.store, name, spec.name)
            checks[name] = {"ok": ok, "message": message, **details}
            if not ok:
                problems.append(message)
        for name in ("backend", "network", "cluster"):
            try:
                outputs = ctx.engine().outputs(name)
            except GroundctlError as exc:
                problems.append(f"{name}'s outputs could not be read ({exc.message})")
                break
            ctx.secrets.update(str(outputs.values[k]) for k in outputs.secret_keys if k in outputs.values)
            missing = missing_outputs(layer_def(name), outputs.values)
            checks[name]["missing_outputs"] = missing
            if missing:
                problems.append(f"{name} does not export {', '.join(missing)}")
        if problems:
            raise Refusal("PreflightFailed", "The environment is not healthy enough to rebuild from: "
                          + "; ".join(problems) + ".", {"checks": checks})
        question = (f"Destroy and recreate the cluster and flux layers of '{spec.name}' to time the rebuild? "
                    "Workloads on the cluster go down until it is back.")
        if not opts.dry_run and not (opts.yes or ctx.confirm(question)):
            raise Refusal("NotConfirmed", "The drill was not confirmed (without a terminal the answer is no); "
                          "re-run with --yes.")
        return "Healthy", "; ".join(c["message"] for c in checks.values()), {"checks": checks}

    def baseline_(self) -> tuple:
        ctx = self.ctx
        outputs = ctx.engine().outputs("cluster")
        ctx.secrets.update(str(outputs.values[k]) for k in outputs.secret_keys if k in outputs.values)
        self.kubeconfig = outputs.values.get("kubeconfig")
        self.baseline = {"cluster_outputs": public_outputs(outputs)}
        reason = dp.kubernetes_reason(emulated=ctx.emulated, cluster_outputs=outputs.values)
        if reason:
            if not ctx.emulated:
                raise Refusal("KubernetesUnreachable", f"Flux cannot be checked: {reason}. A rebuild that cannot be "
                              "verified is not run against a real cluster.")
            self.baseline["kustomizations"] = None
            self.baseline["kustomizations_skipped"] = reason
            return "BaselineRecorded", "Cluster outputs recorded; Flux is not checked here: " + reason + ".", self.baseline
        try:
            ready = observe(ctx.kube_for(self.kubeconfig))
        except KubeApiError as exc:
            raise Refusal("KubernetesUnreachable", f"Flux's Kustomizations cannot be read before the drill ({exc}); "
                          "run from a host that reaches the cluster's API.") from None
        items = ready.items
        if ready.outcome != "ready":
            raise Refusal("BaselineNotReady", f"Flux is not Ready before the drill ({ready.message}); a rebuild "
                          "cannot be judged against a baseline that is already broken.")
        self.baseline["kustomizations"] = revisions(items)
        return "BaselineRecorded", f"Cluster outputs and {len(items)} Kustomization(s) with their revisions.", self.baseline

    def _layers(self, operation: str, layer: str) -> tuple:
        check_lock(self.lock)
        outcome = self.ctx.run_layers(operation, (layer,))
        if outcome.run_id:
            self.runs.append(outcome.run_id)
        details = {"run_id": outcome.run_id}
        if outcome.status == dp.REFUSED:
            raise Refusal(f"{operation.capitalize()}Refused", outcome.message, details)
        if outcome.status != dp.ACHIEVED:
            raise Failed(f"{operation.capitalize()}Failed", outcome.message + (
                f" (run record {outcome.run_id})" if outcome.run_id else ""), details)
        if operation == "up" and layer == "cluster":
            outputs = self.ctx.engine().outputs("cluster")
            self.ctx.secrets.update(str(outputs.values[k]) for k in outputs.secret_keys if k in outputs.values)
            self.kubeconfig = outputs.values.get("kubeconfig")
            self.after["cluster_outputs"] = public_outputs(outputs)
        if operation == "up" and layer == "flux":
            self.flux_outputs = dict(self.ctx.engine().outputs("flux").values)
        verb = {"destroy": "Destroyed", "up": "Recreated"}[operation]
        return verb, f"{layer}: {outcome.message}", details

    def flux_ready(self) -> tuple:
        timeout = (self.opts.timeout_minutes or self.ctx.spec.recovery.rto_minutes) * 60
        if not self.kubeconfig:
            raise Failed("NoKubeconfig", "The recreated cluster exports no kubeconfig, so Flux cannot be checked.")
        # What `up` checks (controllers available, the root at the spec's ref), and the baseline's Kustomizations.
        result = wait_ready(self.ctx.kube_for(self.kubeconfig), timeout_seconds=timeout,
                            expected=self.baseline.get("kustomizations"),
                            install=install_for(self.ctx.spec, self.flux_outputs), clock=self.ctx.clock,
                            sleep=self.ctx.sleep)
        self.wait_result = result
        details = result.to_dict()
        if result.outcome != "ready":
            raise Failed("Stalled" if result.outcome == "stalled" else "ReadyTimeout", result.message, details)
        return "Ready", f"{result.message} after {result.polls} poll(s)", details

    def verify(self) -> tuple:
        now = self.wait_result.revisions if self.wait_result else {}
        self.after["kustomizations"] = now
        check = compare_revisions(self.baseline.get("kustomizations") or {}, now)
        if not check.same:
            raise Failed("RevisionMismatch", check.message, check.to_dict())
        return "SameRevisions", check.message, check.to_dict()

    def methods(self) -> dict:
        return {"preflight": self.preflight, "baseline": self.baseline_,
                "destroy-flux": lambda: self._layers("destroy", "flux"),
                "destroy-cluster": lambda: self._layers("destroy", "cluster"),
                "recreate-cluster": lambda: self._layers("up", "cluster"),
                "recreate-flux": lambda: self._layers("up", "flux"),
                "flux-ready": self.flux_ready, "verify-kustomizations": self.verify}

    def dry_details(self, phase: str) -> dict:
        """What the phase would do: the resources a destroy removes, the preview a recreate starts from."""
        layer = phase.split("-", 1)[1] if "-" in phase else None
        if phase.startswith("destroy-") or phase.startswith("recreate-"):
            return dry_plan(self.ctx, phase, layer)
        return {}


def dry_plan(ctx: DrillContext, phase: str, layer: str) -> dict:
    from bootstrap.records.ledger import current_state
    from recovery.state.state_bytes import NotAState
    from recovery.state.state_parse import parse_state

    if phase.startswith("destroy-"):
        try:
            obj = current_state(ctx.store, layer, ctx.environment)
        except GroundctlError as exc:
            return {"phase": phase, "layer": layer, "summary": f"not known: {exc.message}"}
        if obj is None:
            return {"phase": phase, "layer": layer, "summary": "no current state: nothing to destroy is known"}
        try:
            doc = parse_state(obj.body, obj.key)
        except NotAState as exc:
            return {"phase": phase, "layer": layer, "summary": f"the state cannot be read: {exc.message}"}
        counts = doc.counts_by_type()
        n = sum(counts.values())
        return {"phase": phase, "layer": layer, "summary": f"destroys {n} resource(s) in state", "by_type": counts}
    try:
        from bootstrap.planning.summary import plan_summary

        plan = ctx.engine().preview(layer)
    except GroundctlError as exc:
        return {"phase": phase, "layer": layer, "summary": f"no preview: {exc.message}"}
    return {"phase": phase, "layer": layer, "summary": "recreates every resource in the current program; "
            f"a preview now shows {plan_summary(plan)} (anything but 'no changes' is applied too)",
            "plan": plan.to_dict()}


def run_rebuild(ctx: DrillContext, opts: RebuildOptions = RebuildOptions()) -> DrillReport:
    """Run the rebuild drill; never raises a GroundctlError: the report says what happened."""
    drill_id = new_drill_id("rebuild-cluster", ctx.clock)
    started = ctx.clock()
    runner = _Rebuild(ctx, opts, drill_id)
    plans = dp.build_rebuild(kubernetes_reason=dp.EMULATOR_HAS_NO_KUBERNETES if ctx.emulated else None)
    options = {"dry_run": opts.dry_run, "yes": opts.yes, "i_mean_production": opts.i_mean_production,
               "timeout_minutes": opts.timeout_minutes}

    def snapshot(results: list[PhaseResult]) -> DrillReport:
        return build_report("rebuild-cluster", ctx, drill_id, started, results, plans, options,
                             dry_run=opts.dry_run, baseline=runner.baseline, after=runner.after,
                             runs=tuple(runner.runs))

    return run_and_release(ctx, plans, runner, dry_run=opts.dry_run, layer="cluster", snapshot=snapshot)


def orchestrated_layers(target, *, clock: Callable[[], float] = time.time,
                        **service_overrides) -> Callable[[str, tuple[str, ...]], LayerOutcome]:
    """`run_layers` for the product: the orchestrator's runner on steps built here.

    The steps carry only the "state-bucket" preflight (which also attaches the run record to the
    bucket): the drill already holds the environment lock, so a "lock" preflight would refuse.
    `yes` approves create-only plans; anything destructive in a recreate is refused by the gate. The
    runs do not wait for Flux: the drill's flux-ready phase does, with the drill's deadline.
    `service_overrides` replace orchestrator services (tests pass their probe and ledger writer).
    """
    def run_layers(operation: str, layers: tuple[str, ...]) -> LayerOutcome:
        from bootstrap.apply.layer_up import UpOptions
        from bootstrap.apply.runner import run
        from bootstrap.apply.services import default_services
        from bootstrap.apply.steps import KUBERNETES_LAYERS, LayerStep, Steps

        steps = Steps(operation, target.name, ("state-bucket",),
                      tuple(LayerStep(name, operation, None, name in KUBERNETES_LAYERS) for name in layers))
        services = default_services(**({"clock": clock, "confirm": lambda question: False} | service_overrides))
        # The drill's own flux-ready phase waits for Flux, timed apart and with the drill's deadline.
        outcome = run(target, steps, services, UpOptions(yes=True, await_flux=False))
        record = outcome.record
        if outcome.error is not None:
            return LayerOutcome(dp.REFUSED if isinstance(outcome.error, Refused) else dp.FAILED,
                                outcome.error.message, record.run_id)
        skipped = [f"{lay.layer} skipped: {lay.message}" for lay in record.layers if lay.achieved == "skipped"]
        if skipped:
            return LayerOutcome(dp.SKIPPED, "; ".join(skipped), record.run_id)
        return LayerOutcome(dp.ACHIEVED, ", ".join(f"{lay.layer} {lay.achieved}" + (
            f" (serial {lay.serial})" if lay.serial is not None else "") for lay in record.layers), record.run_id)

    return run_layers
