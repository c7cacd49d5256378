"""Import IDs: for each resource type the layer programs create, the ID `pulumi import` expects.

The state's `id` is often *not* the import ID (a route's state id is `r-rtb-…1080289494`, a role policy
attachment's is `<role>-2017…0001`), so each type has one rule that builds the import ID from plain
properties — a state resource's outputs (falling back to its inputs) or the fields inventory read
from AWS. One function serves both sides, so a survivor found live and the same resource read from
an old state always produce the same ID.

Every rule names where its format comes from: the "Import" section of the resource's page in the
pulumi-aws docs, read in the installed SDK (pulumi_aws 7.51, `<module>.py` docstring) and checked
against the registry pages with the search tool. Pure: no I/O.

A value that is a Pulumi secret in the state is never decoded: the rule reports which field it
needed and the resource is left out of the plan with that reason (the operator looks it up).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from bootstrap.engine.results import is_secret

# How inventory finds a type: by its own tags through the Tagging API, through a tagged parent
# (an untaggable child), or through the cluster's Kubernetes API (flux layer; not AWS tags).
TAG = "tag"
PARENT = "parent"
KUBERNETES = "kubernetes"


@dataclass(frozen=True)
class ImportId:
    """The import ID of one resource, or why there is none."""

    value: str | None
    problem: str | None = None
    verified: bool = True  # False: type not in the table, the state id is used as is

    @property
    def ok(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class Rule:
    token: str
    build: Callable[[Mapping[str, Any], str | None], str]
    source: str
    discovery: str
    parent: str | None = None  # for PARENT discovery: the tagged parent's type token


class _Need(Exception):
    def __init__(self, field: str, secret: bool = False):
        super().__init__(field)
        self.field = field
        self.secret = secret


def _get(props: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = props.get(key)
    if is_secret(value):
        raise _Need(key, secret=True)
    if value in (None, "") or not isinstance(value, (str, int)):
        if optional:
            return None
        raise _Need(key)
    return str(value)


def _state_id(_props: Mapping[str, Any], state_id: str | None, key: str) -> str:
    """Types whose import ID is their provider ID; inventory passes the same value under `key`."""
    if state_id:
        return state_id
    return _get(_props, key)  # type: ignore[return-value]


RULES: dict[str, Rule] = {}


def _rule(token: str, source: str, discovery: str = TAG, parent: str | None = None):
    def register(fn: Callable[[Mapping[str, Any], str | None], str]):
        RULES[token] = Rule(token, fn, source, discovery, parent)
        return fn
    return register


def _by_id(token: str, source: str, key: str, discovery: str = TAG, parent: str | None = None) -> None:
    RULES[token] = Rule(token, lambda p, i, _k=key: _state_id(p, i, _k), source, discovery, parent)


def _by_prop(token: str, source: str, key: str, discovery: str = TAG, parent: str | None = None) -> None:
    """Import ID is one property (a name or ARN), whatever the state id looks like."""
    def build(p: Mapping[str, Any], i: str | None, _k: str = key) -> str:
        try:
            return _get(p, _k)  # type: ignore[return-value]
        except _Need as need:
            if i and not need.secret:
                return i  # these types' provider id *is* that property
            raise
    RULES[token] = Rule(token, build, source, discovery, parent)


def _joined(token: str, source: str, sep: str, keys: tuple[str, ...], discovery: str = TAG,
            parent: str | None = None) -> None:
    """Import ID is several properties joined by `sep` (e.g. `cluster_name:node_group_name`)."""
    RULES[token] = Rule(token, lambda p, _i: sep.join(_get(p, k) for k in keys),  # type: ignore[misc]
                        source, discovery, parent)


_SDK = "pulumi_aws 7.51 {}.py docstring, '## Import' (registry page of the same resource)"

# --- EC2 / VPC (network layer) -------------------------------------------------------------------
_by_id("aws:ec2/vpc:Vpc", _SDK.format("ec2/vpc") + ": VPC `id`, e.g. vpc-a01106c2", "id")
_by_id("aws:ec2/subnet:Subnet", _SDK.format("ec2/subnet") + ": subnet `id`, e.g. subnet-9d4a7b6c", "id")
_by_id("aws:ec2/internetGateway:InternetGateway", _SDK.format("ec2/internet_gateway") + ": `id`, igw-…", "id")
_by_id("aws:ec2/eip:Eip", _SDK.format("ec2/eip") + ": Allocation ID, e.g. eipalloc-00a10e96", "allocationId")
_by_id("aws:ec2/natGateway:NatGateway", _SDK.format("ec2/nat_gateway") + ": `id`, nat-…", "id")
_by_id("aws:ec2/routeTable:RouteTable", _SDK.format("ec2/route_table") + ": route table `id`, rtb-…", "id")
_by_id("aws:ec2/vpcEndpoint:VpcEndpoint", _SDK.format("ec2/vpc_endpoint") + ": endpoint `id`, vpce-…", "id")
_by_id("aws:ec2/flowLog:FlowLog", _SDK.format("ec2/flow_log") + ": `id`, e.g. fl-1a2b3c4d", "id")
_by_id("aws:ec2/securityGroup:SecurityGroup", _SDK.format("ec2/security_group") + ": `id`, sg-…", "id")
_by_id("aws:ec2/launchTemplate:LaunchTemplate", _SDK.format("ec2/launch_template") + ": `id`, lt-…", "id")
_by_id("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
       _SDK.format("vpc/security_group_ingress_rule") + ": `security_group_rule_id`, sgr-…", "id",
       PARENT, "aws:ec2/securityGroup:SecurityGroup")
_by_id("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
       _SDK.format("vpc/security_group_egress_rule") + ": `security_group_rule_id`, sgr-…", "id",
       PARENT, "aws:ec2/securityGroup:SecurityGroup")


@_rule("aws:ec2/route:Route",
       _SDK.format("ec2/route") + ": `ROUTETABLEID_DESTINATION`, e.g. rtb-656C65616E6F72_10.42.0.0/16 "
       "(IPv6 CIDR or prefix-list id as the destination)", PARENT, "aws:ec2/routeTable:RouteTable")
def _route(p: Mapping[str, Any], _i: str | None) -> str:
    dest = (_get(p, "destinationCidrBlock", optional=True) or _get(p, "destinationIpv6CidrBlock", optional=True)
            or _get(p, "destinationPrefixListId", optional=True))
    if dest is None:
        raise _Need("destinationCidrBlock")
    return f"{_get(p, 'routeTableId')}_{dest}"


@_rule("aws:ec2/routeTableAssociation:RouteTableAssociation",
       _SDK.format("ec2/route_table_association") + ": `<subnet-or-gateway-id>/<route-table-id>`, e.g. "
       "subnet-6777656e646f6c796e/rtb-656c65616e6f72", PARENT, "aws:ec2/routeTable:RouteTable")
def _rta(p: Mapping[str, Any], _i: str | None) -> str:
    target = _get(p, "subnetId", optional=True) or _get(p, "gatewayId", optional=True)
    if target is None:
        raise _Need("subnetId")
    return f"{target}/{_get(p, 'routeTableId')}"


_joined("aws:ec2/vpcEndpointRouteTableAssociation:VpcEndpointRouteTableAssociation",
        _SDK.format("ec2/vpc_endpoint_route_table_association") + ": `<vpc-endpoint-id>/<route-table-id>`",
        "/", ("vpcEndpointId", "routeTableId"), PARENT, "aws:ec2/vpcEndpoint:VpcEndpoint")


# --- S3 and KMS (backend layer) ------------------------------------------------------------------
_by_prop("aws:s3/bucket:Bucket", _SDK.format("s3/bucket") + ": the `bucket` name", "bucket")
_by_prop("aws:s3/bucketV2:BucketV2", _SDK.format("s3/bucket_v2") + ": the `bucket` name", "bucket")


def _bucket_setting(p: Mapping[str, Any], _i: str | None) -> str:
    # "import using the `bucket` or the `bucket` and `expected_bucket_owner` separated by a comma".
    owner = _get(p, "expectedBucketOwner", optional=True)
    bucket = _get(p, "bucket")
    return f"{bucket},{owner}" if owner else bucket  # type: ignore[return-value]


def _bucket_only(p: Mapping[str, Any], _i: str | None) -> str:
    return _get(p, "bucket")  # type: ignore[return-value]


_BUCKET = "aws:s3/bucket:Bucket"
for _tok, _mod, _fn in (
    ("aws:s3/bucketVersioning:BucketVersioning", "s3/bucket_versioning", _bucket_setting),
    ("aws:s3/bucketVersioningV2:BucketVersioningV2", "s3/bucket_versioning_v2", _bucket_setting),
    ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
     "s3/bucket_server_side_encryption_configuration", _bucket_setting),
    ("aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
     "s3/bucket_server_side_encryption_configuration_v2", _bucket_setting),
    ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "s3/bucket_lifecycle_configuration",
     _bucket_setting),
    ("aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2",
     "s3/bucket_lifecycle_configuration_v2", _bucket_setting),
    ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "s3/bucket_public_access_block", _bucket_only),
    ("aws:s3/bucketOwnershipControls:BucketOwnershipControls", "s3/bucket_ownership_controls", _bucket_only),
    ("aws:s3/bucketPolicy:BucketPolicy", "s3/bucket_policy", _bucket_only),
    ("aws:s3/bucketReplicationConfig:BucketReplicationConfig", "s3/bucket_replication_config", _bucket_only),
):
    RULES[_tok] = Rule(_tok, _fn, _SDK.format(_mod) + ": the `bucket` name"
                       + (" (or `bucket,expected_bucket_owner`)" if _fn is _bucket_setting else ""),
                       PARENT, _BUCKET)

_by_id("aws:kms/key:Key", _SDK.format("kms/key") + ": key `id`, e.g. 1234abcd-12ab-34cd-56ef-1234567890ab", "keyId")
_by_prop("aws:kms/alias:Alias", _SDK.format("kms/alias") + ": alias `name`, e.g. alias/my-key-alias", "name",
         PARENT, "aws:kms/key:Key")

# --- IAM, EKS, logs (cluster and network layers) ------------------------------------------------
_by_prop("aws:iam/role:Role", _SDK.format("iam/role") + ": role `name`", "name")
_by_prop("aws:iam/policy:Policy", _SDK.format("iam/policy") + ": policy `arn`", "arn")
_by_prop("aws:iam/instanceProfile:InstanceProfile", _SDK.format("iam/instance_profile") + ": `name`", "name")
_by_prop("aws:iam/openIdConnectProvider:OpenIdConnectProvider",
         _SDK.format("iam/open_id_connect_provider") + ": provider `arn`", "arn")
_by_prop("aws:cloudwatch/logGroup:LogGroup", _SDK.format("cloudwatch/log_group") + ": log group `name`", "name")
_by_prop("aws:eks/cluster:Cluster", _SDK.format("eks/cluster") + ": cluster `name`", "name")


_joined("aws:iam/rolePolicyAttachment:RolePolicyAttachment",
        _SDK.format("iam/role_policy_attachment") + ": `<role-name>/<policy-arn>`, e.g. "
        "test-role/arn:aws:iam::xxxxxxxxxxxx:policy/test-policy",
        "/", ("role", "policyArn"), PARENT, "aws:iam/role:Role")


_joined("aws:iam/rolePolicy:RolePolicy",
        _SDK.format("iam/role_policy") + ": `role_name:role_policy_name`",
        ":", ("role", "name"), PARENT, "aws:iam/role:Role")


_joined("aws:eks/nodeGroup:NodeGroup",
        _SDK.format("eks/node_group") + ": `cluster_name:node_group_name`, e.g. example-cluster:example-group",
        ":", ("clusterName", "nodeGroupName"))


_joined("aws:eks/addon:Addon",
        _SDK.format("eks/addon") + ": `cluster_name:addon_name`, e.g. example-cluster:example-addon",
        ":", ("clusterName", "addonName"))


_joined("aws:eks/accessEntry:AccessEntry",
        _SDK.format("eks/access_entry") + ": `cluster_name:principal_arn`, e.g. "
        "example-cluster:arn:aws:iam::123456789012:role/example",
        ":", ("clusterName", "principalArn"))


_joined("aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
        _SDK.format("eks/access_policy_association") + ": `cluster_name#principal_arn#policy_arn`",
        "#", ("clusterName", "principalArn", "policyArn"), PARENT, "aws:eks/accessEntry:AccessEntry")


# --- Types found in the shared state fixtures (other projects' programs) ------------------------
_by_prop("aws:rds/subnetGroup:SubnetGroup", _SDK.format("rds/subnet_group") + ": subnet group `name`", "name")


@_rule("aws:rds/instance:Instance",
       _SDK.format("rds/instance") + ": the `identifier`, e.g. mydb-rds-instance (never the state id: since "
       "terraform-provider-aws v5 / pulumi-aws v6 that is the `db-…` resource ID, "
       "hashicorp/terraform-provider-aws#31232)")
def _rds_instance(p: Mapping[str, Any], _i: str | None) -> str:
    return _get(p, "identifier")  # type: ignore[return-value]
_by_prop("aws:lambda/function:Function", _SDK.format("lambda_/function") + ": `function_name`", "name")
_by_prop("aws:sns/topic:Topic", _SDK.format("sns/topic") + ": topic `arn`", "arn")
_by_prop("aws:sns/topicSubscription:TopicSubscription",
         _SDK.format("sns/topic_subscription") + ": subscription `arn`", "arn", PARENT, "aws:sns/topic:Topic")


@_rule("aws:cloudwatch/eventRule:EventRule",
       _SDK.format("cloudwatch/event_rule") + ": `event_bus_name/rule_name`; the bus is omitted for `default`")
def _event_rule(p: Mapping[str, Any], _i: str | None) -> str:
    bus = _get(p, "eventBusName", optional=True)
    name = _get(p, "name")
    return f"{bus}/{name}" if bus and bus != "default" else name  # type: ignore[return-value]


@_rule("aws:cloudwatch/eventTarget:EventTarget",
       _SDK.format("cloudwatch/event_target") + ": `event_bus_name/rule-name/target-id`; the bus is omitted for "
       "`default`, e.g. rule-name/target-id", PARENT, "aws:cloudwatch/eventRule:EventRule")
def _event_target(p: Mapping[str, Any], _i: str | None) -> str:
    bus = _get(p, "eventBusName", optional=True)
    base = f"{_get(p, 'rule')}/{_get(p, 'targetId')}"
    return f"{bus}/{base}" if bus and bus != "default" else base


@_rule("aws:lambda/permission:Permission",
       _SDK.format("lambda_/permission") + ": `function_name/statement_id`, or "
       "`function_name:qualifier/statement_id`", PARENT, "aws:lambda/function:Function")
def _permission(p: Mapping[str, Any], _i: str | None) -> str:
    function = _get(p, "function")
    assert function is not None
    if ":function:" in function:  # an ARN was given; the import wants the function name
        function = function.split(":function:", 1)[1].split(":", 1)[0]
    qualifier = _get(p, "qualifier", optional=True)
    if qualifier:
        function = f"{function}:{qualifier}"
    return f"{function}/{_get(p, 'statementId')}"


_joined("aws:cloudwatch/logSubscriptionFilter:LogSubscriptionFilter",
        _SDK.format("cloudwatch/log_subscription_filter")
        + ": `log_group_name|name`, e.g. example-group|example-filter",
        "|", ("logGroup", "name"), PARENT, "aws:cloudwatch/logGroup:LogGroup")


# --- Kubernetes (flux layer) -------------------------------------------------------------------
_K8S_SOURCE = ("pulumi-kubernetes: a resource's ID is `[namespace/]<name>` (pulumi/pulumi-kubernetes#353: "
               "'the ID of the resource: it is just the namespace + the name'); cluster-scoped: `<name>`")


def kubernetes_id(p: Mapping[str, Any], state_id: str | None) -> str:
    if state_id:
        return state_id
    meta = p.get("metadata")
    if not isinstance(meta, Mapping):
        raise _Need("metadata")
    name = _get(meta, "name")
    namespace = _get(meta, "namespace", optional=True)
    return f"{namespace}/{name}" if namespace else name  # type: ignore[return-value]


def rule_for(token: str) -> Rule | None:
    if token in RULES:
        return RULES[token]
    if token.startswith("kubernetes:") and not token.startswith("kubernetes:helm.sh") \
            and not token.startswith("kubernetes:yaml"):
        return Rule(token, kubernetes_id, _K8S_SOURCE, KUBERNETES)
    return None


def props_of(resource: Mapping[str, Any]) -> dict[str, Any]:
    """A state resource's properties: outputs win, inputs fill the gaps (old states lack some outputs)."""
    merged: dict[str, Any] = {}
    inputs = resource.get("inputs")
    outputs = resource.get("outputs")
    if isinstance(inputs, Mapping):
        merged.update(inputs)
    if isinstance(outputs, Mapping):
        for key, value in outputs.items():
            if value not in (None, "") or key not in merged:
                merged[key] = value
    return merged


def import_id(token: str, props: Mapping[str, Any], state_id: str | None = None) -> ImportId:
    """The import ID for a resource of type `token` with these properties (and provider id, if known)."""
    state_id = state_id if isinstance(state_id, str) and state_id else None
    rule = rule_for(token)
    if rule is None:
        if state_id:
            return ImportId(state_id, None, verified=False)
        return ImportId(None, f"no import ID rule for {token} and no id in the state")
    try:
        return ImportId(rule.build(props, state_id))
    except _Need as need:
        if need.secret:
            return ImportId(None, f"its import ID needs `{need.field}`, which is a secret in this state; "
                                  "look the value up in AWS and add the resource to the plan by hand")
        return ImportId(None, f"its import ID needs `{need.field}`, which this state does not record")


def import_id_from_state(resource: Mapping[str, Any]) -> ImportId:
    return import_id(str(resource.get("type", "")), props_of(resource), resource.get("id"))
