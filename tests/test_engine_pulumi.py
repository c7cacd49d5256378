"""Engine tier: PulumiEngine against a real `pulumi` binary, a file:// backend and a tiny program.

The program declares only component resources, so no provider plugin (and no network) is needed.
Skipped, with the reason, when no `pulumi` is on PATH.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from bootstrap.engine.automation import PulumiEngine
from bootstrap.engine.errors import StackLocked, UnexpectedChanges
from bootstrap.spec import load_spec
from tests.conftest import requires_pulumi

pytestmark = [pytest.mark.engine, requires_pulumi]

CANARY = "canary-Zq8v1T0pS3cr3t"
PASSPHRASE = "canary-passphrase-7Hq2"

PROGRAM = textwrap.dedent('''
    import pulumi

    class Thing(pulumi.ComponentResource):
        def __init__(self, name, opts=None):
            super().__init__("groundctl:test:Thing", name, {}, opts)
            self.register_outputs({})

    count = int(pulumi.Config("test").get("count") or "1")
    for i in range(count):
        Thing(f"thing-{i}")
    pulumi.export("groundctl_lineage", pulumi.Config("groundctl").get("lineage") or "")
    pulumi.export("token", pulumi.Output.secret(pulumi.Config("test").get("token") or "none"))
''')


@pytest.fixture
def engine(tmp_path, monkeypatch):
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "home"))  # keeps the test away from ~/.pulumi
    program = tmp_path / "stacks" / "network"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text("name: network\nruntime: python\n")
    (program / "__main__.py").write_text(PROGRAM)
    state = tmp_path / "state"
    state.mkdir()
    spec = load_spec("local")
    eng = PulumiEngine(spec, endpoint_url="http://127.0.0.1:9", lineage_for=lambda layer: "lin-1",
                       stacks_dir=tmp_path / "stacks", backend_override=f"file://{state}")
    eng.create_stack("network")  # as the orchestrator does on a layer's first up
    return eng, state


def test_preview_up_outputs_and_destroy(engine):
    eng, _ = engine
    eng.set_config("network", "test:token", CANARY, secret=True)
    progress: list[str] = []
    plan = eng.preview("network", on_progress=progress.append)
    assert plan.counts.get("create", 0) >= 2  # the stack resource and thing-0
    assert any(c.name == "thing-0" and c.operation == "create" for c in plan.changes)
    assert progress and all(CANARY not in p for p in progress)
    assert CANARY not in json.dumps(plan.to_dict())

    result = eng.up("network")
    assert result.counts.get("create", 0) >= 2
    assert result.outputs.values["groundctl_lineage"] == "lin-1"
    assert result.outputs.secret_keys == frozenset({"token"})
    assert result.outputs.values["token"] == CANARY and CANARY not in json.dumps(result.outputs.public())

    assert not eng.preview("network").has_changes
    eng.set_config("network", "test:count", "2")
    again = eng.preview("network")
    assert [c.name for c in again.changes if c.operation == "create"] == ["thing-1"]
    with pytest.raises(UnexpectedChanges):
        eng.preview("network", refresh=True, expect_no_changes=True)

    gone = eng.destroy("network")
    assert gone.counts.get("delete", 0) >= 2 and gone.outputs.values == {}


def test_a_held_stack_lock_is_reported_with_its_holder(engine):
    eng, state = engine
    eng.up("network")
    lock_dir = state / ".pulumi" / "locks" / "organization" / "network" / "local"
    lock_dir.mkdir(parents=True, exist_ok=True)
    (lock_dir / "someone-else.json").write_text(json.dumps(
        {"pid": 4242, "username": "alice", "hostname": "build-7", "timestamp": "2026-12-02T09:58:01Z"}))
    with pytest.raises(StackLocked) as raised:
        eng.up("network")
    assert "alice@build-7" in raised.value.message and PASSPHRASE not in raised.value.message
