"""The state-loss drill: lose a stack's state the way it happens in real life, and prove it comes back.

preflight → baseline → delete-state → recover → verify. The current state object is deleted with a
plain DELETE, which in the versioned bucket leaves a delete marker and keeps every older version
(nothing is destroyed that a restore cannot bring back). The guided recovery (`recovery.guide`) then
runs unattended; the drill holds the environment lock throughout and lends it to the guide. The
drill passes only when the guide completes with a clean verification plan, nothing recorded is lost
(the recovery point: no serial, no resource), the restored object is byte-identical to the baseline,
and the recovery took no longer than the RTO. Never against a production environment.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from bootstrap.engine.errors import UnexpectedChanges
from bootstrap.layers import layer as layer_def
from recovery.drills import phases as dp
from recovery.drills.phases import PhaseResult
from recovery.drills.report import DrillReport, new_drill_id
from recovery.drills.runner import (DrillContext, Failed, Refusal, build_report, check_lock, run_and_release,
                                   take_lock, verify_layer_state)


@dataclass(frozen=True)
class StateLossOptions:
    layer: str
    dry_run: bool = False
    yes: bool = False


class _StateLoss:
    def __init__(self, ctx: DrillContext, opts: StateLossOptions, drill_id: str):
        self.ctx, self.opts, self.drill_id = ctx, opts, drill_id
        self.lock = None
        self.baseline: dict = {}
        self.after: dict = {}
        self.transcript = None
        self.recovery_point = None

    def preflight(self) -> tuple:
        ctx, opts, spec = self.ctx, self.opts, self.ctx.spec
        if spec.production:
            raise Refusal("ProductionRefused", f"'{spec.name}' is a production environment; the state-loss drill "
                          "deletes a stack's state and runs only against non-production environments.")
        layer_def(opts.layer)  # an unknown layer is BadInput
        ctx.refuse_without_flux_secrets((opts.layer,))
        ctx.require_bucket()
        self.lock = take_lock(ctx, self.drill_id, opts.dry_run)
        ok, message, details = verify_layer_state(ctx.store, opts.layer, spec.name)
        if not ok:
            raise Refusal("StateNotVerified", f"The drill needs a verified state to lose: {message}.", details)
        question = (f"Delete the current state of {opts.layer}/{spec.name} (a delete marker; older versions stay) and "
                    "recover it unattended?")
        if not opts.dry_run and not (opts.yes or ctx.confirm(question)):
            raise Refusal("NotConfirmed", "The drill was not confirmed (without a terminal the answer is no); "
                          "re-run with --yes.")
        return "Verified", message, details

    def baseline_(self) -> tuple:
        ctx, layer = self.ctx, self.opts.layer
        try:
            plan = ctx.engine().preview(layer, refresh=True, expect_no_changes=True)
        except UnexpectedChanges as exc:
            raise Refusal("BaselineDrift", f"{layer} already differs from what is live ({exc.plan.counts}); a "
                          "recovery could not be verified against it. Resolve the drift first.",
                          {"plan": exc.plan.to_dict()}) from None
        ok, message, details = verify_layer_state(ctx.store, layer, ctx.environment)
        if not ok:
            raise Refusal("StateNotVerified", message, details)
        self.baseline = {"layer": layer, "state": details, "preview": plan.counts}
        return "BaselineRecorded", f"{message}; the refresh preview shows no changes", self.baseline

    def delete_state(self) -> tuple:
        from bootstrap.records.ledger import current_state

        check_lock(self.lock)
        key = self.baseline["state"]["key"]
        self.ctx.store.delete(key)  # a delete marker in a versioned bucket; no version is removed
        if current_state(self.ctx.store, self.opts.layer, self.ctx.environment) is not None:
            raise Failed("StillPresent", f"{key} is still readable after the delete; is the bucket versioned?")
        return "Deleted", (f"{key} deleted (a delete marker); version {self.baseline['state']['version_id']} "
                           "remains as a noncurrent version"), {"key": key}

    @contextmanager
    def _held(self, store, environment, run_id) -> Iterator[object]:
        # The guide takes the lock for its writes; the drill already holds it, so lend it instead.
        check_lock(self.lock)
        yield self.lock

    def recover(self) -> tuple:
        from recovery.guide.flow import run_guide
        from recovery.guide.model import GuideOptions, GuideServices

        ctx, layer = self.ctx, self.opts.layer
        timings: list[dict] = []
        mark = [ctx.clock()]

        def on_condition(cond) -> None:
            now = ctx.clock()
            timings.append({"phase": cond.phase, "status": cond.status, "reason": cond.reason,
                            "seconds": round(now - mark[0], 3)})
            mark[0] = now

        opts = GuideOptions(ctx.environment, layer, yes=True, run_id=f"{self.drill_id}-recover")
        svc = GuideServices(store=ctx.store, engine=ctx.engine, inventory=ctx.inventory, lock_factory=self._held,
                            confirm=lambda question: False, clock=ctx.clock,
                            flux_ready=self._flux_ready if layer == "flux" and not ctx.emulated else None)
        self.transcript = run_guide(opts, svc, on_condition)
        t = self.transcript
        details = {"outcome": t.outcome, "run_id": t.run_id, "guide_phases": timings}
        choose = next((c for c in t.conditions if c.phase == "choose"), None)
        if choose is not None:
            self.recovery_point = choose.details.get("recovery_point")
        if t.outcome != "complete":
            stop = next((c for c in t.conditions if c.status in ("refused", "failed")), None)
            why = f"{stop.phase}: {stop.reason}: {stop.message}" if stop else t.outcome
            raise Failed("RecoveryIncomplete", f"The guided recovery ended '{t.outcome}' ({why}).",
                         details | {"transcript": t.to_dict()}, exit_code=t.exit_code)
        return "Recovered", f"The guided recovery completed ({len(timings)} phases).", details

    def _flux_ready(self):
        from bootstrap.flux.check import flux_readiness

        ctx = self.ctx
        return flux_readiness(ctx.spec, ctx.engine(), kube_for=lambda spec, kubeconfig: ctx.kube_for(kubeconfig),
                              secrets=ctx.secrets, clock=ctx.clock, sleep=ctx.sleep)

    def verify(self) -> tuple:
        ctx, layer = self.ctx, self.opts.layer
        verify = next(c for c in self.transcript.conditions if c.phase == "verify")
        ok, message, details = verify_layer_state(ctx.store, layer, ctx.environment)
        rp = dict(self.recovery_point or {})
        rp["identical_to_baseline"] = details.get("sha256") == self.baseline["state"].get("sha256")
        rp["serial_before"] = self.baseline["state"].get("serial")
        rp["serial_after"] = details.get("serial")
        self.recovery_point = rp
        self.after = {"state": details, "verification": verify.to_dict()}
        problems = []
        if verify.status != "achieved":
            problems.append(f"the verification plan is not clean ({verify.message})")
        if not ok:
            problems.append(message)
        if rp.get("serials_lost") or rp.get("resources_lost"):
            problems.append(f"{len(rp.get('serials_lost') or [])} serial(s) and {len(rp.get('resources_lost') or [])} "
                            "resource(s) were lost")
        if not rp["identical_to_baseline"]:
            problems.append("the restored state is not byte-identical to the baseline")
        if problems:
            raise Failed("NotRecovered", "The state came back, but: " + "; ".join(problems) + ".", rp)
        return "NothingLost", ("Clean verification plan; 0 serials and 0 resources lost; the restored state is "
                               f"identical to the baseline (now serial {rp['serial_after']})."), rp

    def dry_details(self, phase: str) -> dict:
        layer = self.opts.layer
        if phase == "delete-state":
            key = (self.baseline.get("state") or {}).get("key") or f".pulumi/stacks/{layer}/{self.ctx.environment}.json"
            return {"phase": phase, "layer": layer, "summary": f"would delete {key}, leaving a delete marker"}
        if phase == "recover":
            from recovery.guide.flow import PHASES
            return {"phase": phase, "layer": layer, "summary": "would run the guided recovery unattended: "
                    + " → ".join(PHASES)}
        return {"phase": phase, "layer": layer, "summary": "would require a clean verification plan, 0 serials and "
                "0 resources lost, and the restored state identical to the baseline"}

    def methods(self) -> dict:
        return {"preflight": self.preflight, "baseline": self.baseline_, "delete-state": self.delete_state,
                "recover": self.recover, "verify": self.verify}


def run_state_loss(ctx: DrillContext, opts: StateLossOptions) -> DrillReport:
    """Run the state-loss drill; never raises a GroundctlError: the report says what happened."""
    drill_id = new_drill_id("state-loss", ctx.clock)
    started = ctx.clock()
    runner = _StateLoss(ctx, opts, drill_id)
    plans = dp.build_state_loss()
    options = {"dry_run": opts.dry_run, "yes": opts.yes, "layer": opts.layer}

    def snapshot(results: list[PhaseResult]) -> DrillReport:
        return build_report("state-loss", ctx, drill_id, started, results, plans, options, dry_run=opts.dry_run,
                             layer=opts.layer, baseline=runner.baseline, after=runner.after,
                             recovery_point=runner.recovery_point)

    return run_and_release(ctx, plans, runner, dry_run=opts.dry_run, layer=opts.layer, snapshot=snapshot,
                           kind="state-loss")
