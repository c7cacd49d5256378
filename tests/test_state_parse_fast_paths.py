"""The parser's fast paths (recovery/state/state_parse.py): it pauses the cyclic garbage collector while a state is
decoded and always leaves it as it found it, whatever the threads or the outcome; and a resource built
on the fast path is the one the field-by-field path builds."""

from __future__ import annotations

import gc
import threading

import pytest

from recovery.state.state_bytes import NotAState
from recovery.state.state_parse import parse_state
from tests.test_state_integrity import build_state


def test_parsing_leaves_the_collector_on_and_a_caller_s_pause_in_place():
    assert gc.isenabled()
    parse_state(build_state())
    assert gc.isenabled()
    gc.disable()
    try:
        parse_state(build_state())
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_collector_is_paused_while_the_json_is_decoded(monkeypatch):
    import recovery.state.state_parse as state

    seen = []
    real = state.load_json
    monkeypatch.setattr(state, "load_json", lambda *a, **k: (seen.append(gc.isenabled()), real(*a, **k))[1])
    parse_state(build_state())
    assert seen == [False] and gc.isenabled()


def test_threads_parsing_side_by_side_leave_the_collector_on():
    data = build_state()
    errors: list[BaseException] = []

    def work():
        try:
            for _ in range(20):
                parse_state(data)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and gc.isenabled()


@pytest.mark.parametrize("raw", [b'{"version": 3, "checkpoint": [1]}', b"{not json", b"[" * 5000])
def test_a_failed_parse_leaves_the_collector_on(raw):
    with pytest.raises(NotAState):
        parse_state(raw)
    assert gc.isenabled()


# -- the fast resource path and the field-by-field one agree ---------------------------------------

_RESOURCES = [
    {"urn": "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", "type": "pulumi:pulumi:Stack", "custom": False,
     "outputs": {"groundctl_lineage": "L"}},
    {"urn": "urn:pulumi:dev::p::aws:ec2/vpc:Vpc::v", "type": "aws:ec2/vpc:Vpc", "id": "vpc-1", "custom": True,
     "parent": "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev", "provider": "urn:x::id", "protect": True,
     "dependencies": ["a", "b"], "propertyDependencies": {"x": ["a"], "y": None, "z": []},
     "deletedWith": "a", "replaceWith": ["b"], "delete": False, "pendingReplacement": True,
     "inputs": {"cidr": "10.0.0.0/16"}, "outputs": {"id": "vpc-1", "nested": {"k": [1, 2]}}},
    {"urn": "urn:pulumi:dev::p::aws:s3/bucket:Bucket::b", "type": "aws:s3/bucket:Bucket", "delete": True,
     "id": None, "parent": None, "dependencies": None, "propertyDependencies": None, "outputs": None},
    {},
    {"urn": "urn:pulumi:dev::p::t:m:T::wrong", "type": "t:m:T", "custom": "yes", "dependencies": "a"},
    {"urn": "urn:pulumi:dev::p::t:m:T::wrong2", "type": 7, "propertyDependencies": {"x": [1]}, "outputs": []},
]


def _resources(raw: bytes):
    doc = parse_state(raw)
    return [(r, r.outputs) for r in doc.resources], doc.schema_findings


def test_the_fast_resource_path_builds_what_the_field_by_field_path_does(monkeypatch):
    import recovery.state.state_parse as state

    raw = build_state(_RESOURCES)
    fast = _resources(raw)
    monkeypatch.setattr(state, "_fast_resource", lambda raw, index: None)
    slow = _resources(raw)
    assert fast == slow
    assert [r.malformed for r, _ in fast[0]][-2:] == [frozenset({"custom", "dependencies"}),
                                                      frozenset({"type", "propertyDependencies", "outputs"})]
