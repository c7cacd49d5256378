"""Hostile input: generated damaged and malicious state files never produce a traceback.

Each generated file must end one of two ways: `NotAState` (the typed refusal, exit 2) or a parsed
document with a findings list, and the `state inspect` report of it must serialise. Anything else
(KeyError, TypeError, RecursionError, UnicodeEncodeError…) fails the test.
"""

from __future__ import annotations

import copy
import gzip
import json

import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groundctl.state import inspect_report, printable
from recovery.lineage.integrity import verify_integrity
from recovery.state.state_bytes import NotAState
from recovery.state.state_model import Finding
from recovery.state.state_parse import parse_state
from tests.conftest import STATES
from tests.test_state_integrity import base_resources, build_state

BASES = [
    json.loads(build_state()),
    json.loads(build_state(export=True)),
    json.loads((STATES / "aws-subnet-group.json").read_bytes()),
    json.loads((STATES / "checkpoint-v1.json").read_bytes()),
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
FIELDS = ["urn", "type", "id", "custom", "parent", "provider", "dependencies", "propertyDependencies",
          "deletedWith", "delete", "protect", "pendingReplacement", "outputs"]


def _resources(doc: dict) -> list | None:
    cp = doc.get("checkpoint")
    body = (cp.get("latest") if isinstance(cp, dict) else None) if "checkpoint" in doc else doc.get("deployment")
    if isinstance(body, dict) and isinstance(body.get("resources"), list):
        return body["resources"]
    return None


@st.composite
def mutated_documents(draw) -> bytes:
    doc = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        rs = _resources(doc)
        op = draw(st.sampled_from(["field", "drop", "dup", "swap", "ref", "huge", "top", "deep", "resource"]))
        if rs and op in ("field", "drop", "dup", "swap", "ref", "huge", "resource"):
            i = draw(st.integers(0, len(rs) - 1))
            r = rs[i]
            if op == "resource":
                rs[i] = draw(json_values)
            elif not isinstance(r, dict):
                continue
            elif op == "field":
                r[draw(st.sampled_from(FIELDS))] = draw(json_values)
            elif op == "drop":
                r.pop(draw(st.sampled_from(FIELDS)), None)
            elif op == "dup":
                rs.insert(draw(st.integers(0, len(rs))), copy.deepcopy(r))
            elif op == "swap":
                j = draw(st.integers(0, len(rs) - 1))
                rs[i], rs[j] = rs[j], rs[i]
            elif op == "ref":  # cycles, self references, dangling references
                target = rs[draw(st.integers(0, len(rs) - 1))]
                target_urn = target.get("urn") if isinstance(target, dict) else None
                value = draw(st.sampled_from([target_urn, r.get("urn"), "urn:pulumi:x::y::z:z:Z::gone", "::"]))
                key = draw(st.sampled_from(["parent", "dependencies", "deletedWith", "provider"]))
                r[key] = [value] if key == "dependencies" else value
            elif op == "huge":
                r[draw(st.sampled_from(["urn", "type", "id"]))] = "x" * draw(st.integers(10_000, 300_000))
        elif op == "top":
            doc[draw(st.sampled_from(["version", "checkpoint", "deployment", "latest"]))] = draw(json_values)
        elif op == "deep":
            doc["nested"] = "__DEEP__"  # spliced in below: too deep for json.dumps itself
    return json.dumps(doc).encode().replace(b'"__DEEP__"', b"[" * 3000 + b"]" * 3000)


def _truncated(data: bytes, cut: int) -> bytes:
    return data[: cut % max(len(data), 1)]


hostile_bytes = st.one_of(
    mutated_documents(),
    st.binary(max_size=2000),
    st.binary(max_size=500).map(gzip.compress),
    st.binary(max_size=500).map(lambda b: zstandard.ZstdCompressor().compress(b)),
    st.tuples(mutated_documents(), st.integers(0, 10**6)).map(lambda t: _truncated(t[0], t[1])),
    st.tuples(mutated_documents(), st.integers(0, 10**6)).map(lambda t: gzip.compress(t[0])[: t[1] % 400 + 1]),
    mutated_documents().map(gzip.compress),
    st.integers(1, 200_000).map(lambda n: b"[" * n),
    st.text(max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass")),
)


def _judge(raw: bytes) -> str:
    try:
        doc = parse_state(raw, "hostile.json")
    except NotAState as exc:
        assert exc.exit_code == 2 and exc.message
        return "not-a-state"
    findings = verify_integrity(doc, "organization/network/dev")
    assert isinstance(findings, tuple) and all(isinstance(f, Finding) for f in findings)
    report = inspect_report("hostile.json", doc, findings)
    json.dumps(report)
    for f in findings:
        printable(f.message).encode("utf-8")
    for p in doc.pending_operations:
        printable(p.meaning)
    return "findings" if findings else "integral"


def test_generated_hostile_files_never_raise_anything_untyped():
    outcomes: list[str] = []

    @settings(max_examples=260, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(hostile_bytes)
    def run(raw):
        outcomes.append(_judge(raw))

    run()
    assert len(outcomes) >= 200
    # Both outcomes occur: the generator really exercises the parser and the rules.
    assert outcomes.count("not-a-state") > 20 and outcomes.count("findings") > 20


def test_damage_to_an_integral_state_is_always_found():
    """A property of the rules: move any resource before something it refers to, and it is reported."""
    rs = base_resources()
    for i in range(1, len(rs)):
        for j in range(i):
            moved = rs[:j] + [rs[i]] + rs[j:i] + rs[i + 1:]
            refers = {rs[i].get("parent"), rs[i].get("deletedWith"), *rs[i].get("dependencies", []),
                      (rs[i].get("provider") or "").rsplit("::", 1)[0]}
            jumped = {r["urn"] for r in rs[j:i]}
            expected_damage = bool(refers & jumped)
            found = verify_integrity(parse_state(build_state(moved)))
            assert bool(found) is expected_damage, (i, j, [f.code for f in found])
