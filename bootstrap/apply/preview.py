"""The previews: `plan` (a preview of every layer, written as plan files) and `drift` (a refresh-preview),
which change nothing and so keep their run record in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from bootstrap.kit import console
from bootstrap.apply.layer_stack import layer_skip_reason, stack_action_for
from bootstrap.apply.preflight import engine_layers, preflight_phase, run_states
from bootstrap.apply.services import Services, default_services
from bootstrap.apply.steps import Steps, build_preview, not_deployed_reason, not_deployed_yet
from bootstrap.planning.summary import show_plan
from bootstrap.kit.errors import EngineError, StateBucketMissing
from bootstrap.planning import render as plan_render
from bootstrap.planning.plan import Plan
from bootstrap.records.runs import start_run
from bootstrap.target import Target, open_target


def preview_all(target: Target, steps: Steps, services: Services,
                saved_plans: Optional[dict[str, str]] = None) -> list[Plan]:
    """Preview (or refresh-preview for drift) every layer in order; skipped layers carry their reason. Given
    `saved_plans`, each preview's Pulumi saved plan goes there (layer → text) for `up --plan-dir` to apply."""
    log = start_run(target.name, steps.command, {}, clock=services.clock, secret_values=target.secret_values)
    states = run_states(target)
    for name in steps.preflight:
        try:
            preflight_phase(name, target, services, log, persist=False, layers=engine_layers(steps),
                            operation=steps.command, states=states)
        except StateBucketMissing as missing:
            if steps.command != "plan":
                raise
            # The first plan of a new environment (its first pull request): an answer with the next step, not
            # a failure.
            reason = not_deployed_yet(target.name, missing.bucket)
            return [Plan(step.layer, target.name, (), skipped_reason=step.skip_reason or reason,
                         not_deployed=not step.skip_reason) for step in steps.layers]
    plans = []
    for step in steps.layers:
        reason = layer_skip_reason(target, step, services)
        if reason:
            plans.append(Plan(step.layer, target.name, (), skipped_reason=reason))
            continue
        if stack_action_for(target, services, step.layer, step.operation) == "not-deployed":
            plans.append(Plan(step.layer, target.name, (), skipped_reason=not_deployed_reason(target.name, step.layer),
                              not_deployed=True))
            continue
        save = saved_plans is not None and target.engine.supports_saved_plans()
        with console.progress(f"{step.layer}: {'refresh-preview' if step.operation == 'drift' else 'preview'}") as tick:
            plans.append(target.engine.preview(step.layer, refresh=step.operation == "drift", save_plan=save,
                                               on_progress=tick))
        text = target.engine.saved_plan(step.layer) if save else None
        if text is not None:
            _refuse_plaintext_secrets(target, step.layer, text)
            saved_plans[step.layer] = text
    return plans


def _refuse_plaintext_secrets(target: Target, layer: str, text: str) -> None:
    """Pulumi encrypts a saved plan's secret values with the stack's secrets provider (pkg/cmd/pulumi/operations/
    preview.go, pkgPlan.Write with sm.Encrypter()); a plan holding one of the run's secret values in plaintext
    anyway is never written where a pull request's artifact would carry it."""
    if any(value and value in text for value in target.secret_values()):
        raise EngineError(
            f"Pulumi's saved plan of layer '{layer}' of '{target.name}' holds one of this run's secret values in "
            "plaintext, so no plan file was written. Check that nothing passes --show-secrets to Pulumi (a "
            "PULUMI_* variable, the stack's settings), then plan again.")


def plan_live(environment: str, *, out_dir: Optional[Path] = None, json_out: bool = False, endpoint_url: Optional[str] = None, layers: Optional[list[str]] = None,
              services: Optional[Services] = None, **target_args) -> int:
    """`groundctl plan <env>` through the engine: preview every layer, write the plan files, report.

    `target_args` go to `open_target` (tests pass their engine factory and spec there)."""
    out_dir = out_dir or Path(".groundctl/plans")
    with open_target(environment, endpoint_url=endpoint_url, **target_args,
                     on_emulator=lambda url: console.info(f"Started the embedded AWS emulator at {url}.")) as target:
        steps = build_preview(target.spec, layers, emulated=target.emulated, refresh=False)
        saved_plans: dict[str, str] = {}
        plans = preview_all(target, steps, services or default_services(), saved_plans)
    from bootstrap.destinations import write_files

    written = write_files(out_dir, plan_render.plan_files(plans, saved_plans))
    not_yet = plan_render.not_deployed_yet(plans)
    if json_out:
        console.emit_json({**plan_render.combined_json(plans, saved_plans), "files": [str(f) for f in written]})
    elif not_yet:
        console.info(f"{plans[0].environment}: {not_yet}")
    else:
        for plan in plans:
            show_plan(plan)
        console.info(f"Wrote {len(written)} plan files under {out_dir}.")
    return 0
