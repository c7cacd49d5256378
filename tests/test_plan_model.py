"""bootstrap/planning/plan.py: counts, risk reasons and the fingerprint that detects a stale plan."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from bootstrap.planning.plan import Plan, ResourceChange, risk_reason


def rc(name, op, rtype="aws:ec2/subnet:Subnet", keys=(), protected=False, layer="network"):
    return ResourceChange(f"urn:pulumi:dev::{layer}::{rtype}::{name}", rtype, op, tuple(keys), protected)


BASE = (rc("a", "create"), rc("b", "update", keys=("tags", "cidrBlock")), rc("c", "same"), rc("d", "delete"))


def test_counts_and_has_changes():
    plan = Plan("network", "dev", BASE)
    assert plan.counts == {"create": 1, "delete": 1, "same": 1, "update": 1}
    assert plan.has_changes
    assert not Plan("network", "dev", (rc("c", "same"), rc("r", "read"))).has_changes


def test_fingerprint_ignores_order_and_unchanged_resources():
    shuffled = list(BASE)
    random.Random(7).shuffle(shuffled)
    a = Plan("network", "dev", BASE)
    assert a.fingerprint == Plan("network", "dev", tuple(shuffled)).fingerprint
    without_same = tuple(c for c in BASE if c.operation != "same")
    assert a.fingerprint == Plan("network", "dev", without_same).fingerprint
    keys_reordered = tuple(rc("b", "update", keys=("cidrBlock", "tags")) if c.name == "b" else c for c in BASE)
    assert a.fingerprint == Plan("network", "dev", keys_reordered).fingerprint


def test_fingerprint_changes_with_diff_keys_operation_or_urn():
    a = Plan("network", "dev", BASE).fingerprint
    more_keys = tuple(rc("b", "update", keys=("tags", "cidrBlock", "vpcId")) if c.name == "b" else c for c in BASE)
    other_op = tuple(rc("d", "replace") if c.name == "d" else c for c in BASE)
    other_urn = tuple(rc("a2", "create") if c.name == "a" else c for c in BASE)
    prints = {a} | {Plan("network", "dev", t).fingerprint for t in (more_keys, other_op, other_urn)}
    assert len(prints) == 4


@given(st.permutations(list(BASE)))
def test_fingerprint_is_order_independent_for_any_permutation(perm):
    assert Plan("network", "dev", tuple(perm)).fingerprint == Plan("network", "dev", BASE).fingerprint


def test_risk_reasons():
    assert risk_reason(rc("a", "create"), "network") is None
    assert risk_reason(rc("a", "same", protected=True), "network") is None
    assert "goes away" in risk_reason(rc("d", "delete"), "network")
    assert "stateful" in risk_reason(rc("v", "replace", rtype="aws:ec2/vpc:Vpc"), "network")
    assert "protected" in risk_reason(rc("k", "delete", protected=True), "network")
    assert "protected" in risk_reason(rc("k", "update", protected=True), "network")
    assert "state backend" in risk_reason(rc("b", "update", layer="backend"), "backend")


def test_risky_lists_every_risky_change_with_its_reason():
    plan = Plan("network", "dev", BASE + (rc("p", "update", protected=True),))
    assert sorted(c.name for c, _ in plan.risky) == ["d", "p"]
    assert all(reason for _, reason in plan.risky)


def test_round_trip_through_dict():
    plan = Plan("network", "dev", BASE + (rc("p", "update", keys=("x",), protected=True),), None)
    back = Plan.from_dict(plan.to_dict())
    assert back == plan and back.fingerprint == plan.fingerprint
    skipped = Plan("flux", "local", (), "no Kubernetes API")
    assert Plan.from_dict(skipped.to_dict()).skipped_reason == "no Kubernetes API"
