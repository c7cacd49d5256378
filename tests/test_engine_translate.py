"""Engine events → Plan, results → OperationResult, spec → workspace settings. No binary needed."""

from __future__ import annotations

import json

import pytest
from pulumi.automation import OutputValue
from pulumi.automation import events as ev

from bootstrap.engine.events import (
    changes_from_events, counts_from_summary, plan_from_events, progress_message,
)
from bootstrap.planning.plan import DELETED_MARK
from bootstrap.engine.results import SECRET_SIG, outputs_from_automation
from bootstrap.engine.workspace import backend_url, workspace_settings
from bootstrap.kit.errors import BadInput
from bootstrap.spec import load_spec

CANARY = "canary-Zq8v1T0pS3cr3t"
ENV = "dev"


def urn(layer: str, rtype: str, name: str) -> str:
    return f"urn:pulumi:{ENV}::{layer}::{rtype}::{name}"


def state(rtype, u, *, protect=False, inputs=None, outputs=None):
    return ev.StepEventStateMetadata(type=rtype, urn=u, id="id-1", parent="", provider="", protect=protect,
                                     inputs=inputs, outputs=outputs)


def pre(op, rtype, name, *, layer="network", diffs=None, keys=None, old=None, new=None, detailed=None, seq=1):
    u = urn(layer, rtype, name)
    md = ev.StepEventMetadata(op=ev.OpType(op), urn=u, type=rtype, provider="", old=old, new=new, keys=keys,
                              diffs=diffs, detailed_diff=detailed)
    return ev.EngineEvent(sequence=seq, timestamp=0, resource_pre_event=ev.ResourcePreEvent(md, planning=True))


VPC, SUBNET, SG = "aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet", "aws:ec2/securityGroup:SecurityGroup"


def test_each_operation_becomes_one_change_with_its_diff_keys():
    events = [
        pre("create", SUBNET, "private-a", new=state(SUBNET, "", inputs={"cidrBlock": "10.0.0.0/20"})),
        pre("update", SG, "nodes", diffs=["ingress", "tags"], old=state(SG, ""), new=state(SG, "")),
        pre("delete", SUBNET, "old", old=state(SUBNET, "")),
        pre("same", VPC, "main", old=state(VPC, ""), new=state(VPC, "")),
    ]
    changes = {c.name: c for c in changes_from_events(events)}
    assert {n: c.operation for n, c in changes.items()} == {
        "private-a": "create", "nodes": "update", "old": "delete", "main": "same"}
    assert changes["nodes"].diff_keys == ("ingress", "tags")
    assert changes["private-a"].type == SUBNET
    assert changes["main"].diff_keys == ()


def test_the_steps_of_a_replacement_fold_into_one_replace():
    events = [
        pre("create-replacement", VPC, "main", keys=["cidrBlock"], seq=1),
        pre("replace", VPC, "main", keys=["cidrBlock"], diffs=["cidrBlock", "tags"], seq=2),
        pre("delete-replaced", VPC, "main", old=state(VPC, ""), seq=3),
    ]
    plan = plan_from_events("network", ENV, events)
    assert len(plan.changes) == 1
    (change,) = plan.changes
    assert (change.operation, change.diff_keys) == ("replace", ("cidrBlock", "tags"))
    assert plan.counts == {"replace": 1}
    assert "stateful" in plan.risky[0][1]


def test_protection_is_read_from_the_old_or_new_state():
    events = [
        pre("delete", "aws:kms/key:Key", "state", layer="backend", old=state("aws:kms/key:Key", "", protect=True)),
        pre("update", SG, "nodes", diffs=["tags"], new=state(SG, "", protect=True)),
    ]
    plan = plan_from_events("network", ENV, events)
    assert [c.protected for c in plan.changes] == [True, True]
    reasons = dict((c.name, r) for c, r in plan.risky)
    assert "protected" in reasons["state"] and "protected" in reasons["nodes"]


def test_json_events_translate_like_objects():
    raw = {"sequence": 3, "timestamp": 0, "resourcePreEvent": {"metadata": {
        "op": "update", "urn": urn("cluster", "aws:eks/cluster:Cluster", "main"), "type": "aws:eks/cluster:Cluster",
        "provider": "", "diffs": ["version"], "detailedDiff": {"version": {"diffKind": "update"}},
        "new": {"type": "aws:eks/cluster:Cluster", "urn": "", "protect": True, "inputs": {"token": CANARY}}}}}
    (change,) = changes_from_events([raw])
    assert (change.operation, change.diff_keys, change.protected) == ("update", ("version",), True)


def test_detailed_diff_keys_are_used_when_diffs_are_absent():
    detailed = {"tags.team": ev.PropertyDiff(ev.DiffKind.UPDATE, True)}
    (change,) = changes_from_events([pre("update", SG, "nodes", detailed=detailed)])
    assert change.diff_keys == ("tags.team",)


def test_refresh_steps_count_only_when_they_found_drift():
    quiet = pre("refresh", SG, "quiet", old=state(SG, "", outputs={"a": 1}), new=state(SG, "", outputs={"a": 1}))
    # Outputs alone change whenever the server writes what it owns: not drift.
    server_owned = pre("refresh", SG, "server-owned", old=state(SG, "", inputs={"a": 1}, outputs={"a": 1, "st": 1}),
                       new=state(SG, "", inputs={"a": 1}, outputs={"a": 1, "st": 2}))
    # What the program declares, read back changed (secret included, never its value): drift.
    drifted = pre("refresh", SG, "drifted", old=state(SG, "", inputs={"a": 1, "secret": "x"}),
                  new=state(SG, "", inputs={"a": 2, "secret": CANARY}))
    gone = pre("refresh", SG, "gone", old=state(SG, "", outputs={"a": 1}), new=None)
    changes = {c.name: c for c in changes_from_events([quiet, server_owned, drifted, gone])}
    assert changes["quiet"].operation == "same" and changes["server-owned"].operation == "same"
    assert (changes["drifted"].operation, changes["drifted"].diff_keys) == ("refresh", ("a", "secret"))
    assert changes["gone"].diff_keys == (DELETED_MARK,)
    plan = plan_from_events("network", ENV, [quiet, server_owned])
    assert not plan.has_changes


def test_a_refresh_then_update_on_one_urn_is_an_update_with_both_keys():
    events = [pre("refresh", SG, "nodes", diffs=["ingress"], seq=1),
              pre("update", SG, "nodes", diffs=["tags"], seq=2)]
    (change,) = changes_from_events(events)
    assert (change.operation, change.diff_keys) == ("update", ("ingress", "tags"))


def test_order_is_first_seen_and_other_events_are_ignored():
    diag = ev.EngineEvent(sequence=1, timestamp=0, diagnostic_event=ev.DiagnosticEvent(CANARY, "", "error"))
    summ = ev.EngineEvent(sequence=9, timestamp=0, summary_event=ev.SummaryEvent(False, 1, {"create": 2}, {}))
    events = [diag, pre("create", SUBNET, "b"), pre("create", SUBNET, "a"), summ]
    assert [c.name for c in changes_from_events(events)] == ["b", "a"]


def test_no_value_from_inputs_or_outputs_reaches_the_plan():
    events = [
        pre("create", SUBNET, "a", new=state(SUBNET, "", inputs={"password": CANARY}, outputs={"k": CANARY})),
        pre("update", SG, "nodes", diffs=["password"], old=state(SG, "", inputs={"password": "old"}),
            new=state(SG, "", inputs={"password": CANARY})),
    ]
    plan = plan_from_events("network", ENV, events)
    assert CANARY not in json.dumps(plan.to_dict()) and CANARY not in repr(plan)
    assert plan.changes[1].diff_keys == ("password",)


def test_progress_messages_are_short_and_never_echo_diagnostics():
    md = pre("create", VPC, "main").resource_pre_event.metadata
    assert progress_message(pre("create", VPC, "main")) == "main: create"
    assert progress_message(ev.EngineEvent(0, 0, res_outputs_event=ev.ResOutputsEvent(md))) == "main: create done"
    assert progress_message(ev.EngineEvent(0, 0, res_op_failed_event=ev.ResOpFailedEvent(md, 1, 1))) == \
        "main: create failed"
    assert progress_message(pre("same", VPC, "main")) is None
    assert progress_message(ev.EngineEvent(0, 0, diagnostic_event=ev.DiagnosticEvent(CANARY, "", "error"))) is None
    summary = ev.EngineEvent(0, 0, summary_event=ev.SummaryEvent(False, 1, {ev.OpType.CREATE: 2, "same": 0}, {}))
    assert progress_message(summary) == "done: 2 create"


def test_summary_counts_accept_enum_keys_and_drop_zeros():
    assert counts_from_summary({ev.OpType.UPDATE: 1, "create": 3, "delete": 0}) == {"create": 3, "update": 1}
    assert counts_from_summary(None) == {}


def test_outputs_keep_which_keys_are_secret():
    out = outputs_from_automation({"vpc_id": OutputValue("vpc-1", False), "kubeconfig": OutputValue(CANARY, True)})
    assert out.values["kubeconfig"] == CANARY and out.secret_keys == frozenset({"kubeconfig"})
    assert CANARY not in json.dumps(out.public())


# -- workspace settings: backend URL, secrets provider, environment -----------------------------------------


def test_dev_uses_kms_and_the_plain_s3_backend():
    spec = load_spec("dev")
    s = workspace_settings(spec, environ={})
    assert s.backend_url == "s3://acme-groundctl-dev-state?region=eu-west-1"
    assert s.secrets_provider == "awskms://alias/groundctl-dev-state?region=eu-west-1"
    assert s.env["PULUMI_BACKEND_URL"] == s.backend_url
    assert s.env["PULUMI_SKIP_UPDATE_CHECK"] == "true"
    assert s.env["AWS_REGION"] == "eu-west-1"
    assert "PULUMI_CONFIG_PASSPHRASE" not in s.env and "AWS_ACCESS_KEY_ID" not in s.env


def test_prod_uses_its_profile_and_refuses_an_emulator_endpoint():
    spec = load_spec("prod")
    spec = spec.model_copy(update={"aws": spec.aws.model_copy(update={"profile": "acme-prod"})})
    s = workspace_settings(spec, environ={})
    assert s.backend_url == "s3://acme-groundctl-prod-state?region=eu-west-1"
    assert s.secrets_provider == "awskms://alias/groundctl-prod-state?region=eu-west-1"
    assert s.env["AWS_PROFILE"] == "acme-prod"
    with pytest.raises(BadInput, match="production"):
        workspace_settings(spec, endpoint_url="http://127.0.0.1:5000", environ={})


def test_local_with_endpoint_uses_the_passphrase_and_endpoint_parameters():
    spec = load_spec("local")
    s = workspace_settings(spec, endpoint_url="http://127.0.0.1:45123", environ={"PULUMI_CONFIG_PASSPHRASE": CANARY})
    assert s.backend_url == ("s3://groundctl-local-state?region=us-east-1"
                             "&endpoint=http%3A%2F%2F127.0.0.1%3A45123&s3ForcePathStyle=true")
    assert s.secrets_provider == "passphrase"
    assert s.env["PULUMI_CONFIG_PASSPHRASE"] == CANARY
    assert s.env["AWS_ACCESS_KEY_ID"] == "testing"  # real credentials never go to the emulator
    assert CANARY in s.secret_values and CANARY not in repr(s)


def test_the_passphrase_may_come_from_another_variable_and_its_absence_is_explained():
    spec = load_spec("local")
    s = workspace_settings(spec, endpoint_url="http://127.0.0.1:1", passphrase_env="MY_PASS",
                           environ={"MY_PASS": "p"})
    assert s.env["PULUMI_CONFIG_PASSPHRASE"] == "p"
    with pytest.raises(BadInput, match="MY_PASS"):
        workspace_settings(spec, endpoint_url="http://127.0.0.1:1", passphrase_env="MY_PASS", environ={})


def test_an_embedded_spec_without_a_started_emulator_is_refused():
    with pytest.raises(BadInput, match="emulator"):
        workspace_settings(load_spec("local"), environ={"PULUMI_CONFIG_PASSPHRASE": "p"})


def test_backend_url_without_endpoint_has_only_the_region():
    assert backend_url("b", "eu-west-1") == "s3://b?region=eu-west-1"
    assert "disableSSL" not in backend_url("b", "us-east-1", "http://localhost:4566/")


# -- the engine shell over a stand-in stack: events in, groundctl values out (no binary) ----------------------


class StubStack:
    """Plays the SDK's Stack: feeds engine events to `on_event` the way the CLI's event log does."""

    name = ENV

    def __init__(self, events, fail_with=None):
        self.events, self.fail_with, self.calls = events, fail_with, []

    def _run_pulumi_cmd_sync(self, args):
        from pulumi.automation._cmd import CommandResult

        if args[:2] == ["stack", "output"]:  # the plaintext of the outputs, read as one holds a secret
            self.calls.append(("stack output", args))
            return CommandResult(json.dumps({"vpc_id": "vpc-1", "kubeconfig": CANARY}), "", 0)
        # `stack export`, read for the pending-operations check before the first preview or up: none here.
        return CommandResult(json.dumps({"version": 3, "deployment": {"resources": []}}), "", 0)

    def preview(self, *, on_event, **kwargs):
        self.calls.append(("preview", kwargs))
        for e in self.events:
            on_event(e)
        if self.fail_with:
            raise self.fail_with

    def run_up(self, args, on_event):
        """What bootstrap.engine.sdk_objects.run_up streams: the steps, the root's outputs (a secret blinded
        as Pulumi blinds it) and the summary."""
        self.calls.append(("up", args))
        root = state("pulumi:pulumi:Stack", urn("network", "pulumi:pulumi:Stack", "network-dev"), outputs={
            "vpc_id": "vpc-1", "kubeconfig": {SECRET_SIG[0]: SECRET_SIG[1], "ciphertext": "[secret]"}})
        md = ev.StepEventMetadata(op=ev.OpType("same"), urn=root.urn, type=root.type, provider="", new=root)
        for e in [*self.events, ev.EngineEvent(sequence=8, timestamp=0, res_outputs_event=ev.ResOutputsEvent(md)),
                  ev.EngineEvent(sequence=9, timestamp=0, summary_event=ev.SummaryEvent(
                      maybe_corrupt=False, duration_seconds=1, resource_changes={ev.OpType("create"): 1,
                                                                                 ev.OpType("same"): 2},
                      policy_packs={}))]:
            on_event(e)


@pytest.fixture
def shell(monkeypatch):
    import bootstrap.engine.preflight as preflight
    from bootstrap.engine import sdk_objects
    from bootstrap.engine.automation import PulumiEngine

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    monkeypatch.setattr(sdk_objects, "run_up", lambda stack, args, on_event: stack.run_up(args, on_event))
    return PulumiEngine(load_spec("dev"))


def test_preview_collects_events_into_a_plan_and_reports_progress(shell):
    stack = StubStack([pre("create", SUBNET, "a"), pre("same", VPC, "main")])
    shell._stacks["network"] = stack
    seen = []
    plan = shell.preview("network", refresh=True, on_progress=seen.append)
    assert plan.counts == {"create": 1, "same": 1} and plan.environment == ENV
    assert seen == ["a: create"]
    assert stack.calls[0][1]["refresh"] is True


def test_expecting_no_changes_turns_drift_into_an_error_that_carries_the_plan(shell):
    from pulumi.automation._cmd import CommandResult
    from pulumi.automation.errors import create_command_error

    from bootstrap.engine.errors import UnexpectedChanges

    failure = create_command_error(CommandResult("", "error: no changes were expected but changes were proposed", 255))
    shell._stacks["network"] = StubStack([pre("update", SG, "nodes", diffs=["ingress"])], fail_with=failure)
    with pytest.raises(UnexpectedChanges) as raised:
        shell.preview("network", refresh=True, expect_no_changes=True)
    assert raised.value.plan.counts == {"update": 1}
    shell._stacks["network"] = StubStack([pre("same", SG, "nodes")])
    assert not shell.preview("network", refresh=True, expect_no_changes=True).has_changes


def test_up_returns_counts_from_the_summary_and_secret_output_keys(shell):
    shell._stacks["network"] = stack = StubStack([pre("create", SUBNET, "a")])
    result = shell.up("network")
    assert (result.layer, result.operation, result.counts) == ("network", "up", {"create": 1, "same": 2})
    assert result.outputs.secret_keys == frozenset({"kubeconfig"})
    assert result.outputs.values == {"vpc_id": "vpc-1", "kubeconfig": CANARY}
    assert [c[0] for c in stack.calls] == ["up", "stack output"]
    assert CANARY not in repr(result.outputs.public())
