"""Issue 27 §2: no preview, up or destroy while a layer's state holds pending operations.

The rule (bootstrap/engine/pending.py) over states a killed update really left (recorded with the Pulumi CLI:
tests/data/pulumi-states/README.md), the engine boundary that applies it once per layer before the layer's
first preview, up or destroy (a stand-in stack, no binary), and the refusal's commands against the CLI. The
commands themselves are in tests/test_cli_up.py; the real kill in tests/test_engine_tier_pending.py.
"""

from __future__ import annotations

import copy
import json
import re
from types import SimpleNamespace

import pytest

from bootstrap.engine.pending import (MAX_NAMED, RESOLVE_RUNBOOK, PendingOperationsLeft, pending_operations,
                                      refuse_pending, refuse_pending_layers)
from bootstrap.kit.errors import Refused
from bootstrap.spec import load_spec
from tests.conftest import REPO, STATES
from tests.test_runbooks import ROOT, check_command

DYNAMIC = "pulumi-python:dynamic:Resource"


def latest(name: str) -> dict:
    return json.loads((STATES / name).read_text())["checkpoint"]["latest"]


def test_a_killed_create_is_named_and_recover_is_the_way_out():
    refusal = refuse_pending("local", "network", "up", latest("killed-creates.checkpoint.json"))
    assert isinstance(refusal, Refused) and refusal.exit_code == 3
    assert [(o.kind, o.type, o.name) for o in refusal.operations] == [
        ("creating", DYNAMIC, "private-2"), ("creating", DYNAMIC, "public-2")]
    text = refusal.message
    assert text.startswith("Layer 'network' of environment 'local' was not updated: its state holds 2 pending")
    assert f"creating {DYNAMIC} 'private-2'; creating {DYNAMIC} 'public-2'" in text
    assert "`groundctl recover local network`" in text and "nothing was changed" in text
    assert RESOLVE_RUNBOOK not in text  # recover resolves every pending create


def test_deletes_come_first_with_the_runbook_then_the_creates_with_recover():
    refusal = refuse_pending("local", "network", "destroy", latest("killed-delete.checkpoint.json"))
    assert [(o.kind, o.name) for o in refusal.operations] == [
        ("deleting", "public-1"), ("deleting", "private-1"), ("creating", "private-2"), ("creating", "public-2")]
    text = refusal.message
    assert "was not destroyed" in text and "4 pending operations" in text
    # recover refuses while a pending delete is there (recovery/guide.py), so the runbook's refresh comes first.
    assert text.index(RESOLVE_RUNBOOK) < text.index("`groundctl recover local network`")
    assert "first the 2 that are not a create" in text and "then the 2 pending creates" in text


def test_an_interrupted_update_points_only_to_the_runbook():
    refusal = refuse_pending("local", "network", "preview", latest("killed-update.checkpoint.json"))
    assert [(o.kind, o.type, o.name) for o in refusal.operations] == [("updating", DYNAMIC, "vpc")]
    assert "was not previewed" in refusal.message and RESOLVE_RUNBOOK in refusal.message
    assert "groundctl recover" not in refusal.message


@pytest.mark.parametrize("name", ["aws-subnet-group.json", "checkpoint-v3.json", "checkpoint-v1.json"])
def test_a_state_without_pending_operations_is_not_refused(name):
    doc = json.loads((STATES / name).read_text())
    deployment = doc.get("deployment") or doc["checkpoint"]["latest"]
    assert pending_operations(deployment) == [] and refuse_pending("dev", "network", "up", deployment) is None
    assert refuse_pending("dev", "network", "up", {}) is None


def test_what_the_bucket_holds_is_named_inertly_whatever_its_shape():
    hostile = "urn:pulumi:local::network::aws:ec2/eip:Eip::nat\x1b[2J\n-0"
    ops = [{"type": "creating", "resource": {"urn": hostile}}, "not an operation", {"type": "deleting"},
           {"type": "updating", "resource": {"urn": "not-a-urn", "type": 7}}]
    refusal = refuse_pending("dev", "network", "up", {"pending_operations": ops})
    assert [(o.kind, o.type, o.name) for o in refusal.operations] == [
        ("creating", "aws:ec2/eip:Eip", "nat\x1b[2J\n-0"), ("unknown", "(no resource)", "?"),
        ("deleting", "(no resource)", "?"), ("updating", "(no resource)", "not-a-urn")]
    assert "\x1b" not in refusal.message and "\n" not in refusal.message and "nat\\x1b[2J\\n-0" in refusal.message
    assert refuse_pending("dev", "network", "up", {"pending_operations": "garbage"}) is None

    many = [{"type": "creating", "resource": {"urn": f"urn:pulumi:dev::network::aws:ec2/eip:Eip::e{i}"}}
            for i in range(MAX_NAMED + 7)]
    text = refuse_pending("dev", "network", "up", {"pending_operations": many}).message
    assert f"'e{MAX_NAMED - 1}'; and 7 more" in text and f"'e{MAX_NAMED}'" not in text


def test_a_run_is_refused_whole_naming_every_layers_operations_and_each_layers_way_out():
    creates, deletes = latest("killed-creates.checkpoint.json"), latest("killed-delete.checkpoint.json")
    refusal = refuse_pending_layers("local", "up", {"backend": None, "network": creates, "cluster": deletes,
                                                    "flux": {"resources": []}})
    assert refusal.exit_code == 3 and refusal.layers == ("network", "cluster") and len(refusal.operations) == 6
    text = refusal.message
    assert text.startswith("Environment 'local' was not updated: the states of its layers 'network', 'cluster' "
                           "hold 6 pending operations an interrupted update left (layer 'network': creating ")
    assert f"layer 'cluster': deleting {DYNAMIC} 'public-1', deleting {DYNAMIC} 'private-1'" in text
    assert "first the 2 that are not a create (in cluster)" in text and "then the 4 pending creates" in text
    assert text.index(RESOLVE_RUNBOOK) < text.index("`groundctl recover local network` and "
                                                    "`groundctl recover local cluster`")
    # One layer reads as that layer's own refusal.
    alone = refuse_pending_layers("local", "up", {"backend": None, "network": creates})
    assert alone.message == refuse_pending("local", "network", "up", creates).message
    assert refuse_pending_layers("local", "drift", {"network": {"resources": []}, "cluster": None}) is None
    assert "was not checked for drift" in refuse_pending_layers("local", "drift", {"network": creates}).message


def test_a_run_names_at_most_the_cap_whatever_the_layers():
    many = {layer: {"pending_operations": [{"type": "creating", "resource": {
        "urn": f"urn:pulumi:dev::{layer}::aws:ec2/eip:Eip::{layer}{i}"}} for i in range(MAX_NAMED)]}
        for layer in ("network", "cluster")}
    text = refuse_pending_layers("dev", "up", many).message
    assert f"'network{MAX_NAMED - 1}'; layer 'cluster': and {MAX_NAMED} more" in text


def test_every_command_and_runbook_the_refusal_names_exists():
    text = refuse_pending("dev", "network", "up", latest("killed-delete.checkpoint.json")).message
    commands = re.findall(r"`(groundctl [^`]+)`", text)
    assert commands == ["groundctl recover dev network"]
    assert all(check_command(ROOT, c.split()[1:]) is None for c in commands)
    assert (REPO / RESOLVE_RUNBOOK).is_file()


# -- the engine boundary over a stand-in stack (no binary) -----------------------------------------------

class StateStack:
    """Plays the SDK's Stack over one deployment: the plain and the --show-secrets export, and the operations
    the engine runs (recorded; a refresh with clear_pending_creates drops the pending creates, as Pulumi's)."""

    name = "dev"

    def __init__(self, deployment: dict):
        self.deployment, self.calls = deployment, []

    def _run_pulumi_cmd_sync(self, args):
        self.calls.append(" ".join(args))
        return SimpleNamespace(stdout=json.dumps({"version": 3, "deployment": self.deployment}))

    def export_stack(self):
        self.calls.append("export --show-secrets")
        return SimpleNamespace(version=3, deployment=copy.deepcopy(self.deployment))

    def _op(self, name, **kwargs):
        self.calls.append(name)
        if kwargs.get("clear_pending_creates"):
            self.deployment["pending_operations"] = [
                p for p in self.deployment.get("pending_operations", []) if p["type"] != "creating"]
        return SimpleNamespace(summary=SimpleNamespace(resource_changes={}), outputs={})

    def preview(self, **kwargs):
        return self._op("preview", **kwargs)

    def up(self, **kwargs):
        return self._op("up", **kwargs)

    def refresh(self, **kwargs):
        return self._op("refresh", **kwargs)

    def destroy(self, **kwargs):
        return self._op("destroy", **kwargs)

    def info(self):  # `stack history`: the update's summary, where its events gave none
        return SimpleNamespace(resource_changes={})

    def outputs(self):
        return {}


@pytest.fixture
def engine(monkeypatch):
    import bootstrap.engine.preflight as preflight
    from bootstrap.engine import sdk_objects
    from bootstrap.engine.automation import PulumiEngine

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    monkeypatch.setattr(sdk_objects, "run_up", lambda stack, args, on_event: stack._op("up"))
    return PulumiEngine(load_spec("dev"))


def _configured(engine, deployment: dict) -> StateStack:
    """The layer's stack as `_configure` leaves it: selected, its secrets provider checked on a plain export."""
    stack = StateStack({**deployment,
                        "secrets_providers": {"type": "cloud", "state": {"url": engine.settings.secrets_provider}}})
    engine._settle_secrets_provider("network", stack, engine._export_plain("network", stack))
    engine._stacks["network"] = stack
    return stack


@pytest.mark.parametrize("operation", ["preview", "up", "destroy"])
def test_the_engine_refuses_before_running_anything(engine, operation):
    stack = _configured(engine, latest("killed-creates.checkpoint.json"))
    with pytest.raises(PendingOperationsLeft) as refused:
        getattr(engine, operation)("network")
    assert refused.value.layers == ("network",) and len(refused.value.operations) == 2
    assert stack.calls == ["stack export"]  # the configure's export, read again for the check: nothing else ran


def test_a_clean_layer_is_checked_once_on_the_export_the_run_already_made(engine):
    stack = _configured(engine, latest("checkpoint-v3.json"))
    engine.preview("network")
    engine.up("network")
    engine.destroy("network")
    assert stack.calls == ["stack export", "preview", "up", "destroy"]


def test_after_the_recovery_clears_the_pending_creates_the_layer_is_previewed(engine):
    state = latest("killed-creates.checkpoint.json")
    stack = _configured(engine, state)
    with pytest.raises(PendingOperationsLeft):
        engine.preview("network", refresh=True, expect_no_changes=True)
    engine.clear_pending_creates("network", [p["resource"]["urn"] for p in state["pending_operations"]])
    engine.preview("network", refresh=True, expect_no_changes=True)  # the recovery's verification
    assert stack.calls[-1] == "preview" and stack.calls.count("preview") == 1


def test_a_write_before_the_check_is_followed_by_a_fresh_export(engine):
    stack = _configured(engine, latest("checkpoint-v3.json"))
    engine.refresh("network")  # writes the state: what the configure's export said is stale
    stack.deployment = {**stack.deployment, **{"pending_operations": latest("killed-update.checkpoint.json")[
        "pending_operations"]}}
    with pytest.raises(PendingOperationsLeft, match="updating"):
        engine.up("network")
    assert stack.calls == ["stack export", "refresh", "stack export"]
