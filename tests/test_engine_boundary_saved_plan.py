"""What is applied is what was approved: `up --plan` with the plan the gated preview saved, or, on a CLI
without update plans, a re-preview under the lock whose fingerprint must match. The run record says which.

Pulumi writes the plan at `preview --save-plan` (pkg/cmd/pulumi/operations/preview.go, pkgPlan.Write) and
`up --plan` reads it into the engine's constraints (pkg/cmd/pulumi/operations/up.go, opts.Engine.Plan);
both since CLI v3.24.0 (changelog/v3.24.0.md).
"""

from __future__ import annotations

import os

import pytest

from bootstrap.engine.plan_deviation import PlanDeviation
from bootstrap.kit.errors import Refused
from tests.boundary_helpers import file_engine, write_program
from tests.conftest import requires_pulumi
from tests.fakes.engine import FakeResource
from tests.test_orchestrator import ops, up, world  # noqa: F401 - the fixture


def test_the_apply_is_constrained_by_the_plan_the_gated_preview_saved(world):  # noqa: F811
    engine, open_, clock = world
    outcome, stored, _ = up(open_, clock, yes=True)
    assert outcome.error is None
    assert [layer for layer, _ in engine.up_plans] == ["backend", "network", "cluster"]
    applied = {lay["layer"]: lay.get("applied_with") for lay in stored["layers"]}
    assert applied == {"backend": "saved-plan", "network": "saved-plan", "cluster": "saved-plan", "flux": None}


def test_a_change_after_the_gate_makes_the_constrained_apply_fail(world):  # noqa: F811
    engine, open_, clock = world

    def change_after_the_gate(op, layer):
        if (op, layer) == ("up", "network"):
            engine.desired["network"].append(FakeResource("aws:ec2/subnet:Subnet", "sneaked-in", {"name": "x"}))
    engine.on_call = change_after_the_gate
    outcome, stored, _ = up(open_, clock, yes=True)
    assert isinstance(outcome.error, PlanDeviation) and outcome.exit_code == 3
    assert "refused it at sneaked-in (urn:pulumi:local::network::aws:ec2/subnet:Subnet::sneaked-in)" in \
        outcome.error.message and "Run `groundctl up local` again" in outcome.error.message
    assert stored["stopped_at"] == "network/up"
    assert not any(r.name == "sneaked-in" for r in engine.state.get("network", []))


def test_without_saved_plans_a_fresh_preview_must_match_the_approved_one(world):  # noqa: F811
    engine, open_, clock = world
    engine.saved_plans_supported = False
    outcome, stored, _ = up(open_, clock, yes=True, layers=["backend", "network"])
    assert outcome.error is None
    assert {lay["layer"]: lay["applied_with"] for lay in stored["layers"]} == {
        "backend": "re-preview", "network": "re-preview"}
    network = next(lay for lay in stored["layers"] if lay["layer"] == "network")
    assert [p["name"] for p in network["phases"]] == ["stack", "setup-gate", "create", "preview", "gate", "re-preview",
                                                      "up", "ledger", "contract"]

    answers = []

    def confirm(question):  # the operator approves the plan, and meanwhile someone changes the program
        if question.startswith("Apply"):  # not the setup gate of the new stack, before any preview
            engine.desired["cluster"].append(FakeResource("aws:iam/role:Role", "late-role", {"name": "late"}))
        answers.append(question)
        return True

    from tests.test_orchestrator import services
    from bootstrap.apply.layer_up import UpOptions
    from bootstrap.apply.runner import run
    from bootstrap.apply.steps import build_up

    svc = services(clock)
    svc.confirm = confirm
    with open_() as target:
        outcome = run(target, build_up(target.spec, ["cluster"], emulated=True), svc, UpOptions())
    assert answers and isinstance(outcome.error, Refused) and "differs from the approved one" in outcome.error.message
    assert ("up", "cluster") not in ops(engine, "up")


# -- the product engine against the real CLI ---------------------------------------------------------------

PROGRAM = '''
    import pulumi

    class Thing(pulumi.ComponentResource):
        def __init__(self, name):
            super().__init__("groundctl:test:Thing", name, {}, None)
            self.register_outputs({})

    for i in range(int(pulumi.Config("test").get("count") or "1")):
        Thing(f"thing-{i}")
'''


@pytest.mark.engine
@requires_pulumi
def test_pulumi_applies_only_what_the_saved_plan_allows(tmp_path, monkeypatch):
    write_program(tmp_path / "stacks", "network", PROGRAM)
    engine = file_engine(tmp_path, monkeypatch)
    assert engine.supports_saved_plans()
    engine.create_stack("network")
    plan = engine.preview("network", save_plan=True)
    folder = engine._saved_plans["network"]
    assert os.path.isfile(os.path.join(folder, "network.plan.json")) and oct(os.stat(folder).st_mode)[-3:] == "700"
    assert engine.up("network", use_saved_plan=True).counts.get("create") == plan.counts["create"]
    assert not os.path.exists(folder)  # removed after the apply

    engine.preview("network", save_plan=True)
    engine.set_config("network", "test:count", "2")  # changed after the approval
    with pytest.raises(PlanDeviation) as raised:
        engine.up("network", use_saved_plan=True)
    # Pulumi's own constraint check refused it ("create is not allowed by the plan"), naming the resource
    assert raised.value.deviation.operation and raised.value.deviation.urn.endswith("::thing-1")
    assert "network" not in engine._saved_plans
    assert [c.name for c in engine.preview("network").changes if c.operation == "create"] == ["thing-1"]
