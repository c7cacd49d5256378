"""The cluster program under the mock runtime: graph, security posture, the network and backend
references, tags, the secret kubeconfig and the contract."""

from __future__ import annotations

import json

import pytest

from stacks.common import naming
from tests.stackutil import (
    UPSTREAM, assert_contract, assert_tagged, counts, named, of_type, run, spec, stack_references,
    untaggable_names,
)

LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


@pytest.fixture(scope="module")
def dev():
    return run("cluster", spec("dev"))


@pytest.fixture(scope="module")
def prod():
    return run("cluster", spec("prod"))


def test_graph(dev, prod):
    base = {
        "pulumi:providers:aws": 1, "pulumi:pulumi:StackReference": 2, "aws:iam/role:Role": 2,
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment": 4, "aws:kms/key:Key": 1,
        "aws:cloudwatch/logGroup:LogGroup": 1, "aws:eks/cluster:Cluster": 1,
        "aws:iam/openIdConnectProvider:OpenIdConnectProvider": 1,
    }
    assert counts(dev) == {**base, "aws:eks/nodeGroup:NodeGroup": 1, "aws:eks/accessEntry:AccessEntry": 1,
                           "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": 1}
    assert counts(prod) == {**base, "aws:eks/nodeGroup:NodeGroup": 2, "aws:eks/accessEntry:AccessEntry": 2,
                            "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": 2}


@pytest.mark.parametrize("which", ["dev", "prod"])
def test_control_plane_posture(which, request):
    program_run = request.getfixturevalue(which)
    cluster = named(program_run, "cluster").inputs
    assert cluster["name"] == f"{which}-cluster"
    assert cluster["version"] == "1.31"
    assert cluster["encryptionConfig"]["resources"] == ["secrets"]
    assert "keyArn" in cluster["encryptionConfig"]["provider"]
    assert named(program_run, "cluster-key").inputs["enableKeyRotation"] is True
    assert cluster["enabledClusterLogTypes"] == LOG_TYPES
    assert cluster["vpcConfig"]["endpointPrivateAccess"] is True
    assert cluster["accessConfig"]["authenticationMode"] == "API"
    assert cluster["kubernetesNetworkConfig"]["serviceIpv4Cidr"] == "172.20.0.0/16"
    logs = named(program_run, "control-plane-logs").inputs
    assert logs["name"] == f"/aws/eks/{which}-cluster/cluster"
    assert logs["kmsKeyId"] == UPSTREAM["backend"]["kms_key_arn"]


def test_public_endpoint_per_spec(dev, prod):
    assert named(prod, "cluster").inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in named(prod, "cluster").inputs["vpcConfig"]
    vpc = named(dev, "cluster").inputs["vpcConfig"]
    assert vpc["endpointPublicAccess"] is True and vpc["publicAccessCidrs"] == ["203.0.113.0/24"]
    opened = run("cluster", spec("prod", **{"cluster.endpoint_public_access": True}))
    assert named(opened, "cluster").inputs["vpcConfig"]["endpointPublicAccess"] is True


def test_uses_network_outputs_and_keeps_nodes_private(dev, prod):
    assert stack_references(dev) == {"organization/network/dev", "organization/backend/dev"}
    private = UPSTREAM["network"]["private_subnet_ids"]
    public = UPSTREAM["network"]["public_subnet_ids"]
    assert named(dev, "cluster").inputs["vpcConfig"]["subnetIds"] == private + public
    for group in of_type(prod, "aws:eks/nodeGroup:NodeGroup"):
        assert group.inputs["subnetIds"] == private
        assert not set(group.inputs["subnetIds"]) & set(public)


def test_node_groups_follow_the_spec(prod):
    for group_spec in spec("prod").cluster.node_groups:
        group = named(prod, naming.child("node-group", group_spec.name)).inputs
        assert group["nodeGroupName"] == f"prod-{group_spec.name}"
        assert group["instanceTypes"] == group_spec.instance_types
        assert group["scalingConfig"] == {
            "minSize": group_spec.min_size, "desiredSize": group_spec.desired_size, "maxSize": group_spec.max_size}
        assert group["clusterName"] == "prod-cluster"
        assert group["capacityType"] == "ON_DEMAND" and group["diskSize"] == 50


def test_iam_roles_and_managed_policies(dev):
    def trust(name):
        return json.loads(named(dev, name).inputs["assumeRolePolicy"])["Statement"][0]["Principal"]["Service"]

    assert trust("cluster-role") == "eks.amazonaws.com"
    assert trust("node-role") == "ec2.amazonaws.com"
    attached = {(a.inputs["role"], a.inputs["policyArn"].rsplit("/", 1)[1])
                for a in of_type(dev, "aws:iam/rolePolicyAttachment:RolePolicyAttachment")}
    assert attached == {
        ("dev-cluster-role", "AmazonEKSClusterPolicy"), ("dev-node-role", "AmazonEKSWorkerNodePolicy"),
        ("dev-node-role", "AmazonEKS_CNI_Policy"), ("dev-node-role", "AmazonEC2ContainerRegistryReadOnly"),
    }
    oidc = named(dev, "oidc-provider").inputs
    assert oidc["clientIdLists"] == ["sts.amazonaws.com"]
    assert oidc["url"] == "(known after apply)"  # the cluster's issuer


def test_admin_access_entries(prod):
    admins = spec("prod").cluster.admin_principal_arns
    entries = {e.inputs["principalArn"]: e for e in of_type(prod, "aws:eks/accessEntry:AccessEntry")}
    assert set(entries) == set(admins)
    for arn, entry in entries.items():
        assert entry.inputs["type"] == "STANDARD"
        assoc = named(prod, naming.child(entry.name, "AmazonEKSClusterAdminPolicy")).inputs
        assert assoc["principalArn"] == arn
        assert assoc["policyArn"] == "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
        assert assoc["accessScope"] == {"type": "cluster"}


def test_kubeconfig_is_a_secret_output(dev):
    assert_contract(dev, "cluster")
    assert dev.outputs["kubeconfig"] == "[secret]"
    assert dev.outputs["cluster_name"] == "dev-cluster"


@pytest.mark.parametrize("which", ["dev", "prod"])
def test_tags_and_names(which, request):
    program_run = request.getfixturevalue(which)
    assert_tagged(program_run, which, "cluster")
    expected = {naming.policy_attachment("cluster-role", "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy")}
    expected |= {naming.policy_attachment("node-role", f"arn:aws:iam::aws:policy/{p}") for p in (
        "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly")}
    expected |= {naming.child(e.name, "AmazonEKSClusterAdminPolicy")
                 for e in of_type(program_run, "aws:eks/accessEntry:AccessEntry")}
    assert untaggable_names(program_run) == expected


def test_cluster_is_not_protected_so_the_rebuild_drill_can_run(prod):
    assert not any(r.protect for r in prod.resources)
