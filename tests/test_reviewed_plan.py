"""`up --plan-dir` applies what was reviewed: the Pulumi saved plan the reviewed preview wrote travels in the plan
folder beside the plan files, and the apply is held to it, so a new value of a field the reviewer saw changing is
refused (exit 3, naming the resource and the field, nothing applied) where the fingerprint of (URN, operation, field
names) alone would pass it. The in-memory engine plays Pulumi's check; test_engine_tier_reviewed_plan.py runs it on
the real CLI."""

from __future__ import annotations

import json

from bootstrap.apply.preview import plan_live
from bootstrap.engine.plan_deviation import PlanDeviation, find_deviation
from bootstrap.kit.errors import BadInput, Refused
from tests.test_orchestrator import ops, services, up, world  # noqa: F401 - the fixture


def _vpc(engine):
    return next(r for r in engine.desired["network"] if r.type == "aws:ec2/vpc:Vpc")


def _reviewed(world, tmp_path, local_spec, cidr: str):
    """Deployed, then a pull request sets the VPC's CIDR to `cidr` and its plan is written to plans/."""
    engine, open_, clock = world
    assert up(open_, clock, yes=True)[0].error is None
    _vpc(engine).inputs["cidr"] = cidr
    code = plan_live("local", out_dir=tmp_path / "plans", services=services(clock), spec=local_spec, environ={},
                     engine_factory=lambda ctx: engine, engine_check=lambda: None)
    assert code == 0
    return tmp_path / "plans"


def test_the_plan_folder_carries_each_layers_saved_plan_bound_by_its_digest(world, tmp_path, local_spec):
    import hashlib

    plans = _reviewed(world, tmp_path, local_spec, "10.1.0.0/16")
    layer = json.loads((plans / "plan-local-network.json").read_text())
    saved = plans / "pulumi-plan-local-network.json"
    assert layer["saved_plan"] == {"file": saved.name, "sha256": hashlib.sha256(saved.read_bytes()).hexdigest()}
    combined = json.loads((plans / "plan-local-live.json").read_text())
    assert {lay["layer"]: lay.get("saved_plan", {}).get("file") for lay in combined["layers"]}["network"] == saved.name
    assert "10.1.0.0/16" not in saved.read_text()  # the fake keeps digests, as Pulumi keeps secrets encrypted


def test_an_unchanged_reviewed_plan_applies_held_to_its_saved_plan(world, tmp_path, local_spec):
    engine, open_, clock = world
    plans = _reviewed(world, tmp_path, local_spec, "10.1.0.0/16")
    outcome, stored, _ = up(open_, clock, yes=True, plan_dir=plans)
    assert outcome.error is None, outcome.error
    network = next(lay for lay in stored["layers"] if lay["layer"] == "network")
    assert network["achieved"] == "applied" and network["applied_with"] == "reviewed-plan"
    assert ("use_reviewed_plan", "network") in engine.calls
    assert next(r for r in engine.state["network"] if r.name == _vpc(engine).name).inputs["cidr"] == "10.1.0.0/16"


def test_a_new_value_of_the_reviewed_field_is_refused_naming_resource_and_field(world, tmp_path, local_spec):
    engine, open_, clock = world
    plans = _reviewed(world, tmp_path, local_spec, "10.1.0.0/16")
    _vpc(engine).inputs["cidr"] = "10.66.0.0/16"  # same resource, same field, another value: same fingerprint
    before = [(r.name, dict(r.inputs)) for r in engine.state["network"]]
    outcome, stored, _ = up(open_, clock, yes=True, plan_dir=plans)
    assert isinstance(outcome.error, PlanDeviation) and outcome.exit_code == 3
    message = outcome.error.message
    assert f"refused it at {_vpc(engine).name} (urn:pulumi:local::network::aws:ec2/vpc:Vpc::" in message
    assert "a value of cidr other than the approved plan's" in message and "Nothing in network was changed" in message
    assert "10.66" not in message and "10.1." not in message  # never a value: it may be a secret
    assert stored["stopped_at"] == "network/up"
    assert [(r.name, r.inputs) for r in engine.state["network"]] == before


def test_a_saved_plan_that_is_not_the_one_the_plan_file_names_is_refused_before_anything(world, tmp_path, local_spec):
    engine, open_, clock = world
    plans = _reviewed(world, tmp_path, local_spec, "10.1.0.0/16")
    saved = plans / "pulumi-plan-local-network.json"
    saved.write_text(saved.read_text().replace('"update"', '"same"'))
    calls = len(engine.calls)
    outcome, _, _ = up(open_, clock, yes=True, plan_dir=plans)
    assert isinstance(outcome.error, BadInput) and outcome.exit_code == 2
    assert "sha256" in outcome.error.message and str(saved) in outcome.error.message
    assert not [c for c in engine.calls[calls:] if c[0] in ("preview", "up")]
    saved.unlink()
    outcome, _, _ = up(open_, clock, yes=True, plan_dir=plans)
    assert isinstance(outcome.error, BadInput) and "cannot be read" in outcome.error.message


def test_a_plan_folder_without_saved_plans_applies_no_change(world, tmp_path, local_spec):
    engine, open_, clock = world
    plans = _reviewed(world, tmp_path, local_spec, "10.1.0.0/16")
    for path in plans.glob("plan-local-*.json"):  # as an older groundctl wrote them
        doc = json.loads(path.read_text())
        for item in [doc, *doc.get("layers", [])]:
            item.pop("saved_plan", None)
        path.write_text(json.dumps(doc))
    outcome, stored, _ = up(open_, clock, yes=True, plan_dir=plans)
    assert isinstance(outcome.error, Refused) and "carries no Pulumi saved plan of the network layer" in \
        outcome.error.message
    assert stored["stopped_at"] == "network/gate" and ("up", "network") not in ops(engine, "up")[3:]


# -- reading Pulumi's refusal (pkg/resource/deploy/plan.go, step_generator.go) ------------------------------------

URN = "urn:pulumi:test::test::pkgA:m:typA::resA"


def test_the_resource_and_the_fields_the_engine_diff_knows_are_read_from_pulumis_message():
    text = f"resource {URN} violates plan: properties changed: +-baz[{{map[a:{{42}}]}}], ~~frob[{{new}}!={{other}}]"
    found = find_deviation([(URN, text)], "", {URN: ("frob", "baz")})
    assert found.urn == URN and found.fields == ("baz", "frob") and not found.operation


def test_a_name_inside_a_quoted_value_is_never_taken_for_a_field():
    # A secret is printed in plaintext in Pulumi's message; a fragment shaped like a field must not come out.
    text = f"resource {URN} violates plan: properties changed: ~~token[{{&{{{{s3cr, ~~et[x}}}}}}!={{y}}]"
    found = find_deviation([], f"error: {text}\n", {URN: ("token",)})
    assert found.urn == URN and found.fields == ("token",)
    assert find_deviation([], text, {}).fields == ()


def test_an_operation_the_plan_did_not_have_is_named_by_the_diagnostics_urn():
    found = find_deviation([(URN, "create is not allowed by the plan: no steps were expected for this resource")],
                           "", {})
    assert found.urn == URN and found.operation
    assert find_deviation([(URN, "error: provider said no")], "update failed", {}) is None


def test_a_planned_resource_the_program_no_longer_declares_is_a_refused_plan():
    # deployment_executor.go:366-399: reported once the program has run, as a diagnostic on the URN and in the error.
    text = f"expected resource operations for {URN} but none were seen"
    for found in (find_deviation([(URN, text)], "", {}), find_deviation([], f"error: {text}\n", {})):
        assert found.urn == URN and found.unseen and not found.operation and found.fields == ()
    refusal = PlanDeviation("dev", "network", find_deviation([], text, {}))
    assert refusal.exit_code == 3 and "program no longer declares it" in refusal.message
    assert "Nothing in network was changed" in refusal.message
