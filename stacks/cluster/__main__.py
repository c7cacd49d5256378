"""cluster: the EKS control plane, its node groups, and who may administer it.

Secrets are envelope-encrypted with this layer's own KMS key; every control-plane log type goes to a
log group encrypted with the backend key; the API endpoint is always reachable privately and
publicly only when configured (off by default in production); access is through EKS access entries
(no aws-auth ConfigMap); nodes run only in private subnets. The kubeconfig is exported as a secret.
"""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from stacks.common import naming, policies
from stacks.common.config import common, export_lineage, json_value, stack_reference
from stacks.common.providers import provider, region_from_config
from stacks.common.tags import named

LAYER = "cluster"
LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]
CLUSTER_POLICIES = ["AmazonEKSClusterPolicy"]
NODE_POLICIES = ["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"]
ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"

settings = common(LAYER)
cfg = pulumi.Config()
region = region_from_config()
kubernetes_version = cfg.require("kubernetesVersion")
public_access = cfg.get_bool("endpointPublicAccess")
if public_access is None:
    public_access = not settings.production
public_cidrs = json_value(cfg, "publicAccessCidrs", [])
service_cidr = cfg.get("serviceCidr") or "172.20.0.0/16"
admin_arns = json_value(cfg, "adminPrincipalArns", [])
node_groups = json_value(cfg, "nodeGroups", None)
if not node_groups:
    raise ValueError("config cluster:nodeGroups must list at least one node group (JSON)")
log_days = cfg.get_int("logRetentionDays") or 90

network = stack_reference("network")
backend = stack_reference("backend")
aws_provider = provider("aws", settings, region)
opts = pulumi.ResourceOptions(provider=aws_provider)
partition = aws.get_partition_output(opts=pulumi.InvokeOutputOptions(provider=aws_provider)).partition
cluster_name = naming.physical(settings.environment, LAYER, "cluster")


def managed_policy(name: str) -> pulumi.Output[str]:
    return partition.apply(lambda p: f"arn:{p}:iam::aws:policy/{name}")


def role_with_policies(logical: str, service: str, policy_names: list[str]) -> tuple[aws.iam.Role, list]:
    role = aws.iam.Role(
        logical,
        name=naming.physical(settings.environment, LAYER, logical),
        assume_role_policy=policies.assume_role(service),
        tags=named(logical),
        opts=opts,
    )
    attachments = [
        aws.iam.RolePolicyAttachment(
            naming.policy_attachment(logical, f"arn:aws:iam::aws:policy/{name}"),
            role=role.name,
            policy_arn=managed_policy(name),
            opts=opts,
        )
        for name in policy_names
    ]
    return role, attachments


cluster_role, cluster_attachments = role_with_policies("cluster-role", "eks.amazonaws.com", CLUSTER_POLICIES)
node_role, node_attachments = role_with_policies("node-role", "ec2.amazonaws.com", NODE_POLICIES)

secrets_key = aws.kms.Key(
    "cluster-key",
    description=f"groundctl {settings.environment}: EKS secrets envelope encryption",
    enable_key_rotation=True,
    deletion_window_in_days=30,
    tags=named("cluster-key"),
    opts=opts,
)

# Created before the cluster, so EKS writes into a group with our retention and encryption
# instead of creating an unencrypted one that never expires.
control_plane_logs = aws.cloudwatch.LogGroup(
    "control-plane-logs",
    name=f"/aws/eks/{cluster_name}/cluster",
    retention_in_days=log_days,
    kms_key_id=backend.get_output("kms_key_arn"),
    tags=named("control-plane-logs"),
    opts=opts,
)

private_subnet_ids = network.get_output("private_subnet_ids")
public_subnet_ids = network.get_output("public_subnet_ids")
cluster = aws.eks.Cluster(
    "cluster",
    name=cluster_name,
    version=kubernetes_version,
    role_arn=cluster_role.arn,
    vpc_config=aws.eks.ClusterVpcConfigArgs(
        # Public subnets are listed so EKS can place internet-facing load balancers there.
        subnet_ids=pulumi.Output.all(private_subnet_ids, public_subnet_ids).apply(lambda ids: ids[0] + ids[1]),
        endpoint_private_access=True,
        endpoint_public_access=public_access,
        public_access_cidrs=(public_cidrs or None) if public_access else None,
    ),
    encryption_config=aws.eks.ClusterEncryptionConfigArgs(
        provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=secrets_key.arn),
        resources=["secrets"],
    ),
    enabled_cluster_log_types=LOG_TYPES,
    access_config=aws.eks.ClusterAccessConfigArgs(
        authentication_mode="API",
        # The identity that creates the cluster must reach it to install Flux in the next layer.
        bootstrap_cluster_creator_admin_permissions=True,
    ),
    kubernetes_network_config=aws.eks.ClusterKubernetesNetworkConfigArgs(service_ipv4_cidr=service_cidr),
    tags=named("cluster"),
    opts=pulumi.ResourceOptions(
        # Not protected, even in production: the rebuild-cluster drill destroys and recreates it on purpose.
        provider=aws_provider, depends_on=[*cluster_attachments, control_plane_logs],
    ),
)

oidc_issuer = cluster.identities.apply(lambda ids: ids[0].oidcs[0].issuer)
# No thumbprint is given: IAM verifies the EKS issuer against its trusted root CAs and ignores
# thumbprints for it, so a pinned (and silently expiring) fingerprint would only add risk.
oidc_provider = aws.iam.OpenIdConnectProvider(
    "oidc-provider",
    url=oidc_issuer,
    client_id_lists=["sts.amazonaws.com"],
    tags=named("oidc-provider"),
    opts=opts,
)

for group in node_groups:
    logical = naming.child("node-group", group["name"])
    aws.eks.NodeGroup(
        logical,
        cluster_name=cluster.name,
        node_group_name=naming.physical(settings.environment, LAYER, group["name"]),
        node_role_arn=node_role.arn,
        subnet_ids=private_subnet_ids,  # never public subnets
        instance_types=list(group["instanceTypes"]),
        capacity_type=group.get("capacityType", "ON_DEMAND"),
        disk_size=int(group.get("diskSizeGib", 50)),
        version=kubernetes_version,
        scaling_config=aws.eks.NodeGroupScalingConfigArgs(
            min_size=int(group["minSize"]), desired_size=int(group["desiredSize"]), max_size=int(group["maxSize"]),
        ),
        update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
        tags=named(logical),
        opts=pulumi.ResourceOptions(
            provider=aws_provider, depends_on=node_attachments, ignore_changes=["scalingConfig.desiredSize"],
        ),
    )

for arn in admin_arns:
    logical = naming.child("admin", arn.rsplit("/", 1)[-1])
    entry = aws.eks.AccessEntry(
        logical, cluster_name=cluster.name, principal_arn=arn, type="STANDARD", tags=named(logical), opts=opts,
    )
    aws.eks.AccessPolicyAssociation(
        naming.child(logical, ADMIN_POLICY),
        cluster_name=cluster.name,
        principal_arn=arn,
        policy_arn=partition.apply(lambda p: f"arn:{p}:eks::aws:cluster-access-policy/{ADMIN_POLICY}"),
        access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
        opts=pulumi.ResourceOptions(provider=aws_provider, depends_on=[entry]),
    )


def kubeconfig(args: list) -> str:
    name, endpoint, ca_data = args
    exec_args = ["eks", "get-token", "--cluster-name", name, "--region", region, "--output", "json"]
    return json.dumps({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "users": [{"name": name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "args": exec_args,
        }}}],
    })


pulumi.export("cluster_name", cluster.name)
pulumi.export("cluster_endpoint", cluster.endpoint)
pulumi.export("cluster_arn", cluster.arn)
pulumi.export("oidc_provider_arn", oidc_provider.arn)
pulumi.export("node_role_arn", node_role.arn)
pulumi.export("kubeconfig", pulumi.Output.secret(
    pulumi.Output.all(cluster.name, cluster.endpoint, cluster.certificate_authority.apply(lambda ca: ca.data))
    .apply(kubeconfig)
))
export_lineage(settings)
