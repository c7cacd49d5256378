"""The gate's decisions, as pure functions over plans."""

from __future__ import annotations

import pytest

from bootstrap.apply import gate
from bootstrap.kit.errors import BadInput, Refused
from bootstrap.planning.plan import Plan, ResourceChange


def _plan(*changes: tuple[str, str, bool], layer: str = "network", env: str = "dev") -> Plan:
    return Plan(layer, env, tuple(
        ResourceChange(f"urn:pulumi:{env}::{layer}::aws:ec2/subnet:Subnet::{name}", "aws:ec2/subnet:Subnet", op,
                       ("cidrBlock",) if op == "update" else (), protected)
        for name, op, protected in changes))


CREATE = _plan(("a", "create", False), ("b", "same", False))
DELETE = _plan(("a", "delete", False))
REPLACE = _plan(("a", "replace", False))
PROTECTED_DELETE = _plan(("a", "delete", True))
NOTHING = _plan(("a", "same", False))


def test_no_changes_pass_without_any_flag():
    assert gate.decide_apply(NOTHING, yes=False, allow_destroy=False).outcome == "approved"


def test_skipped_layer_is_skipped_with_its_reason():
    plan = Plan("flux", "local", (), skipped_reason="no Kubernetes API")
    d = gate.decide_apply(plan, yes=True, allow_destroy=True)
    assert (d.outcome, d.reason) == ("skip", "no Kubernetes API")


def test_creates_ask_interactively_and_yes_approves():
    d = gate.decide_apply(CREATE, yes=False, allow_destroy=False)
    assert d.outcome == "ask" and "Apply network to dev: 1 create" in d.reason
    assert gate.decide_apply(CREATE, yes=True, allow_destroy=False).outcome == "approved"


def test_interactive_answer_decides():
    asked = gate.decide_apply(CREATE, yes=False, allow_destroy=False)
    assert gate.after_confirm(asked, True).outcome == "approved"
    no = gate.after_confirm(asked, False)
    assert no.outcome == "refused" and no.flag == "--yes"
    assert isinstance(no.refusal("network"), Refused)


@pytest.mark.parametrize("plan", [DELETE, REPLACE])
def test_destructive_needs_allow_destroy_even_with_yes_or_interactively(plan):
    for yes in (True, False):
        d = gate.decide_apply(plan, yes=yes, allow_destroy=False)
        assert d.outcome == "refused" and d.flag == "--allow-destroy"
    assert gate.decide_apply(plan, yes=True, allow_destroy=True).outcome == "approved"
    assert gate.decide_apply(plan, yes=False, allow_destroy=True).outcome == "ask"


def test_protected_deletion_is_never_approved():
    for yes in (True, False):
        for allow in (True, False):
            d = gate.decide_apply(PROTECTED_DELETE, yes=yes, allow_destroy=allow)
            assert d.outcome == "refused" and d.flag is None and "never deleted" in d.reason


def test_backend_creation_is_risky_but_approvable_with_yes():
    plan = _plan(("bucket", "create", True), layer="backend")
    assert plan.risky  # listed first in the question and the plan files
    assert gate.decide_apply(plan, yes=True, allow_destroy=False).outcome == "approved"
    assert "risky" in gate.decide_apply(plan, yes=False, allow_destroy=False).reason


def test_destroy_rules():
    with pytest.raises(Refused, match="--i-mean-production"):
        gate.check_destroy_allowed("prod", True, i_mean_production=False)
    gate.check_destroy_allowed("prod", True, i_mean_production=True)
    gate.check_destroy_allowed("dev", False, i_mean_production=False)
    all_layers = ["backend", "network", "cluster", "flux"]
    assert gate.destroy_layers(all_layers, include_backend=False, explicit=False) == ["flux", "cluster", "network"]
    assert gate.destroy_layers(all_layers, include_backend=True, explicit=False) == list(reversed(all_layers))
    with pytest.raises(Refused, match="--include-backend"):
        gate.destroy_layers(["backend"], include_backend=False, explicit=True)
    assert gate.decide_destroy("dev", ["flux"], yes=False).outcome == "ask"
    assert gate.after_destroy_confirm(gate.decide_destroy("dev", ["flux"], yes=False), False).outcome == "refused"


def _reviewed(plan: Plan) -> dict:
    """The plan file `groundctl plan` writes, naming the layer's Pulumi saved plan."""
    from bootstrap.planning.render import plan_json

    return plan_json(plan, {plan.layer: '{"resourcePlans": {}}'})


def test_stale_plan_is_refused_and_fresh_one_passes():
    approved = gate.approved_from_documents({"network.json": _reviewed(CREATE)}, "dev")
    assert approved["network"].saved_plan[0] == "pulumi-plan-dev-network.json"
    assert gate.check_fresh(approved, CREATE, "plans") is None
    changed = _plan(("a", "create", False), ("c", "create", False))
    refusal = gate.check_fresh(approved, changed, "plans")
    assert refusal.outcome == "refused" and "stale" in refusal.reason
    assert CREATE.fingerprint[:12] in refusal.reason and changed.fingerprint[:12] in refusal.reason


def test_a_plan_without_a_saved_plan_approves_no_change_and_a_mangled_reference_is_refused():
    older = gate.approved_from_documents({"network.json": CREATE.to_dict()}, "dev")
    refusal = gate.check_fresh(older, CREATE, "plans")
    assert refusal.outcome == "refused" and "carries no Pulumi saved plan of the network layer" in refusal.reason
    unchanged = _plan(("a", "same", False))
    assert gate.check_fresh(gate.approved_from_documents({"n.json": unchanged.to_dict()}, "dev"), unchanged,
                            "plans") is None  # nothing to apply, nothing to hold to a saved plan
    for ref in ({"file": "../../etc/passwd", "sha256": "0" * 64}, {"file": "pulumi-plan-dev-network.json"}, "x"):
        with pytest.raises(BadInput, match="saved_plan"):
            gate.approved_from_documents({"network.json": {**_reviewed(CREATE), "saved_plan": ref}}, "dev")
    other = {**_reviewed(CREATE), "saved_plan": {"file": "pulumi-plan-dev-network.json", "sha256": "f" * 64}}
    with pytest.raises(BadInput, match="different plans"):
        gate.approved_from_documents({"a.json": _reviewed(CREATE), "b.json": other}, "dev")


def test_layer_without_approved_plan_is_refused_only_when_it_has_changes():
    approved = gate.approved_from_documents({"network.json": CREATE.to_dict()}, "dev")
    cluster_changes = _plan(("x", "create", False), layer="cluster")
    assert gate.check_fresh(approved, cluster_changes, "plans").outcome == "refused"
    assert gate.check_fresh(approved, _plan(("x", "same", False), layer="cluster"), "plans") is None


def test_plan_documents_in_every_shape_and_edited_files_refused():
    combined = {"environment": "dev", "plans": [CREATE.to_dict(), _plan(layer="cluster").to_dict()]}
    got = gate.approved_from_documents({"plan.json": combined, "network.json": CREATE.to_dict()}, "dev")
    assert sorted(got) == ["cluster", "network"]
    assert gate.approved_from_documents({"plan.json": combined}, "other-env") == {}
    offline = {"environment": "dev", "layers": [{"layer": "network", "resources": 12}]}
    mixed = {"plan-dev.json": offline, "n.json": CREATE.to_dict()}
    assert gate.approved_from_documents(mixed, "dev").keys() == {"network"}
    edited = CREATE.to_dict()
    edited["changes"][0]["operation"] = "update"
    with pytest.raises(BadInput, match="edited"):
        gate.approved_from_documents({"network.json": edited}, "dev")
    with pytest.raises(BadInput, match="different plans"):
        gate.approved_from_documents({"a.json": CREATE.to_dict(), "b.json": DELETE.to_dict()}, "dev")


def test_the_setup_gate_comes_before_the_writes_a_preview_needs():
    from bootstrap.apply.gate import after_confirm, decide_setup

    what = "create the empty Pulumi stack organization/network/dev"
    assert decide_setup("network", "dev", what, yes=True, plan_dir=None).outcome == "approved"
    ask = decide_setup("network", "dev", what, yes=False, plan_dir=None)
    assert ask.outcome == "ask" and what in ask.reason
    assert after_confirm(ask, False).outcome == "refused"
    # No reviewed plan can cover what happens before the first preview, --yes or not.
    refused = decide_setup("network", "dev", what, yes=True, plan_dir="plans")
    assert refused.outcome == "refused" and "without --plan-dir" in refused.reason
    assert "groundctl up dev --layers network" in refused.refusal("network").message
