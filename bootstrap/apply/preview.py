"""The previews: `plan` (a preview of every layer, written as plan files) and `drift` (a refresh-preview),
which change nothing and so keep their run record in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from bootstrap import console
from bootstrap.apply.layer_stack import layer_skip_reason, stack_action_for
from bootstrap.apply.preflight import engine_layers, preflight_phase, run_states
from bootstrap.apply.services import Services, default_services
from bootstrap.apply.steps import Steps, build_preview, not_deployed_reason
from bootstrap.apply.summary import show_plan
from bootstrap.planning import render as plan_render
from bootstrap.planning.plan import Plan
from bootstrap.records.runs import start_run
from bootstrap.target import Target, open_target


def preview_all(target: Target, steps: Steps, services: Services) -> list[Plan]:
    """Preview (or refresh-preview for drift) every layer in order; skipped layers carry their reason."""
    log = start_run(target.name, steps.command, {}, clock=services.clock, secret_values=target.secret_values)
    states = run_states(target)
    for name in steps.preflight:
        preflight_phase(name, target, services, log, persist=False, layers=engine_layers(steps),
                        operation=steps.command, states=states)
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
        with console.progress(f"{step.layer}: {'refresh-preview' if step.operation == 'drift' else 'preview'}") as tick:
            plans.append(target.engine.preview(step.layer, refresh=step.operation == "drift", on_progress=tick))
    return plans


def plan_live(environment: str, *, out_dir: Optional[Path] = None, json_out: bool = False, endpoint_url: Optional[str] = None, layers: Optional[list[str]] = None,
              services: Optional[Services] = None, **target_args) -> int:
    """`groundctl plan <env>` through the engine: preview every layer, write the plan files, report.

    `target_args` go to `open_target` (tests pass their engine factory and spec there)."""
    out_dir = out_dir or Path(".groundctl/plans")
    with open_target(environment, endpoint_url=endpoint_url, **target_args,
                     on_emulator=lambda url: console.info(f"Started the embedded AWS emulator at {url}.")) as target:
        steps = build_preview(target.spec, layers, emulated=target.emulated, refresh=False)
        plans = preview_all(target, steps, services or default_services())
    from bootstrap.destinations import write_files

    written = write_files(out_dir, plan_render.plan_files(plans))
    if json_out:
        console.emit_json({**plan_render.combined_json(plans), "files": [str(f) for f in written]})
    else:
        for plan in plans:
            show_plan(plan)
        console.info(f"Wrote {len(written)} plan files under {out_dir}.")
    return 0
