"""Import ID formats, one per resource type, against the examples in each type's documented Import section."""

from __future__ import annotations

import pytest

from recovery.survivors.import_ids import (
    KUBERNETES, PARENT, RULES, TAG, import_id, import_id_from_state, rule_for,
)

from bootstrap.engine.results import SECRET_SIG

CANARY = "c4n4ry-s3cr3t-value"


def secret(value: str) -> dict:
    # How Pulumi stores a secret with the b64 provider; the ciphertext must never be decoded or shown.
    return {SECRET_SIG[0]: SECRET_SIG[1], "ciphertext": CANARY}


# (type, properties as in state outputs / inventory, state id, expected import ID). Each expected value
# follows the example of the type's "Import" section in the pulumi-aws docs (rule.source says which).
CASES = [
    ("aws:ec2/route:Route", {"routeTableId": "rtb-656C65616E6F72", "destinationCidrBlock": "10.42.0.0/16"},
     "r-rtb-656C65616E6F721080289494", "rtb-656C65616E6F72_10.42.0.0/16"),
    ("aws:ec2/route:Route", {"routeTableId": "rtb-656C65616E6F72", "destinationIpv6CidrBlock": "2620:0:2d0:200::8/125"},
     None, "rtb-656C65616E6F72_2620:0:2d0:200::8/125"),
    ("aws:ec2/routeTableAssociation:RouteTableAssociation",
     {"subnetId": "subnet-6777656e646f6c796e", "routeTableId": "rtb-656c65616e6f72"}, "rtbassoc-1",
     "subnet-6777656e646f6c796e/rtb-656c65616e6f72"),
    ("aws:ec2/routeTableAssociation:RouteTableAssociation",
     {"gatewayId": "igw-01b3a60780f8d034a", "routeTableId": "rtb-656c65616e6f72"}, "rtbassoc-2",
     "igw-01b3a60780f8d034a/rtb-656c65616e6f72"),
    ("aws:iam/rolePolicyAttachment:RolePolicyAttachment",
     {"role": "test-role", "policyArn": "arn:aws:iam::123456789012:policy/test-policy"}, "test-role-20171108195133331200000001",
     "test-role/arn:aws:iam::123456789012:policy/test-policy"),
    ("aws:iam/rolePolicy:RolePolicy", {"role": "role_of_mypolicy_name", "name": "mypolicy_name"}, None,
     "role_of_mypolicy_name:mypolicy_name"),
    ("aws:eks/nodeGroup:NodeGroup", {"clusterName": "example-cluster", "nodeGroupName": "example-group"}, None,
     "example-cluster:example-group"),
    ("aws:eks/addon:Addon", {"clusterName": "example-cluster", "addonName": "example-addon"}, None,
     "example-cluster:example-addon"),
    ("aws:eks/accessEntry:AccessEntry",
     {"clusterName": "example-cluster", "principalArn": "arn:aws:iam::123456789012:role/example"}, None,
     "example-cluster:arn:aws:iam::123456789012:role/example"),
    ("aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
     {"clusterName": "example-cluster", "principalArn": "arn:aws:iam::123456789012:role/example",
      "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"}, None,
     "example-cluster#arn:aws:iam::123456789012:role/example#arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"),
    ("aws:s3/bucketVersioning:BucketVersioning", {"bucket": "my-bucket"}, "my-bucket", "my-bucket"),
    ("aws:s3/bucketVersioning:BucketVersioning", {"bucket": "my-bucket", "expectedBucketOwner": "123456789012"},
     None, "my-bucket,123456789012"),
    ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
     {"bucket": "my-bucket"}, None, "my-bucket"),
    ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", {"bucket": "my-bucket"}, None, "my-bucket"),
    ("aws:s3/bucketOwnershipControls:BucketOwnershipControls", {"bucket": "my-bucket"}, None, "my-bucket"),
    ("aws:s3/bucketPolicy:BucketPolicy", {"bucket": "my-tf-test-bucket"}, None, "my-tf-test-bucket"),
    ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", {"bucket": "b"}, None, "b"),
    ("aws:s3/bucketReplicationConfig:BucketReplicationConfig", {"bucket": "bucket-name"}, None, "bucket-name"),
    ("aws:s3/bucket:Bucket", {"bucket": "bucket-name"}, "bucket-name", "bucket-name"),
    ("aws:kms/key:Key", {"keyId": "1234abcd-12ab-34cd-56ef-1234567890ab"}, "1234abcd-12ab-34cd-56ef-1234567890ab",
     "1234abcd-12ab-34cd-56ef-1234567890ab"),
    ("aws:kms/alias:Alias", {"name": "alias/my-key-alias"}, "alias/my-key-alias", "alias/my-key-alias"),
    ("aws:iam/openIdConnectProvider:OpenIdConnectProvider",
     {"arn": "arn:aws:iam::123456789012:oidc-provider/accounts.google.com"},
     "arn:aws:iam::123456789012:oidc-provider/accounts.google.com",
     "arn:aws:iam::123456789012:oidc-provider/accounts.google.com"),
    ("aws:iam/role:Role", {"name": "developer_name", "arn": "arn:aws:iam::1:role/developer_name"}, "developer_name",
     "developer_name"),
    ("aws:ec2/flowLog:FlowLog", {}, "fl-1a2b3c4d", "fl-1a2b3c4d"),
    ("aws:cloudwatch/logGroup:LogGroup", {"name": "yada"}, "yada", "yada"),
    ("aws:ec2/vpcEndpoint:VpcEndpoint", {"id": "vpce-3ecf2a57"}, None, "vpce-3ecf2a57"),
    ("aws:ec2/eip:Eip", {"allocationId": "eipalloc-00a10e96"}, None, "eipalloc-00a10e96"),
    ("aws:ec2/natGateway:NatGateway", {}, "nat-05dba92075d71c408", "nat-05dba92075d71c408"),
    ("aws:ec2/vpc:Vpc", {}, "vpc-a01106c2", "vpc-a01106c2"),
    ("aws:ec2/subnet:Subnet", {}, "subnet-9d4a7b6c", "subnet-9d4a7b6c"),
    ("aws:ec2/internetGateway:InternetGateway", {}, "igw-c0a643a9", "igw-c0a643a9"),
    ("aws:ec2/routeTable:RouteTable", {}, "rtb-4e616f6d69", "rtb-4e616f6d69"),
    ("aws:eks/cluster:Cluster", {"name": "example"}, "example", "example"),
    ("aws:cloudwatch/eventRule:EventRule", {"name": "capture-console-sign-in", "eventBusName": "example-event-bus"},
     None, "example-event-bus/capture-console-sign-in"),
    ("aws:cloudwatch/eventRule:EventRule", {"name": "r", "eventBusName": "default"}, None, "r"),
    ("aws:cloudwatch/eventTarget:EventTarget", {"rule": "rule-name", "targetId": "target-id"}, "rule-name-target-id",
     "rule-name/target-id"),
    ("aws:cloudwatch/eventTarget:EventTarget", {"rule": "r", "targetId": "t", "eventBusName": "bus"}, None, "bus/r/t"),
    ("aws:lambda/permission:Permission",
     {"function": "my_test_lambda_function", "statementId": "AllowExecutionFromCloudWatch"}, "AllowExecutionFromCloudWatch",
     "my_test_lambda_function/AllowExecutionFromCloudWatch"),
    ("aws:lambda/permission:Permission",
     {"function": "arn:aws:lambda:us-east-1:1:function:my_test_lambda_function", "statementId": "S",
      "qualifier": "qualifier_name"}, None, "my_test_lambda_function:qualifier_name/S"),
    ("aws:cloudwatch/logSubscriptionFilter:LogSubscriptionFilter", {"logGroup": "example-group", "name": "example-filter"},
     "cwlsf-2481582075", "example-group|example-filter"),
    ("aws:sns/topicSubscription:TopicSubscription", {"arn": "arn:aws:sns:us-west-2:1:my-topic:8a21d249"},
     "arn:aws:sns:us-west-2:1:my-topic:8a21d249", "arn:aws:sns:us-west-2:1:my-topic:8a21d249"),
    ("kubernetes:core/v1:Namespace", {"metadata": {"name": "flux-system"}}, None, "flux-system"),
    ("kubernetes:core/v1:Secret", {"metadata": {"name": "deploy-key", "namespace": "flux-system"}}, None,
     "flux-system/deploy-key"),
    ("kubernetes:source.toolkit.fluxcd.io/v1:GitRepository", {}, "flux-system/fleet", "flux-system/fleet"),
]


@pytest.mark.parametrize("token,props,state_id,expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_import_id_matches_the_documented_format(token, props, state_id, expected):
    got = import_id(token, props, state_id)
    assert got.ok and got.verified, got.problem
    assert got.value == expected


def test_every_rule_names_its_documentation_and_how_it_is_found():
    for token, rule in RULES.items():
        assert "## Import" in rule.source or "pulumi-kubernetes" in rule.source, token
        assert rule.discovery in (TAG, PARENT, KUBERNETES), token
        if rule.discovery == PARENT:
            assert rule.parent in RULES, f"{token}: parent {rule.parent} has no rule"


def test_the_same_id_from_a_state_resource_and_from_live_fields():
    state_route = {"type": "aws:ec2/route:Route", "id": "r-rtb-1a1080289494",
                   "inputs": {"routeTableId": "rtb-1a", "destinationCidrBlock": "0.0.0.0/0"},
                   "outputs": {"routeTableId": "rtb-1a", "destinationCidrBlock": "0.0.0.0/0", "origin": "CreateRoute"}}
    live = import_id("aws:ec2/route:Route", {"routeTableId": "rtb-1a", "destinationCidrBlock": "0.0.0.0/0"})
    assert import_id_from_state(state_route).value == live.value == "rtb-1a_0.0.0.0/0"


def test_inputs_fill_what_outputs_lack():
    res = {"type": "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "id": "x",
           "inputs": {"role": "r", "policyArn": "arn:p"}, "outputs": {"role": "r"}}
    assert import_id_from_state(res).value == "r/arn:p"


def test_a_secret_field_is_reported_never_decoded():
    res = {"type": "aws:lambda/permission:Permission", "id": "p1",
           "inputs": {"function": secret("f"), "statementId": "s"},
           "outputs": {"function": secret("f"), "statementId": "s"}}
    got = import_id_from_state(res)
    assert not got.ok
    assert "`function`" in got.problem and "secret" in got.problem
    assert CANARY not in got.problem


def test_a_plain_output_is_used_when_only_the_input_is_secret():
    # checkpoint-secrets.json has exactly this shape: the input is secret, the output plain.
    res = {"type": "aws:lambda/permission:Permission", "id": "p1",
           "inputs": {"function": secret("f"), "statementId": "s"}, "outputs": {"function": "fn", "statementId": "s"}}
    assert import_id_from_state(res).value == "fn/s"


def test_a_missing_field_says_which():
    got = import_id("aws:eks/addon:Addon", {"clusterName": "c"})
    assert not got.ok and "`addonName`" in got.problem


def test_unknown_type_uses_the_state_id_unverified_or_says_why_not():
    got = import_id("aws:apigateway/restApi:RestApi", {}, "abc123")
    assert got.value == "abc123" and not got.verified
    none = import_id("aws:apigateway/restApi:RestApi", {}, None)
    assert not none.ok and "no import ID rule" in none.problem


def test_kubernetes_types_are_ruled_but_helm_and_yaml_components_are_not():
    assert rule_for("kubernetes:apps/v1:Deployment").discovery == KUBERNETES
    assert rule_for("kubernetes:yaml/v2:ConfigGroup") is None
    assert rule_for("kubernetes:helm.sh/v4:Chart") is None


def test_rds_instance_is_imported_by_its_identifier_not_its_resource_id():
    # Since terraform-provider-aws v5 (pulumi-aws v6) an aws_db_instance's `id` is the RDS resource ID
    # (`db-…`); `pulumi import` wants the `identifier` (pulumi_aws rds/instance.py, "## Import").
    res = {"type": "aws:rds/instance:Instance", "id": "db-ABCDEFGHIJKLMNOPQRSTUVWXY2",
           "inputs": {"identifier": "orders-db"},
           "outputs": {"identifier": "orders-db", "resourceId": "db-ABCDEFGHIJKLMNOPQRSTUVWXY2"}}
    got = import_id_from_state(res)
    assert got.ok and got.verified and got.value == "orders-db"
    # Older providers kept the identifier as the id; the identifier output gives the same answer.
    old = {"type": "aws:rds/instance:Instance", "id": "orders-db", "outputs": {"identifier": "orders-db"}}
    assert import_id_from_state(old).value == "orders-db"
    # Never the resource ID: without the identifier, say which field is missing.
    bare = import_id_from_state({"type": "aws:rds/instance:Instance", "id": "db-ABCDEFGHIJKLMNOPQRSTUVWXY2"})
    assert not bare.ok and "`identifier`" in bare.problem
