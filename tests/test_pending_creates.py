"""What recovery does with each pending CREATE an interrupted update left (recovery/pending_creates.resolve_pending),
and the engine boundary's rule for dropping them (bootstrap/engine/pending.py). Pure."""

from __future__ import annotations

from bootstrap.engine.pending import other_pending_operations, pending_create_urns, unexpected_pending_creates
from recovery.survivors.pending_creates import CLEAR_UNCHECKED_FLAG, resolve_pending
from recovery.survivors.state_vs_live import LiveItem, PendingCreate, classify

SUBNET, TOPIC = "aws:ec2/subnet:Subnet", "aws:sns/topic:Topic"
COVERED = {SUBNET, "aws:ec2/vpc:Vpc"}


def urn(typ: str, name: str) -> str:
    return f"urn:pulumi:dev::network::{typ}::{name}"


def pending(typ: str, name: str, live_id: str | None = None) -> PendingCreate:
    return PendingCreate(urn(typ, name), typ, name, LiveItem(typ, name, live_id) if live_id else None)


def test_a_live_pending_create_adopted_under_its_urn_is_imported():
    res = resolve_pending([pending(SUBNET, "private-2", "subnet-9")], COVERED, {urn(SUBNET, "private-2")})
    [d] = res.decisions
    assert (d.action, d.import_id, d.tracked) == ("import", "subnet-9", True)
    assert res.to_drop == (urn(SUBNET, "private-2"),) and res.never_made == frozenset()


def test_a_live_pending_create_not_in_state_is_refused_even_with_the_flag():
    """Nothing is ever lost: dropping its pending create would leave the live subnet untracked."""
    for flag in (False, True):
        res = resolve_pending([pending(SUBNET, "private-2", "subnet-9")], COVERED, set(), clear_unchecked=flag)
        [d] = res.refused
        assert d.action == "refuse" and d.flag is None
        assert "subnet-9" in d.reason and f"pulumi import {SUBNET} private-2 subnet-9" in d.reason
        assert res.to_drop == ()


def test_a_dead_pending_create_of_a_covered_type_is_cleared_and_expected_as_a_create():
    res = resolve_pending([pending(SUBNET, "public-2")], COVERED, set())
    [d] = res.decisions
    assert d.action == "clear" and d.flag is None and "found nothing live" in d.reason
    assert res.never_made == {urn(SUBNET, "public-2")} and res.to_drop == (urn(SUBNET, "public-2"),)


def test_an_uncovered_pending_create_is_refused_naming_what_to_check_and_the_flag():
    res = resolve_pending([pending(TOPIC, "alerts")], COVERED, set())
    [d] = res.refused
    assert d.flag == CLEAR_UNCHECKED_FLAG and "inventory cannot see aws:sns/topic:Topic" in d.reason
    assert f"pulumi import {TOPIC} alerts <id>" in d.reason and CLEAR_UNCHECKED_FLAG in d.reason
    assert res.to_drop == ()


def test_the_flag_clears_an_uncovered_pending_create_on_the_operators_word():
    res = resolve_pending([pending(TOPIC, "alerts")], COVERED, set(), clear_unchecked=True)
    [d] = res.decisions
    assert (d.action, d.flag) == ("clear", CLEAR_UNCHECKED_FLAG)
    assert res.never_made == {urn(TOPIC, "alerts")}


def test_a_pending_create_already_tracked_as_a_resource_is_cleared_without_the_flag():
    res = resolve_pending([pending(TOPIC, "alerts")], COVERED, {urn(TOPIC, "alerts")})
    [d] = res.decisions
    assert (d.action, d.tracked) == ("clear", True) and res.never_made == frozenset()


def test_mixed_one_refusal_keeps_every_pending_create():
    """Pulumi drops pending creates all at once, so one refusal holds back the others too."""
    items = [pending(SUBNET, "private-2", "subnet-9"), pending(SUBNET, "public-2"), pending(TOPIC, "alerts")]
    res = resolve_pending(items, COVERED, {urn(SUBNET, "private-2")})
    assert [d.action for d in res.decisions] == ["import", "clear", "refuse"]
    assert res.to_drop == () and [d.urn for d in res.refused] == [urn(TOPIC, "alerts")]
    assert res.summary() == "import: private-2; clear: public-2; refuse: alerts"
    data = res.to_dict()
    assert data["imported"] == [urn(SUBNET, "private-2")] and data["cleared"] == [urn(SUBNET, "public-2")]
    assert data["refused"] == [urn(TOPIC, "alerts")]
    resolved = resolve_pending(items, COVERED, {urn(SUBNET, "private-2")}, clear_unchecked=True)
    assert resolved.to_drop == tuple(p.urn for p in items)
    assert resolved.never_made == {urn(SUBNET, "public-2"), urn(TOPIC, "alerts")}


def test_classify_then_resolve_from_a_state_and_an_inventory():
    ops = [{"type": "creating", "resource": {"urn": urn(SUBNET, "private-2"), "type": SUBNET, "custom": True}},
           {"type": "creating", "resource": {"urn": urn(SUBNET, "public-2"), "type": SUBNET, "custom": True}},
           {"type": "updating", "resource": {"urn": urn(SUBNET, "private-0"), "type": SUBNET, "custom": True}}]
    live = [LiveItem(SUBNET, "private-2", "subnet-9", "arn:s9")]
    cls = classify([], live, ops, COVERED)
    res = resolve_pending(cls.pending_creates, COVERED, {urn(SUBNET, "private-2")})
    assert [(d.urn.rsplit("::", 1)[1], d.action) for d in res.decisions] == [("private-2", "import"),
                                                                            ("public-2", "clear")]


def test_the_engine_drops_only_pending_creates_it_was_told_about():
    dep = {"pending_operations": [
        {"type": "creating", "resource": {"urn": "u1"}}, {"type": "deleting", "resource": {"urn": "u2"}},
        {"type": "creating", "resource": {"urn": "u3"}}, "junk", {"type": "creating"}]}
    assert pending_create_urns(dep) == ["u1", "u3"]
    assert unexpected_pending_creates(dep, ["u1"]) == ["u3"]
    assert unexpected_pending_creates(dep, ["u1", "u3", "gone"]) == []
    assert pending_create_urns({}) == []


def test_pending_operations_that_are_not_creates_are_named_for_the_refusal():
    dep = {"pending_operations": [
        {"type": "creating", "resource": {"urn": "u1"}}, {"type": "deleting", "resource": {"urn": "u2"}},
        {"type": "updating", "resource": {"urn": "u3"}}, "junk", {"type": "reading"}]}
    assert other_pending_operations(dep) == [("deleting", "u2"), ("updating", "u3"), ("reading", "(no resource)")]
    assert other_pending_operations({"pending_operations": [{"type": "creating", "resource": {"urn": "u1"}}]}) == []
