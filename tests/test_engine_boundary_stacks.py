"""A stack is created only by the `up` of a layer the ledger never recorded; a lost one sends the operator
to recovery (exit 3) instead of being started again empty.

Pulumi's `stack select` without --create fails with "no stack named '<ref>' found"
(pkg/cmd/pulumi/stack/stack_select.go, pkg/backend/backenderr/backenderr.go), which the Automation API
raises as StackNotFoundError (sdk/python/lib/pulumi/automation/errors.py).
"""

from __future__ import annotations

import json

import pytest

from bootstrap.apply.preview import preview_all
from bootstrap.apply.steps import build_preview, stack_action
from bootstrap.engine.errors import StackLost, StackMissing
from bootstrap.records.layout import stack_key
from tests.boundary_helpers import file_engine, write_program
from tests.conftest import requires_pulumi
from tests.test_orchestrator import ops, services, up, world  # noqa: F401 - the fixture


@pytest.mark.parametrize("operation,exists,serial,action", [
    ("up", True, 3, "use"), ("up", False, 0, "create"), ("up", False, 2, "lost"),
    ("preview", False, 0, "not-deployed"), ("drift", False, 0, "not-deployed"), ("destroy", False, 0, "not-deployed"),
    ("preview", False, 1, "lost"), ("drift", False, 5, "lost"), ("destroy", False, 1, "lost"),
    ("preview", True, 0, "use"),
])
def test_what_happens_to_a_missing_stack(operation, exists, serial, action):
    assert stack_action(operation, exists, serial) == action


def test_the_first_up_creates_each_stack_before_its_preview(world):  # noqa: F811
    engine, open_, clock = world
    outcome, stored, _ = up(open_, clock, yes=True)
    assert outcome.error is None
    for layer in ("backend", "network", "cluster"):
        assert engine.calls.index(("create_stack", layer)) < engine.calls.index(("preview", layer))
    second, _, _ = up(open_, clock, yes=True)
    assert second.error is None
    assert [c for c in engine.calls if c[0] == "create_stack"] == [
        ("create_stack", "backend"), ("create_stack", "network"), ("create_stack", "cluster")]


def test_a_lost_stack_with_ledger_records_stops_up_with_exit_3_and_names_recover(world):  # noqa: F811
    engine, open_, clock = world
    assert up(open_, clock, yes=True)[0].error is None
    with open_() as target:
        target.store.delete(stack_key("network", "local"))  # the stack object is gone; the ledger remains
    engine.stacks.discard("network")
    engine.calls.clear()
    outcome, stored, _ = up(open_, clock, yes=True)
    assert isinstance(outcome.error, StackLost) and outcome.exit_code == 3
    assert "groundctl recover local network" in outcome.error.message
    assert stored["stopped_at"] == "network/stack"
    assert ("create_stack", "network") not in engine.calls and ("preview", "network") not in engine.calls
    assert not any(c == ("up", "network") for c in engine.calls)


def test_plan_and_drift_never_create_and_a_lost_stack_stops_them_too(world):  # noqa: F811
    engine, open_, clock = world
    for refresh in (False, True):
        with open_() as target:
            plans = preview_all(target, build_preview(target.spec, None, emulated=True, refresh=refresh),
                                services(clock))
        assert [p.not_deployed for p in plans] == [True, True, True, False]  # flux: skipped, no Kubernetes
    assert not engine.stacks and not ops(engine, "create_stack", "preview")
    assert up(open_, clock, yes=True, layers=["backend"])[0].error is None
    with open_() as target:
        target.store.delete(stack_key("backend", "local"))
        engine.stacks.discard("backend")
        with pytest.raises(StackLost, match="groundctl recover local backend"):
            preview_all(target, build_preview(target.spec, ["backend"], emulated=True, refresh=True),
                        services(clock))


# -- the product engine against the real CLI -------------------------------------------------------


@pytest.mark.engine
@requires_pulumi
def test_the_pulumi_engine_selects_only_and_creates_on_request(tmp_path, monkeypatch):
    write_program(tmp_path / "stacks", "network", '''
        import pulumi
        pulumi.export("groundctl_lineage", pulumi.Config("groundctl").get("lineage") or "")
    ''')
    engine = file_engine(tmp_path, monkeypatch)
    state_file = tmp_path / "state" / ".pulumi" / "stacks" / "network" / "local.json"
    assert engine.stack_exists("network") is False
    with pytest.raises(StackMissing, match="groundctl recover local network"):
        engine.preview("network")
    with pytest.raises(StackMissing):
        engine.outputs("network")
    assert not state_file.exists()
    assert not (tmp_path / "stacks" / "network" / "Pulumi.local.yaml").exists()  # no config file either
    engine.create_stack("network")
    assert state_file.exists() and engine.stack_exists("network")
    assert engine.preview("network").counts == {"create": 1}
    # A fresh engine (the next command) finds it by selecting.
    again = file_engine(tmp_path, monkeypatch)
    assert again.stack_exists("network")
    assert json.loads(state_file.read_text())["checkpoint"]["stack"].endswith("network/local")


def test_destroy_skips_a_layer_never_deployed_and_stops_at_a_lost_one(world):  # noqa: F811
    from bootstrap.apply.layer_up import UpOptions
    from bootstrap.apply.runner import run
    from bootstrap.apply.steps import build_destroy

    engine, open_, clock = world
    assert up(open_, clock, yes=True, layers=["backend", "network"])[0].error is None
    with open_() as target:
        steps = build_destroy(target.spec, ["network", "cluster"], emulated=True, include_backend=False,
                              i_mean_production=False)
        outcome = run(target, steps, services(clock), UpOptions(yes=True))
    assert outcome.error is None
    achieved = {lay.layer: lay.achieved for lay in outcome.record.layers}
    assert achieved == {"cluster": "skipped", "network": "destroyed"}
    assert ("create_stack", "cluster") not in engine.calls and ("destroy", "cluster") not in engine.calls

    with open_() as target:
        target.store.delete(stack_key("network", "local"))
        engine.stacks.discard("network")
        steps = build_destroy(target.spec, ["network"], emulated=True, include_backend=False, i_mean_production=False)
        lost = run(target, steps, services(clock), UpOptions(yes=True))
    assert isinstance(lost.error, StackLost) and lost.exit_code == 3
    assert ops(engine, "destroy") == [("destroy", "network")]  # only the first, real destroy
