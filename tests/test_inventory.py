"""Inventory against the emulator, classification of its findings, and coverage of every layer program."""

from __future__ import annotations

import json
import uuid

import pytest

from bootstrap.layers import LAYER_NAMES
from recovery.survivors.identify import CHILD_TYPES, Tagged, child_name, classify_arn, discovery, item_from_tagged
from recovery.survivors.import_ids import KUBERNETES, rule_for
from recovery.survivors.import_plan import plan_for_survivors
from recovery.survivors.inventory import collect
from recovery.survivors.state_vs_live import classify
from stacks.common import naming

POLICY_DOC = json.dumps({"Version": "2012-10-17",
                         "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}]})


def tags(env: str, layer: str, name: str | None) -> list[dict]:
    out = [{"Key": naming.TAG_ENV, "Value": env}, {"Key": naming.TAG_LAYER, "Value": layer}]
    return out + ([{"Key": naming.TAG_NAME, "Value": name}] if name else [])


def spec(kind: str, env: str, layer: str, name: str | None) -> list[dict]:
    return [{"ResourceType": kind, "Tags": tags(env, layer, name)}]


@pytest.fixture
def world(aws):
    """A small environment in the emulator: network pieces, a role with attachments, a bucket with settings,
    plus look-alikes of another environment and another layer that must not be picked up."""
    env = f"t{uuid.uuid4().hex[:8]}"
    ec2, iam, s3 = aws.client("ec2"), aws.client("iam"), aws.client("s3")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=spec("vpc", env, "network", "vpc"))["Vpc"]["VpcId"]
    sub = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24",
                             TagSpecifications=spec("subnet", env, "network", f"private-subnet-{i}"))["Subnet"]["SubnetId"]
           for i in range(2)]
    igw = ec2.create_internet_gateway(TagSpecifications=spec("internet-gateway", env, "network", "igw"))
    igw = igw["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    rtb = ec2.create_route_table(VpcId=vpc, TagSpecifications=spec("route-table", env, "network", "private-rt-0"))
    rtb = rtb["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=rtb, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    ec2.create_route(RouteTableId=rtb, DestinationCidrBlock="192.168.0.0/16", GatewayId=igw)
    for s in sub:
        ec2.associate_route_table(RouteTableId=rtb, SubnetId=s)
    role = f"{env}-node-role"
    iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}", Tags=tags(env, "network", "node-role"))
    policies = [iam.create_policy(PolicyName=f"{env}-p{i}", PolicyDocument=POLICY_DOC)["Policy"]["Arn"] for i in range(2)]
    for arn in policies:
        iam.attach_role_policy(RoleName=role, PolicyArn=arn)
    iam.put_role_policy(RoleName=role, PolicyName="node-role-policy-0a1b2c3", PolicyDocument=POLICY_DOC)
    bucket = f"{env}-state"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags(env, "network", "state-bucket")})
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True})
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": f"arn:aws:s3:::{bucket}/*",
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]}))
    # Look-alikes: same names, another environment or another layer; and one without a name tag.
    ec2.create_vpc(CidrBlock="10.1.0.0/16", TagSpecifications=spec("vpc", env + "x", "network", "vpc"))
    ec2.create_vpc(CidrBlock="10.2.0.0/16", TagSpecifications=spec("vpc", env, "cluster", "vpc"))
    unnamed = ec2.create_security_group(GroupName=f"{env}-sg", Description="d", VpcId=vpc,
                                        TagSpecifications=spec("security-group", env, "network", None))["GroupId"]
    return {"env": env, "vpc": vpc, "subnets": sub, "igw": igw, "rtb": rtb, "role": role, "policies": policies,
            "bucket": bucket, "unnamed_sg": unnamed}


def live_network(w) -> dict:
    """Every (type, logical name) -> import ID the world's network layer has live, as inventory sees it."""
    return {
        ("aws:ec2/vpc:Vpc", "vpc"): w["vpc"],
        ("aws:ec2/subnet:Subnet", "private-subnet-0"): w["subnets"][0],
        ("aws:ec2/subnet:Subnet", "private-subnet-1"): w["subnets"][1],
        ("aws:ec2/internetGateway:InternetGateway", "igw"): w["igw"],
        ("aws:ec2/routeTable:RouteTable", "private-rt-0"): w["rtb"],
        ("aws:ec2/route:Route", "private-rt-0-route-default"): f"{w['rtb']}_0.0.0.0/0",
        ("aws:ec2/route:Route", "private-rt-0-route-192-168-0-0-16"): f"{w['rtb']}_192.168.0.0/16",
        ("aws:ec2/routeTableAssociation:RouteTableAssociation", "private-subnet-0-rta"): f"{w['subnets'][0]}/{w['rtb']}",
        ("aws:ec2/routeTableAssociation:RouteTableAssociation", "private-subnet-1-rta"): f"{w['subnets'][1]}/{w['rtb']}",
        ("aws:iam/role:Role", "node-role"): w["role"],
        ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"node-role-{w['env']}-p0"): f"{w['role']}/{w['policies'][0]}",
        ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"node-role-{w['env']}-p1"): f"{w['role']}/{w['policies'][1]}",
        ("aws:iam/rolePolicy:RolePolicy", "node-role-policy"): f"{w['role']}:node-role-policy-0a1b2c3",
        ("aws:s3/bucket:Bucket", "state-bucket"): w["bucket"],
        ("aws:s3/bucketVersioning:BucketVersioning", "state-bucket-versioning"): w["bucket"],
        ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "state-bucket-public-access-block"): w["bucket"],
        ("aws:s3/bucketPolicy:BucketPolicy", "state-bucket-policy"): w["bucket"],
        ("aws:ec2/securityGroup:SecurityGroup", None): w["unnamed_sg"],
    }


def test_inventory_finds_tagged_resources_and_their_children(aws, world):
    inv = collect(aws, world["env"], "network")
    got = {(i.type, i.name): i.import_id for i in inv.items}
    expected = live_network(world)
    assert got == expected  # nothing from the other environment or layer, no phantom settings
    assert inv.tagging_pages == 1
    assert any("has no `groundctl:name` tag" in m for m in inv.warnings)


def test_classification_against_a_state_that_lacks_some(aws, world):
    w = world
    urn = f"urn:pulumi:{w['env']}::network::"
    state = [
        {"urn": urn + "pulumi:pulumi:Stack::network-" + w["env"], "type": "pulumi:pulumi:Stack", "custom": False},
        {"urn": urn + "pulumi:providers:aws::aws", "type": "pulumi:providers:aws", "custom": True, "id": "p",
         "inputs": {"region": "us-east-1"}},
        {"urn": urn + "aws:ec2/vpc:Vpc::vpc", "type": "aws:ec2/vpc:Vpc", "custom": True, "id": w["vpc"]},
        {"urn": urn + "aws:ec2/subnet:Subnet::private-subnet-0", "type": "aws:ec2/subnet:Subnet", "custom": True,
         "id": w["subnets"][0]},
        {"urn": urn + "aws:ec2/subnet:Subnet::private-subnet-9", "type": "aws:ec2/subnet:Subnet", "custom": True,
         "id": "subnet-0000000000dead"},
        {"urn": urn + "aws:iam/role:Role::node-role", "type": "aws:iam/role:Role", "custom": True, "id": w["role"],
         "outputs": {"name": w["role"]}},
        {"urn": urn + f"aws:iam/rolePolicyAttachment:RolePolicyAttachment::node-role-{w['env']}-p0",
         "type": "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "custom": True, "id": f"{w['role']}-2024",
         "outputs": {"role": w["role"], "policyArn": w["policies"][0]}},
    ]
    inv = collect(aws, w["env"], "network")
    result = classify(state, inv.items, inventoried_types=inv.types_covered)
    assert {s.name for s, _ in result.in_state_and_live} == {"vpc", "private-subnet-0", "node-role",
                                                            f"node-role-{w['env']}-p0"}
    assert [s.name for s in result.in_state_not_live] == ["private-subnet-9"]
    assert [i.import_id for i in result.unnamed] == [w["unnamed_sg"]]
    survivors = {(i.type, i.name): i.import_id for i in result.survivors}
    in_state_or_unnamed = {("aws:ec2/vpc:Vpc", "vpc"), ("aws:ec2/subnet:Subnet", "private-subnet-0"),
                           ("aws:iam/role:Role", "node-role"),
                           ("aws:iam/rolePolicyAttachment:RolePolicyAttachment", f"node-role-{w['env']}-p0"),
                           ("aws:ec2/securityGroup:SecurityGroup", None)}
    assert survivors == {k: v for k, v in live_network(w).items() if k not in in_state_or_unnamed}
    plan = plan_for_survivors(result.survivors, state).to_pulumi_json()
    assert plan["nameTable"] == {"aws": urn + "pulumi:providers:aws::aws"}
    assert {(r["type"], r["name"], r["id"], r["provider"]) for r in plan["resources"]} == \
        {(t, n, i, "aws") for (t, n), i in survivors.items()}


def test_pagination_reads_the_minimum_number_of_pages(aws):
    env = f"t{uuid.uuid4().hex[:8]}"
    logs = aws.client("logs")
    for i in range(205):
        logs.create_log_group(logGroupName=f"/{env}/g{i}", tags={naming.TAG_ENV: env, naming.TAG_LAYER: "network",
                                                                 naming.TAG_NAME: f"g{i}", "extra": "x"})
    inv = collect(aws, env, "network", with_children=False, with_supplements=False)
    assert len(inv.items) == 205 and {i.name for i in inv.items} == {f"g{i}" for i in range(205)}
    assert inv.tagging_pages == inv.minimum_pages == 3


def test_arn_classification_covers_the_aws_and_emulator_spellings():
    assert classify_arn("arn:aws:ec2:us-east-1:1:vpc-flow-log/fl-1")[0] == "aws:ec2/flowLog:FlowLog"
    assert classify_arn("arn:aws:ec2:us-east-1:1:flow-logs/fl-1")[0] == "aws:ec2/flowLog:FlowLog"
    assert classify_arn("arn:aws:logs:us-east-1:1:log-group:/a/b:*")[1] == {"name": "/a/b"}
    assert classify_arn("arn:aws:iam::1:role/path/dev-role")[1]["name"] == "dev-role"
    assert classify_arn("arn:aws:eks:us-east-1:1:nodegroup/c/ng/uuid")[1] == {"clusterName": "c", "nodeGroupName": "ng"}
    assert classify_arn("arn:aws:sqs:us-east-1:1:queue") is None


# --- every type each layer program declares is discoverable ---------------------------------------

def _declared(layer: str):
    """The layer program's declared resources, from H1's mock harness (the real program, mock runtime)."""
    from bootstrap.planning.mockrun import run_program
    from bootstrap.spec import load_spec
    from bootstrap.spec.stack_config import layer_config

    spec_ = load_spec("prod")  # prod declares the most: replica bucket, NAT per AZ, admins
    upstream = {
        "backend": {"bucket_name": "b", "bucket_arn": "arn:aws:s3:::b", "kms_key_arn": "arn:aws:kms:us-east-1:1:key/k",
                    "kms_alias": "alias/x", "secrets_provider": "awskms://alias/x", "groundctl_lineage": "l"},
        "network": {"vpc_id": "vpc-1", "vpc_cidr": "10.0.0.0/16", "availability_zones": ["a", "b", "c"],
                    "private_subnet_ids": ["s1", "s2", "s3"], "public_subnet_ids": ["s4", "s5", "s6"],
                    "groundctl_lineage": "l"},
        "cluster": {"cluster_name": "c", "cluster_endpoint": "https://c", "cluster_arn": "arn:c",
                    "oidc_provider_arn": "arn:o", "node_role_arn": "arn:r", "kubeconfig": "{}", "groundctl_lineage": "l"},
    }
    env = {"GROUNDCTL_FLUX_DEPLOY_KEY": "dummy-key", "GROUNDCTL_FLUX_KNOWN_HOSTS": "github.com ssh-ed25519 AAAA"}
    run = run_program(layer, spec_.name, layer_config(spec_, layer, environ=env), upstream)
    return run.resources


def _mock_ref(value: object) -> str | None:
    # The mock harness answers each resource's id with "(id of <logical name>)".
    text = str(value)
    return text[len("(id of "):-1] if text.startswith("(id of ") and text.endswith(")") else None


@pytest.mark.parametrize("layer", LAYER_NAMES)
def test_every_declared_type_is_discoverable_and_children_are_named_as_the_program_names_them(layer):
    resources = _declared(layer)
    physical = {r.inputs.get("name"): r.name for r in resources if isinstance(r.inputs.get("name"), str)}
    entries = {(r.inputs.get("clusterName"), r.inputs.get("principalArn")): r.name
               for r in resources if r.type == "aws:eks/accessEntry:AccessEntry"}
    cloud = [r for r in resources if r.custom and not r.type.startswith("pulumi:")]
    assert cloud, f"{layer} declares no resources"
    for r in cloud:
        if r.type.startswith("kubernetes:"):
            # Flux objects live in the cluster, not behind AWS tags: found by namespace/name through the
            # cluster API. groundctl's AWS inventory does not list them (flux recovery re-applies them).
            assert rule_for(r.type).discovery == KUBERNETES, r.type
            continue
        how = discovery(r.type)
        assert how is not None, f"{layer}: {r.type} ({r.name}) cannot be found by tag or through a parent"
        if r.type not in CHILD_TYPES:
            continue
        # The inventory must rebuild this child's logical name from what it reads in AWS.
        props = dict(r.inputs)
        if r.type == "aws:ec2/routeTableAssociation:RouteTableAssociation":
            parent, props["subnetName"] = _mock_ref(r.inputs["routeTableId"]), _mock_ref(r.inputs["subnetId"])
        elif r.type == "aws:ec2/route:Route":
            parent = _mock_ref(r.inputs["routeTableId"])
        elif r.type == "aws:iam/rolePolicyAttachment:RolePolicyAttachment":
            parent = physical.get(r.inputs["role"]) or _mock_ref(r.inputs["role"])
        elif r.type == "aws:iam/rolePolicy:RolePolicy":
            parent = _mock_ref(r.inputs["role"]) or physical.get(r.inputs["role"])
            props["name"] = r.inputs.get("name") or f"{r.name}-0a1b2c3"  # Pulumi auto-names it in AWS
        elif r.type == "aws:kms/alias:Alias":
            keys = [k.name for k in resources if k.type == "aws:kms/key:Key"]
            parent = next((k for k in keys if child_name(r.type, k, props) == r.name), keys[0])
        elif r.type == "aws:eks/accessPolicyAssociation:AccessPolicyAssociation":
            parent = entries[(r.inputs["clusterName"], r.inputs["principalArn"])]
        else:  # bucket settings
            parent = _mock_ref(r.inputs["bucket"])
        assert parent, f"{layer}: cannot tell the parent of {r.name}"
        assert child_name(r.type, parent, props) == r.name, f"{layer}: inventory would name {r.name} differently"


# --- access entries: the ARN shapes EKS returns --------------------------------------------------
# AWS Service Authorization Reference, Amazon EKS resource types: an access entry's ARN is
# arn:${Partition}:eks:${Region}:${Account}:access-entry/${ClusterName}/${IamIdentityType}/
# ${IamIdentityAccountID}/${IamIdentityName}/${UUID} — the principal's IAM path is not in it.

ACCT = "111122223333"
CLUSTER = "dev-eks"
ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"


def entry_arn(kind: str, name: str, uuid_: str, partition: str = "aws", cluster: str = CLUSTER) -> str:
    return f"arn:{partition}:eks:us-east-1:{ACCT}:access-entry/{cluster}/{kind}/{ACCT}/{name}/{uuid_}"


@pytest.mark.parametrize("arn,expected", [
    (entry_arn("role", "ops-admin", "54cae684-118a-2dd9-2a3d-01868c5231fa"),
     {"clusterName": CLUSTER, "principalArn": f"arn:aws:iam::{ACCT}:role/ops-admin"}),
    (entry_arn("user", "alice", "0ec7b0d5-8e37-73b4-0a4a-0c6b2e4f0f61"),
     {"clusterName": CLUSTER, "principalArn": f"arn:aws:iam::{ACCT}:user/alice"}),
    (entry_arn("role", "ops-admin", "54cae684-118a-2dd9-2a3d-01868c5231fa", partition="aws-cn"),
     {"clusterName": CLUSTER, "principalArn": f"arn:aws-cn:iam::{ACCT}:role/ops-admin"}),
])
def test_an_access_entry_arn_gives_its_cluster_and_principal(arn, expected):
    typ, props = classify_arn(arn)
    assert typ == "aws:eks/accessEntry:AccessEntry" and props == expected
    item = item_from_tagged(Tagged(arn, {naming.TAG_NAME: "admin-ops-admin"}), "cluster", "us-east-1")
    assert item.import_id == f"{CLUSTER}:{expected['principalArn']}"  # the documented `cluster_name:principal_arn`


def test_a_malformed_access_entry_arn_is_not_called_a_foreign_type():
    why = item_from_tagged(Tagged(f"arn:aws:eks:us-east-1:{ACCT}:access-entry/{CLUSTER}/x", {}))
    assert isinstance(why, str) and "aws:eks/accessEntry:AccessEntry" in why and "principalArn" in why
    assert "not a type groundctl's programs create" not in why


class _FakeEks:
    """EKS as AWS answers it (the emulator has no access entries): entries by principal, in pages."""

    def __init__(self, entries: dict[str, list[str]], page: int = 2):
        self.entries, self.page, self.calls = entries, page, []

    def list_access_entries(self, clusterName, nextToken=None):
        self.calls.append("list_access_entries")
        principals = sorted(self.entries)
        start = int(nextToken or 0)
        out = {"accessEntries": principals[start:start + self.page]}
        if start + self.page < len(principals):
            out["nextToken"] = str(start + self.page)
        return out

    def list_associated_access_policies(self, clusterName, principalArn):
        self.calls.append("list_associated_access_policies")
        return {"clusterName": clusterName, "principalArn": principalArn, "associatedAccessPolicies": [
            {"policyArn": p, "accessScope": {"type": "cluster", "namespaces": []}} for p in self.entries[principalArn]]}


class _FakeTagging:
    def __init__(self, mappings):
        self.mappings = mappings

    def get_resources(self, **_):
        return {"ResourceTagMappingList": self.mappings, "PaginationToken": ""}


class _FakeAws:
    region = "us-east-1"

    def __init__(self, **clients):
        self.clients = clients

    def client(self, service, region=None):
        return self.clients[service]


def test_access_entries_and_their_policy_associations_are_inventoried():
    env = "dev"
    path_role = f"arn:aws:iam::{ACCT}:role/admins/break-glass"   # a role with an IAM path
    plain_role = f"arn:aws:iam::{ACCT}:role/ops-admin"
    user = f"arn:aws:iam::{ACCT}:user/alice"
    other = f"arn:aws:iam::{ACCT}:role/not-ours"                   # listed, but not tagged for this layer
    eks = _FakeEks({path_role: [ADMIN_POLICY], plain_role: [ADMIN_POLICY], user: [], other: [ADMIN_POLICY]})
    tagged = [(entry_arn("role", "break-glass", "11111111-1111-1111-1111-111111111111"), "admin-break-glass"),
              (entry_arn("role", "ops-admin", "22222222-2222-2222-2222-222222222222"), "admin-ops-admin"),
              (entry_arn("user", "alice", "33333333-3333-3333-3333-333333333333"), "admin-alice"),
              (entry_arn("role", "gone", "44444444-4444-4444-4444-444444444444"), "admin-gone")]
    aws = _FakeAws(eks=eks, resourcegroupstaggingapi=_FakeTagging(
        [{"ResourceARN": arn, "Tags": tags(env, "cluster", name)} for arn, name in tagged]))
    wanted = {"aws:eks/accessEntry:AccessEntry", "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"}

    inv = collect(aws, env, "cluster", types=wanted, with_supplements=False)

    got = {(i.type.rsplit(":", 1)[-1], i.name, i.import_id, i.parent_name) for i in inv.items}
    assert got == {
        ("AccessEntry", "admin-break-glass", f"{CLUSTER}:{path_role}", None),
        ("AccessEntry", "admin-ops-admin", f"{CLUSTER}:{plain_role}", None),
        ("AccessEntry", "admin-alice", f"{CLUSTER}:{user}", None),
        ("AccessPolicyAssociation", "admin-break-glass-AmazonEKSClusterAdminPolicy",
         f"{CLUSTER}#{path_role}#{ADMIN_POLICY}", "admin-break-glass"),
        ("AccessPolicyAssociation", "admin-ops-admin-AmazonEKSClusterAdminPolicy",
         f"{CLUSTER}#{plain_role}#{ADMIN_POLICY}", "admin-ops-admin"),
    }
    assert len(inv.warnings) == 1 and "role/gone" in inv.warnings[0] and "deleted" in inv.warnings[0]
    assert not any("not a type groundctl's programs create" in w for w in inv.warnings)
    # One listing per cluster (two pages of two), not a describe per principal per entry.
    assert inv.calls["eks:list_access_entries"] == 2
