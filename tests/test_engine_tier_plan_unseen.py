"""Engine tier: Pulumi's refusal of a plan whose resource the program no longer declares, on the real CLI.

A saved plan with steps for a resource that the program, when the plan is applied, never registers is refused by
the engine once the program has run: "expected resource operations for <urn> but none were seen"
(pkg/resource/deploy/deployment_executor.go:366-399). Under a reviewed plan the update's own preview meets it,
so nothing is applied. groundctl reports it as the refused plan it is (exit 3, re-plan), not as an engine failure.
"""

from __future__ import annotations

import pytest

from bootstrap.engine.plan_deviation import PlanDeviation
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import tier  # noqa: F401 - fixture

pytestmark = [pytest.mark.engine, requires_pulumi]

EXTRA = ('\nextra = Record("extra", f"{stack}/network/extra", {"note": "added by the pull request"}, endpoint)\n'
         'pulumi.export("extra_id", extra.id)\n')


def test_a_planned_create_the_program_no_longer_declares_is_a_refused_plan_with_nothing_applied(tier):
    assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
    program = tier.stacks / "network" / "__main__.py"
    reviewed_program = program.read_text()
    program.write_text(reviewed_program + EXTRA)  # the pull request adds a resource
    planner = tier.engine()
    plan = planner.preview("network", save_plan=True)
    extra = next(c.urn for c in plan.changes if c.name == "extra")
    assert {c.name: c.operation for c in plan.changes}["extra"] == "create"
    saved = planner.saved_plan("network")
    assert saved and extra in saved

    program.write_text(reviewed_program)  # by the time it is applied, the program no longer declares it
    before = tier.checkpoint("network")
    applier = tier.engine()  # another runner, as the merge job is
    applier.use_reviewed_plan("network", saved)
    with pytest.raises(PlanDeviation) as refused:
        applier.up("network", use_saved_plan=True)
    error = refused.value
    assert error.exit_code == 3 and error.deviation.unseen and error.deviation.urn == extra
    assert error.applied == 0 and "Nothing in network was changed" in error.message, error.message
    assert "program no longer declares it" in error.message and f"groundctl plan {tier.env_name}" in error.message
    assert tier.record(tier.record_key("network", "extra")) is None
    after = tier.checkpoint("network")
    assert [r["urn"] for r in after["checkpoint"]["latest"]["resources"]] == \
        [r["urn"] for r in before["checkpoint"]["latest"]["resources"]]
