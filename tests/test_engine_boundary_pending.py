"""`Engine.clear_pending_creates` with the real CLI on a file:// backend: it drops exactly the pending
creates it was told about, refuses (changing nothing) when the state holds another, and reads no
resource while doing it (its refresh targets only the root stack resource)."""

from __future__ import annotations

import json

import pytest

from bootstrap.kit.errors import Refused
from tests.conftest import requires_pulumi
from tests.test_engine_boundary_drift import T, deployed_files_program

pytestmark = [pytest.mark.engine, requires_pulumi]


def urn(name: str) -> str:
    return f"urn:pulumi:local::network::{T}::{name}"


def test_clearing_pending_creates_drops_only_those_decided_and_reads_nothing(tmp_path, monkeypatch):
    engine, root = deployed_files_program(tmp_path, monkeypatch)

    # As a killed update leaves it: `b` and `c` were being created, `b`'s file is not there.
    checkpoint = tmp_path / "state" / ".pulumi" / "stacks" / "network" / "local.json"
    doc = json.loads(checkpoint.read_text())
    latest = doc["checkpoint"]["latest"]
    b = next(r for r in latest["resources"] if r["urn"] == urn("b"))
    latest["resources"].remove(b)
    creating = {k: v for k, v in b.items() if k not in ("id", "outputs")}
    latest["pending_operations"] = [{"type": "creating", "resource": creating},
                                    {"type": "creating", "resource": {**creating, "urn": urn("c")}}]
    checkpoint.write_text(json.dumps(doc))
    (root / "b").unlink()
    (root / "a").write_text("changed")  # drift a refresh of `a` would write into the state

    with pytest.raises(Refused) as refused:
        engine.clear_pending_creates("network", [urn("b")])
    assert urn("c") in refused.value.message
    assert json.loads(checkpoint.read_text()) == doc  # nothing changed

    engine.clear_pending_creates("network", [urn("b"), urn("c"), urn("gone")])
    latest = engine.export_state("network")["deployment"]
    assert not latest.get("pending_operations")
    assert [r["urn"] for r in latest["resources"] if r["type"] == T] == [urn("a")]
    a = next(r for r in latest["resources"] if r["urn"] == urn("a"))
    assert a["outputs"]["value"] == "one"  # `a` was not refreshed: the clear is the only change

    engine.clear_pending_creates("network", [])  # none left: nothing to do
