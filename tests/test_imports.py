"""Import plans from real state files (the shared fixtures), classification, and the import-plan command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.engine.results import SECRET_SIG
from recovery.survivors.import_plan import ImportPlan, plan_for_survivors, plan_from_state
from recovery.survivors.state_vs_live import LiveItem, classify
from recovery.state.urns import expected_urn, urn_parts
from tests.conftest import STATES

CANARY = "c4n4ry-s3cr3t-value"
FILES = ["aws-bucket.json", "aws-kms-key.json", "aws-iam-oidc-provider.json", "aws-subnet-group.json",
         "checkpoint-v3.json", "checkpoint-secrets.json", "checkpoint-v1.json"]


def resources_of(name: str) -> list[dict]:
    doc = json.loads((STATES / name).read_text())
    return doc["deployment"]["resources"] if "deployment" in doc else doc["checkpoint"]["latest"]["resources"]


def assert_valid_pulumi_import_file(plan: ImportPlan) -> None:
    """The checks `pulumi import --file` makes (pkg/cmd/pulumi/operations/import.go, parseImportFile)."""
    data = plan.to_pulumi_json()
    assert set(data) <= {"nameTable", "resources", "providerInputs"}
    for key in data.get("providerInputs", {}):
        assert urn_parts(data["nameTable"][key])[2].startswith("pulumi:providers:"), key
    names = [r["name"] for r in data["resources"]]
    assert len(names) == len(set(names)), "every name must be unique, or parent references are ambiguous"
    assert not set(names) & set(data["nameTable"])
    for r in data["resources"]:
        assert set(r) <= {"type", "name", "id", "parent", "provider", "version", "component", "logicalName"}
        assert r["type"] and r["name"]
        assert ("id" in r) != bool(r.get("component")), r  # custom: an id; component: none
        if "parent" in r:
            assert r["parent"] in names or r["parent"] in data["nameTable"], r
        if "provider" in r:
            assert r["provider"] in data["nameTable"], "a provider must be a nameTable URN"
    for urn in data["nameTable"].values():
        assert urn_parts(urn), urn


# What each fixture's custom AWS resources must import as: (type, logical name) → import ID.
EXPECTED = {
    "aws-bucket.json": {("aws:s3/bucket:Bucket", "tested-resource"): "testbucket-p-it-antons-mac-bucket-9f59db4a"},
    "aws-kms-key.json": {("aws:kms/key:Key", "a"): "7085f966-4bed-4480-a64b-bc3c91773751"},
    "aws-iam-oidc-provider.json": {
        ("aws:iam/openIdConnectProvider:OpenIdConnectProvider", "default"):
            "arn:aws:iam::616138583583:oidc-provider/accounts.google.com"},
    "aws-subnet-group.json": {
        ("aws:ec2/vpc:Vpc", "myVpc"): "vpc-0fe32922af7ae59ee",
        ("aws:ec2/subnet:Subnet", "mysubnet"): "subnet-0c7fa5789dd25cd20",
        ("aws:ec2/subnet:Subnet", "mysubnet2"): "subnet-0564be685b5f37bfc",
        ("aws:rds/subnetGroup:SubnetGroup", "subnetgroup"): "subnetgroup-61ea626"},
}
CHECKPOINT_EXPECTED = {
    ("aws:sns/topic:Topic", "unhandled-error-topic"):
        "arn:aws:sns:us-east-2:153052954103:unhandled-error-topic-ddd8c2cd9a876715",
    ("aws:iam/role:Role", "heartbeat-iamrole"): "heartbeat-iamrole-ea19407f5d1f9983",
    ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "heartbeat-iampolicy-1"):
        "heartbeat-iamrole-ea19407f5d1f9983/arn:aws:iam::aws:policy/AmazonEC2ContainerServiceFullAccess",
    ("aws:lambda/function:Function", "heartbeat"): "heartbeat-5614fce52cdefed1",
    ("aws:cloudwatch/logGroup:LogGroup", "heartbeat-func-logs"): "/aws/lambda/heartbeat-5614fce52cdefed1",
    ("aws:sns/topicSubscription:TopicSubscription", "countDown_watcher"):
        "arn:aws:sns:us-east-2:153052954103:countDown-9d430501c4510322:c4790d7c-8106-438a-b368-cc7ade3eefc8",
    ("aws:cloudwatch/eventRule:EventRule", "heartbeat"): "heartbeat-c7779a3d5f53ed1e",
    ("aws:cloudwatch/eventTarget:EventTarget", "heartbeat"): "heartbeat-c7779a3d5f53ed1e/heartbeat",
    ("aws:lambda/permission:Permission", "heartbeat"): "heartbeat-5614fce52cdefed1/heartbeat-15d43252e0160c80",
    ("aws:lambda/permission:Permission", "countDown_watcher"):
        "countDown_watcher-560cf0c8d799e9cd/countDown_watcher-aa73943ce15ac420",
    ("aws:cloudwatch/logSubscriptionFilter:LogSubscriptionFilter", "heartbeat"):
        "/aws/lambda/heartbeat-5614fce52cdefed1|heartbeat-26ff913c249c7734",
}
for _f in ("checkpoint-v3.json", "checkpoint-secrets.json", "checkpoint-v1.json"):
    EXPECTED[_f] = CHECKPOINT_EXPECTED


def by_logical(plan: ImportPlan) -> dict[tuple[str, str], dict]:
    return {(r["type"], r.get("logicalName", r["name"])): r for r in plan.to_pulumi_json()["resources"]}


@pytest.mark.parametrize("name", FILES)
def test_each_shared_state_yields_a_complete_valid_plan(name):
    resources = resources_of(name)
    plan = plan_from_state(resources)
    assert_valid_pulumi_import_file(plan)
    assert plan.skipped == ()
    customs = [r for r in resources if r.get("custom") and not r["type"].startswith("pulumi:")]
    assert plan.custom_count == len(customs)
    entries = by_logical(plan)
    for key, want in EXPECTED[name].items():
        assert entries[key]["id"] == want, key
    # Providers and the stack are referenced or implied, never imported.
    assert not any(r["type"].startswith("pulumi:") for r in plan.to_pulumi_json()["resources"])


@pytest.mark.parametrize("name", [f for f in FILES if f.startswith("aws-")])
def test_modern_states_reimport_under_their_original_urns(name):
    plan = plan_from_state(resources_of(name))
    assert plan.urn_changes == {}
    for entry in plan.resources:
        stack, project, _, _ = urn_parts(entry.source_urn)
        assert expected_urn(stack, project, entry.type, entry.logical_name or entry.name, None) == entry.source_urn


def test_explicit_provider_is_referenced_through_the_name_table():
    plan = plan_from_state(resources_of("aws-bucket.json")).to_pulumi_json()
    (bucket,) = plan["resources"]
    assert bucket["provider"] == "provider"
    assert plan["nameTable"]["provider"] == "urn:pulumi:p-it-antons-mac-bucket-9f59db4a::test::pulumi:providers:aws::provider"
    assert "parent" not in bucket  # the root stack is the default parent


def test_default_provider_is_left_to_pulumi_with_its_version():
    resources = resources_of("aws-kms-key.json")
    plan = plan_from_state(resources).to_pulumi_json()
    assert plan["nameTable"] == {}
    assert "provider" not in plan["resources"][0]
    default = dict(resources[1], inputs={"version": "5.42.0"})
    plan = plan_from_state([resources[0], default, resources[2]]).to_pulumi_json()
    assert plan["resources"][0]["version"] == "5.42.0"


def test_components_are_recreated_so_children_keep_their_parents():
    plan = plan_from_state(resources_of("checkpoint-v3.json"))
    data = plan.to_pulumi_json()
    components = {r["name"]: r for r in data["resources"] if r.get("component")}
    assert {r["type"] for r in components.values()} == {"cloud:topic:Topic", "cloud:function:Function",
                                                        "aws:serverless:Function", "cloud:timer:Timer"}
    target = by_logical(plan)[("aws:cloudwatch/eventTarget:EventTarget", "heartbeat")]
    assert components[target["parent"]]["type"] == "cloud:timer:Timer"
    # Entries come after their parents, and the duplicated logical names got distinct `name`s.
    order = [r["name"] for r in data["resources"]]
    assert all(order.index(r["parent"]) < order.index(r["name"]) for r in data["resources"] if "parent" in r)
    assert by_logical(plan)[("aws:lambda/function:Function", "heartbeat")]["name"] != "heartbeat"
    # This 2017 state predates parent types in URNs: the plan says so instead of pretending.
    assert plan.urn_changes and any("URN" in n for n in plan.notes)


def test_secret_import_fields_leave_the_resource_out_and_never_leak():
    secret = {SECRET_SIG[0]: SECRET_SIG[1], "ciphertext": CANARY}
    resources = resources_of("checkpoint-secrets.json")
    hostile = []
    for r in resources:
        if r["urn"].endswith("Permission::heartbeat"):
            r = dict(r, inputs=dict(r["inputs"], function=secret), outputs=dict(r["outputs"], function=secret))
        hostile.append(r)
    plan = plan_from_state(hostile)
    assert [s.urn.rsplit("::", 1)[-1] for s in plan.skipped] == ["heartbeat"]
    assert "secret" in plan.skipped[0].reason
    assert CANARY not in json.dumps(plan.to_pulumi_json()) + json.dumps(plan.summary())


def test_hostile_shapes_do_not_break_the_planner():
    stack = "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s"
    a = "urn:pulumi:s::p::my:comp:A::a"
    b = "urn:pulumi:s::p::my:comp:B::b"
    resources = [
        {"urn": stack, "type": "pulumi:pulumi:Stack", "custom": False},
        {"urn": a, "type": "my:comp:A", "custom": False, "parent": b},          # a cycle a ↔ b
        {"urn": b, "type": "my:comp:B", "custom": False, "parent": a},
        {"urn": "urn:pulumi:s::p::aws:ec2/vpc:Vpc::v", "type": "aws:ec2/vpc:Vpc", "custom": True, "id": "vpc-1",
         "parent": "urn:pulumi:s::p::gone:x:Y::missing", "provider": 42, "outputs": "not a dict"},
        {"urn": "urn:pulumi:s::p::aws:ec2/vpc:Vpc::v", "type": "aws:ec2/vpc:Vpc", "custom": True, "id": "vpc-0",
         "delete": True},
        {"urn": "urn:pulumi:s::p::aws:ec2/vpc:Vpc::ext", "type": "aws:ec2/vpc:Vpc", "custom": True, "id": "vpc-2",
         "external": True},
        "not a resource", {"type": "no urn"},
    ]
    plan = plan_from_state(resources)
    assert_valid_pulumi_import_file(plan)
    vpc = by_logical(plan)[("aws:ec2/vpc:Vpc", "v")]
    assert vpc["id"] == "vpc-1"  # the deleted duplicate is ignored
    assert plan.to_pulumi_json()["nameTable"][vpc["parent"]].endswith("::missing")
    assert [s.reason for s in plan.skipped if s.urn.endswith("::ext")]


# --- classification ---------------------------------------------------------------------------

STATE = [
    {"urn": "urn:pulumi:dev::network::pulumi:pulumi:Stack::network-dev", "type": "pulumi:pulumi:Stack", "custom": False},
    {"urn": "urn:pulumi:dev::network::pulumi:providers:aws::aws", "type": "pulumi:providers:aws", "custom": True,
     "id": "p1", "inputs": {"region": "us-east-1"}},
    {"urn": "urn:pulumi:dev::network::aws:ec2/vpc:Vpc::vpc", "type": "aws:ec2/vpc:Vpc", "custom": True, "id": "vpc-1"},
    {"urn": "urn:pulumi:dev::network::aws:ec2/subnet:Subnet::gone", "type": "aws:ec2/subnet:Subnet", "custom": True,
     "id": "subnet-dead"},
    {"urn": "urn:pulumi:dev::network::aws:ec2/route:Route::rt-route-default", "type": "aws:ec2/route:Route",
     "custom": True, "id": "r-rtb-11080289494", "outputs": {"routeTableId": "rtb-1", "destinationCidrBlock": "0.0.0.0/0"}},
    {"urn": "urn:pulumi:dev::network::aws:sns/topic:Topic::t", "type": "aws:sns/topic:Topic", "custom": True, "id": "arn:t"},
]
LIVE = [
    LiveItem("aws:ec2/vpc:Vpc", "vpc", "vpc-1", "arn:vpc"),
    LiveItem("aws:ec2/route:Route", "rt-route-default", "rtb-1_0.0.0.0/0", None, "rt"),
    LiveItem("aws:ec2/subnet:Subnet", "private-subnet-0", "subnet-2", "arn:s2", region="us-east-1"),
    LiveItem("aws:ec2/natGateway:NatGateway", "nat-0", "nat-1", "arn:n"),
    LiveItem("aws:ec2/subnet:Subnet", None, "subnet-3", "arn:s3"),
]
PENDING = [{"type": "creating", "resource": {"urn": "urn:pulumi:dev::network::aws:ec2/natGateway:NatGateway::nat-0",
                                             "type": "aws:ec2/natGateway:NatGateway", "custom": True}},
           {"type": "creating", "resource": {"urn": "urn:pulumi:dev::network::aws:ec2/eip:Eip::eip-9",
                                             "type": "aws:ec2/eip:Eip", "custom": True}}]


def test_classify_state_against_live():
    got = classify(STATE, LIVE, PENDING, inventoried_types={"aws:ec2/vpc:Vpc", "aws:ec2/subnet:Subnet",
                                                           "aws:ec2/route:Route", "aws:ec2/natGateway:NatGateway",
                                                           "aws:ec2/eip:Eip"})
    assert [(s.name, l.import_id) for s, l in got.in_state_and_live] == [("vpc", "vpc-1"), ("rt-route-default", "rtb-1_0.0.0.0/0")]
    assert [i.name for i in got.survivors] == ["private-subnet-0", "nat-0"]
    assert [s.name for s in got.in_state_not_live] == ["gone"]
    assert [s.name for s in got.not_checked] == ["t"]  # SNS was not inventoried: neither live nor gone
    assert [(p.name, p.live is not None) for p in got.pending_creates] == [("nat-0", True), ("eip-9", False)]
    assert [i.import_id for i in got.unnamed] == ["subnet-3"]


def test_plan_for_survivors_uses_the_states_provider_and_declared_parents():
    got = classify(STATE, LIVE)
    parents = {("aws:ec2/natGateway:NatGateway", "nat-0"): "urn:pulumi:dev::network::my:net:Zone::zone-0"}
    plan = plan_for_survivors(got.survivors, STATE, parents)
    assert_valid_pulumi_import_file(plan)
    data = plan.to_pulumi_json()
    by_name = {r["name"]: r for r in data["resources"]}
    assert by_name["private-subnet-0"] == {"type": "aws:ec2/subnet:Subnet", "name": "private-subnet-0",
                                           "id": "subnet-2", "provider": "aws"}
    assert data["nameTable"]["aws"] == "urn:pulumi:dev::network::pulumi:providers:aws::aws"
    assert data["nameTable"][by_name["nat-0"]["parent"]].endswith("::zone-0")


def test_plan_for_survivors_picks_the_provider_of_the_survivors_region():
    two = STATE + [{"urn": "urn:pulumi:dev::network::pulumi:providers:aws::aws-replica", "type": "pulumi:providers:aws",
                    "custom": True, "id": "p2", "inputs": {"region": "eu-west-1"}}]
    replica = LiveItem("aws:s3/bucket:Bucket", "replica-bucket", "b-replica", "arn:aws:s3:::b-replica", region="eu-west-1")
    unknown = LiveItem("aws:s3/bucket:Bucket", "other", "b-other", "arn:aws:s3:::b-other")
    plan = plan_for_survivors([replica, unknown], two)
    by_name = {r["name"]: r for r in plan.to_pulumi_json()["resources"]}
    assert plan.name_table[by_name["replica-bucket"]["provider"]].endswith("::aws-replica")
    assert "provider" not in by_name["other"] and any("other" in n for n in plan.notes)


# --- the command --------------------------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from groundctl import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_the_plan_and_reports_json(tmp_path: Path):
    out = tmp_path / "import.json"
    done = run_cli("state", "import-plan", str(STATES / "aws-subnet-group.json"), "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    written = json.loads(out.read_text())
    assert written == report["plan"]
    assert [r["id"] for r in written["resources"]] == ["vpc-0fe32922af7ae59ee", "subnet-0c7fa5789dd25cd20",
                                                       "subnet-0564be685b5f37bfc", "subnetgroup-61ea626"]
    again = run_cli("state", "import-plan", str(STATES / "aws-subnet-group.json"), "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr


def test_cli_exit_codes_for_a_partial_plan_and_for_a_non_state(tmp_path: Path):
    doc = json.loads((STATES / "checkpoint-secrets.json").read_text())
    for r in doc["checkpoint"]["latest"]["resources"]:
        if r["urn"].endswith("Permission::heartbeat"):
            r["outputs"]["function"] = {SECRET_SIG[0]: SECRET_SIG[1], "ciphertext": CANARY}
            r["inputs"]["function"] = {SECRET_SIG[0]: SECRET_SIG[1], "ciphertext": CANARY}
    src = tmp_path / "state.json"
    src.write_text(json.dumps(doc))
    done = run_cli("state", "import-plan", str(src), "--out", str(tmp_path / "p.json"))
    assert done.returncode == 1
    assert "Permission::heartbeat" in done.stderr and CANARY not in done.stderr + done.stdout
    assert CANARY not in (tmp_path / "p.json").read_text()
    junk = tmp_path / "junk.json"
    junk.write_text("[1, 2")
    bad = run_cli("state", "import-plan", str(junk), "--out", str(tmp_path / "q.json"))
    assert bad.returncode == 2 and "not a readable Pulumi state" in bad.stderr
    assert not (tmp_path / "q.json").exists()


def test_a_resource_replaced_outside_pulumi_is_not_merged_with_its_old_state_entry():
    state = [{"urn": "urn:pulumi:dev::network::aws:ec2/vpc:Vpc::vpc", "type": "aws:ec2/vpc:Vpc", "custom": True,
              "id": "vpc-old"},
             {"urn": "urn:pulumi:dev::network::aws:eks/addon:Addon::coredns", "type": "aws:eks/addon:Addon",
              "custom": True, "id": "c:coredns", "outputs": {"clusterName": "c"}}]  # addonName not recorded
    live = [LiveItem("aws:ec2/vpc:Vpc", "vpc", "vpc-new"), LiveItem("aws:eks/addon:Addon", "coredns", "c:coredns")]
    got = classify(state, live)
    assert [s.import_id for s in got.in_state_not_live] == ["vpc-old"]
    assert [i.import_id for i in got.survivors] == ["vpc-new"]
    assert [(s.name, i.import_id) for s, i in got.in_state_and_live] == [("coredns", "c:coredns")]
