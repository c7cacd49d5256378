"""Refresh drift comes from the refresh step's outputs event, and Pulumi's own --expect-no-changes is
UnexpectedChanges.

At a refresh step's pre-event Pulumi sends new = old and no diff; what the refresh found arrives in the
outputs event: op `refresh` (during `preview --refresh`) or RefreshStep.ResultOp (update/delete/same,
for a refresh operation), with `new` absent when the resource is gone (pkg/engine/update.go
OnResourceStepPost; pkg/resource/deploy/step.go RefreshStep.ResultOp). The CLI's --expect-no-changes
failure is backenderr.NoChangesExpectedError (pkg/cmd/pulumi/operations/preview.go).
"""

from __future__ import annotations

import json

import pytest
from pulumi.automation import events as ev

from bootstrap.engine.errors import UnexpectedChanges
from bootstrap.engine.events import changes_from_events, plan_from_events
from bootstrap.planning.plan import DELETED_MARK
from bootstrap.kit.errors import EngineError
from bootstrap.planning.plan import Plan
from bootstrap.records.drift import drift_row
from tests.boundary_helpers import file_engine, write_program
from tests.conftest import requires_pulumi

T = "pulumi-python:dynamic:Resource"


def urn(name):
    return f"urn:pulumi:local::network::{T}::{name}"


def st(name, value):
    return ev.StepEventStateMetadata(type=T, urn=urn(name), id=name, parent="", provider="", inputs={"value": value},
                                     outputs={"name": name, "value": value})


def md(op, name, old, new, diffs=None):
    return ev.StepEventMetadata(op=ev.OpType(op), urn=urn(name), type=T, provider="", old=old, new=new,
                                diffs=diffs, detailed_diff={})


def pre(m, seq=0):
    return ev.EngineEvent(sequence=seq, timestamp=0, resource_pre_event=ev.ResourcePreEvent(m, planning=True))


def post(m, seq=0):
    return ev.EngineEvent(sequence=seq, timestamp=0, res_outputs_event=ev.ResOutputsEvent(m, planning=True))


def preview_refresh_events():
    """What `preview --refresh` sends when `a` was changed and `b` deleted outside Pulumi (seen with v3.259)."""
    return [
        pre(md("refresh", "b", st("b", "two"), st("b", "two"))),
        pre(md("refresh", "a", st("a", "one"), st("a", "one"))),
        post(md("refresh", "a", st("a", "one"), st("a", "changed"))),
        post(md("refresh", "b", st("b", "two"), None)),
        pre(md("create", "b", None, st("b", "two"))),
        pre(md("update", "a", st("a", "changed"), st("a", "one"))),
        post(md("update", "a", st("a", "changed"), st("a", "one"))),
        post(md("create", "b", None, st("b", "two"))),
    ]


def test_a_deletion_outside_pulumi_and_a_changed_value_show_in_the_plan():
    changes = {c.name: c for c in changes_from_events(preview_refresh_events())}
    assert (changes["b"].operation, changes["b"].diff_keys) == ("create", (DELETED_MARK,))
    assert (changes["a"].operation, changes["a"].diff_keys) == ("update", ("value",))
    row = drift_row(plan_from_events("network", "local", preview_refresh_events()))
    assert row["state"] == "drift"  # not "not deployed": b existed and was deleted outside Pulumi


def test_drift_the_program_would_not_revert_is_still_reported():
    events = [pre(md("refresh", "a", st("a", "one"), st("a", "one"))),
              post(md("refresh", "a", st("a", "one"), st("a", "changed"))),
              pre(md("same", "a", st("a", "changed"), st("a", "changed")))]
    (change,) = changes_from_events(events)
    assert (change.operation, change.diff_keys) == ("refresh", ("value",))
    assert plan_from_events("network", "local", events).has_changes


K = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"


def kst(spec, meta=None, status=None):
    """A Kubernetes object as the provider's state has it: inputs pruned to what the program declares."""
    inputs = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
              "metadata": {"name": "flux-system", "namespace": "flux-system"}, "spec": spec}
    outputs = {**inputs, "metadata": {**inputs["metadata"], **(meta or {})}, **({"status": status} if status else {})}
    return ev.StepEventStateMetadata(type=K, urn=urn("ks"), id="flux-system/flux-system", parent="", provider="",
                                     inputs=inputs, outputs=outputs)


def kmd(op, old, new, diffs=None, detailed=None):
    return ev.StepEventMetadata(op=ev.OpType(op), urn=urn("ks"), type=K, provider="", old=old, new=new,
                                diffs=diffs, detailed_diff=detailed or {})


def test_a_refresh_that_only_sees_what_the_server_owns_is_not_drift():
    """A controller wrote the object's status; the API server bumped resourceVersion and managedFields
    (the real Kubernetes provider's refresh, seen in the cluster tier). The provider's refresh diff is
    empty and the program's step is `same`: nothing the program declares changed."""
    spec = {"prune": True, "path": "./clusters/local"}
    before = kst(spec, {"resourceVersion": "10", "generation": 1})
    after = kst(spec, {"resourceVersion": "14", "generation": 1, "managedFields": [{"manager": "standin"}]},
                {"conditions": [{"type": "Ready", "status": "True"}], "observedGeneration": 1})
    events = [pre(kmd("refresh", before, before)), post(kmd("refresh", before, after)),
              pre(kmd("same", after, after))]
    (change,) = changes_from_events(events)
    assert (change.operation, change.diff_keys) == ("same", ())
    assert drift_row(plan_from_events("flux", "local", events))["state"] == "clean"


def test_a_declared_field_changed_outside_pulumi_is_drift_next_to_server_owned_changes():
    before = kst({"prune": True}, {"resourceVersion": "10"})
    after = kst({"prune": False}, {"resourceVersion": "20"}, {"conditions": []})
    events = [pre(kmd("refresh", before, before)),
              post(kmd("refresh", before, after, diffs=["spec"], detailed={"spec.prune": {"kind": "update"}})),
              pre(kmd("update", after, before, diffs=["spec"]))]
    (change,) = changes_from_events(events)
    assert (change.operation, change.diff_keys) == ("update", ("spec",))
    assert drift_row(plan_from_events("flux", "local", events))["state"] == "drift"


def test_a_provider_that_names_no_keys_has_its_update_named_by_the_refreshed_outputs():
    """A dynamic provider answers DIFF_SOME with no keys and reads no inputs back: the refreshed outputs
    name the update the program's step then proposes."""
    old = st("a", "one")
    new = ev.StepEventStateMetadata(type=T, urn=urn("a"), id="a", parent="", provider="", inputs={"value": "one"},
                                    outputs={"name": "a", "value": "changed"})
    events = [pre(md("refresh", "a", old, old)), post(md("refresh", "a", old, new)),
              pre(md("update", "a", new, old))]
    (change,) = changes_from_events(events)
    assert (change.operation, change.diff_keys) == ("update", ("value",))


def test_a_refresh_operation_reports_its_result_op():
    events = [pre(md("refresh", "a", st("a", "one"), st("a", "one"))),
              pre(md("refresh", "b", st("b", "two"), st("b", "two"))),
              pre(md("refresh", "c", st("c", "x"), st("c", "x"))),
              post(md("delete", "b", st("b", "two"), None)),
              post(md("update", "a", st("a", "one"), st("a", "changed"))),
              post(md("same", "c", st("c", "x"), st("c", "x")))]
    changes = {c.name: (c.operation, c.diff_keys) for c in changes_from_events(events)}
    assert changes == {"a": ("refresh", ("value",)), "b": ("refresh", (DELETED_MARK,)), "c": ("same", ())}


def test_pulumis_own_expect_no_changes_is_unexpected_changes_even_when_the_events_show_none(monkeypatch):
    import bootstrap.engine.preflight as preflight
    from bootstrap.engine.automation import PulumiEngine
    from bootstrap.spec import load_spec
    from pulumi.automation._cmd import CommandResult
    from pulumi.automation.errors import create_command_error

    class Stack:
        name = "dev"

        def _run_pulumi_cmd_sync(self, args):  # the plain `stack export` the pending-operations check reads
            return CommandResult(json.dumps({"version": 3, "deployment": {"resources": []}}), "", 0)

        def preview(self, *, on_event, **kwargs):
            raise create_command_error(CommandResult(
                "", "error: no changes were expected for preview but changes were proposed", 255))

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    engine = PulumiEngine(load_spec("dev"))
    engine._stacks["network"] = Stack()
    with pytest.raises(UnexpectedChanges) as raised:
        engine.preview("network", refresh=True, expect_no_changes=True)
    assert "expect-no-changes" in raised.value.message
    with pytest.raises(EngineError) as plain:
        engine.preview("network", refresh=True)  # not asked to expect none: a failure like any other
    assert not isinstance(plain.value, UnexpectedChanges)


def test_a_failed_preview_is_the_engines_error_not_unexpected_changes(monkeypatch):
    """A refresh that announced its step and then could not read the resource (AccessDenied): the preview
    failed, which says nothing about drift. Before, the announced refresh step made it "1 refresh"."""
    import bootstrap.engine.preflight as preflight
    from bootstrap.engine.automation import PulumiEngine
    from bootstrap.spec import load_spec
    from pulumi.automation._cmd import CommandResult
    from pulumi.automation.errors import create_command_error

    class Stack:
        name = "dev"

        def _run_pulumi_cmd_sync(self, args):  # the plain `stack export` the pending-operations check reads
            return CommandResult(json.dumps({"version": 3, "deployment": {"resources": []}}), "", 0)

        def preview(self, *, on_event, **kwargs):
            on_event(pre(md("refresh", "a", st("a", "one"), None)))
            raise create_command_error(CommandResult(
                "", "error: preview failed: reading a: operation error S3: GetObject, AccessDenied: Access Denied",
                255))

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    engine = PulumiEngine(load_spec("dev"))
    engine._stacks["network"] = Stack()
    with pytest.raises(EngineError) as raised:
        engine.preview("network", refresh=True, expect_no_changes=True)
    assert not isinstance(raised.value, UnexpectedChanges)
    assert raised.value.exit_code == 4 and "AccessDenied" in raised.value.message


def test_a_plan_whose_stack_has_only_creates_is_still_not_deployed():
    events = [pre(md("create", "a", None, st("a", "one")))]
    assert drift_row(Plan("network", "local", changes_from_events(events)))["state"] == "not deployed"


# -- for real: a dynamic-provider resource changed and deleted behind Pulumi's back ----------------------

PROGRAM = '''
    import os, pathlib
    import pulumi
    from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

    ROOT = pathlib.Path(os.environ["DRIFT_ROOT"])

    class FileProvider(ResourceProvider):
        def create(self, props):
            (ROOT / props["name"]).write_text(props["value"])
            return CreateResult(props["name"], dict(props))

        def read(self, id_, props):
            path = ROOT / id_
            if not path.exists():
                return ReadResult(None, {})
            return ReadResult(id_, {"name": id_, "value": path.read_text()})

        def diff(self, id_, olds, news):
            return DiffResult(changes=olds.get("value") != news.get("value"))

        def update(self, id_, olds, news):
            (ROOT / id_).write_text(news["value"])
            return UpdateResult(dict(news))

        def delete(self, id_, props):
            (ROOT / id_).unlink(missing_ok=True)

    class File(Resource):
        def __init__(self, name, value):
            super().__init__(FileProvider(), name, {"name": name, "value": value})

    File("a", "one")
    File("b", "two")
'''


def deployed_files_program(tmp_path, monkeypatch):
    """PROGRAM's `network` layer up on a file backend, its files under the returned folder: (engine, folder)."""
    root = tmp_path / "live"
    root.mkdir()
    monkeypatch.setenv("DRIFT_ROOT", str(root))
    write_program(tmp_path / "stacks", "network", PROGRAM)
    engine = file_engine(tmp_path, monkeypatch)
    engine.create_stack("network")
    engine.up("network")
    return engine, root


@pytest.mark.engine
@requires_pulumi
def test_drift_made_outside_pulumi_is_seen_by_a_refresh_preview(tmp_path, monkeypatch):
    engine, root = deployed_files_program(tmp_path, monkeypatch)
    assert not engine.preview("network", refresh=True, expect_no_changes=True).has_changes
    (root / "a").write_text("changed")
    (root / "b").unlink()
    with pytest.raises(UnexpectedChanges) as raised:
        engine.preview("network", refresh=True, expect_no_changes=True)
    changes = {c.name: (c.operation, c.diff_keys) for c in raised.value.plan.changes}
    assert changes["b"] == ("create", (DELETED_MARK,))
    assert changes["a"][0] == "update" and "value" in changes["a"][1]
