"""What a live AWS resource is: a tagged ARN → its type token and import ID, and the logical names the
programs give untaggable children (by `stacks.common.naming`, exactly as the programs name them).

An access entry's ARN names its cluster and its principal (without the principal's IAM path), so it
is classified from the ARN; `recovery.survivors.inventory` confirms the principal against the cluster's list.

Pure: inventory (`recovery.survivors.inventory`) does the reads and hands the answers here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from recovery.survivors.import_ids import import_id
from recovery.survivors.state_vs_live import LiveItem
from stacks.common import naming

_AUTONAME = re.compile(r"^(.+)-[0-9a-f]{7}$")  # Pulumi's auto-name: the logical name plus 7 hex digits

T = {  # the type tokens inventory produces
    "vpc": "aws:ec2/vpc:Vpc", "subnet": "aws:ec2/subnet:Subnet",
    "igw": "aws:ec2/internetGateway:InternetGateway", "nat": "aws:ec2/natGateway:NatGateway",
    "eip": "aws:ec2/eip:Eip", "rtb": "aws:ec2/routeTable:RouteTable", "route": "aws:ec2/route:Route",
    "rta": "aws:ec2/routeTableAssociation:RouteTableAssociation", "vpce": "aws:ec2/vpcEndpoint:VpcEndpoint",
    "flowlog": "aws:ec2/flowLog:FlowLog", "sg": "aws:ec2/securityGroup:SecurityGroup",
    "lt": "aws:ec2/launchTemplate:LaunchTemplate", "bucket": "aws:s3/bucket:Bucket",
    "key": "aws:kms/key:Key", "alias": "aws:kms/alias:Alias", "loggroup": "aws:cloudwatch/logGroup:LogGroup",
    "role": "aws:iam/role:Role", "rpa": "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
    "rolepolicy": "aws:iam/rolePolicy:RolePolicy", "policy": "aws:iam/policy:Policy",
    "oidc": "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
    "profile": "aws:iam/instanceProfile:InstanceProfile", "cluster": "aws:eks/cluster:Cluster",
    "nodegroup": "aws:eks/nodeGroup:NodeGroup", "addon": "aws:eks/addon:Addon",
    "entry": "aws:eks/accessEntry:AccessEntry", "apa": "aws:eks/accessPolicyAssociation:AccessPolicyAssociation",
}

# A bucket setting's naming-convention part → the type token the backend program uses for it.
BUCKET_SETTING_TYPES = {
    "versioning": "aws:s3/bucketVersioning:BucketVersioning",
    "encryption": "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "public-access-block": "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "ownership": "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    "policy": "aws:s3/bucketPolicy:BucketPolicy",
    "lifecycle": "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "replication": "aws:s3/bucketReplicationConfig:BucketReplicationConfig",
}


@dataclass(frozen=True)
class Tagged:
    """One tagged resource as an ARN and its tags, before it is given a type."""

    arn: str
    tags: Mapping[str, str]


# Types found by their own tags (Tagging API or their service), and untaggable children → their parent.
TAGGED_TYPES = frozenset(T[k] for k in (
    "vpc", "subnet", "igw", "nat", "eip", "rtb", "vpce", "flowlog", "sg", "lt", "bucket", "key", "loggroup",
    "role", "policy", "oidc", "profile", "cluster", "nodegroup", "addon", "entry"))
CHILD_TYPES = {
    T["route"]: T["rtb"], T["rta"]: T["rtb"], T["rpa"]: T["role"], T["rolepolicy"]: T["role"],
    T["alias"]: T["key"], T["apa"]: T["entry"], **{t: T["bucket"] for t in BUCKET_SETTING_TYPES.values()},
}


def discovery(token: str) -> str | None:
    """How inventory finds resources of `token`: "tag", "parent:<parent type>", or None (it cannot)."""
    if token in TAGGED_TYPES:
        return "tag"
    if token in CHILD_TYPES:
        return f"parent:{CHILD_TYPES[token]}"
    return None

def classify_arn(arn: str) -> tuple[str, dict[str, Any]] | None:
    """A tagged ARN → (type token, the properties its import ID is built from); None if not ours."""
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        return None
    service, resource = parts[2], parts[5]
    if service == "s3" and "/" not in resource:
        return T["bucket"], {"bucket": resource}
    if service == "logs" and resource.startswith("log-group:"):
        name = resource[len("log-group:"):]
        return T["loggroup"], {"name": name[:-2] if name.endswith(":*") else name}
    kind, _, rest = resource.partition("/")
    if service == "ec2":
        ec2 = {"vpc": "vpc", "subnet": "subnet", "internet-gateway": "igw", "natgateway": "nat",
               "route-table": "rtb", "vpc-endpoint": "vpce", "vpc-flow-log": "flowlog", "flow-logs": "flowlog",
               "security-group": "sg", "launch-template": "lt"}
        if kind in ec2:
            return T[ec2[kind]], {"id": rest}
        if kind == "elastic-ip":
            return T["eip"], {"allocationId": rest}
    if service == "kms" and kind == "key":
        return T["key"], {"keyId": rest}
    if service == "iam":
        if kind == "role":
            return T["role"], {"name": rest.rsplit("/", 1)[-1], "arn": arn}
        if kind == "oidc-provider":
            return T["oidc"], {"arn": arn}
        if kind == "policy":
            return T["policy"], {"arn": arn}
        if kind == "instance-profile":
            return T["profile"], {"name": rest.rsplit("/", 1)[-1]}
    if service == "eks":
        segs = rest.split("/")
        if kind == "cluster":
            return T["cluster"], {"name": rest}
        if kind == "nodegroup" and len(segs) >= 2:
            return T["nodegroup"], {"clusterName": segs[0], "nodeGroupName": segs[1]}
        if kind == "addon" and len(segs) >= 2:
            return T["addon"], {"clusterName": segs[0], "addonName": segs[1]}
        if kind == "access-entry":
            return T["entry"], access_entry_props(parts[1], segs)
    return None


def access_entry_props(partition: str, segs: list[str]) -> dict[str, str]:
    """An access entry's cluster and principal from the segments of its ARN after `access-entry/`:
    `<cluster>/<role|user>/<account>/<principal name>/<uuid>` (the EKS access-entry ARN format of the
    AWS Service Authorization Reference). The ARN drops the principal's IAM path, so the principal built
    here is right for path-less principals; `recovery.survivors.inventory.collect` replaces it with the one EKS lists."""
    if len(segs) != 5 or not all(segs[:4]) or segs[1] not in ("role", "user"):
        return {"clusterName": segs[0]} if segs and segs[0] else {}
    cluster, kind, account, name, _uuid = segs
    return {"clusterName": cluster, "principalArn": f"arn:{partition}:iam::{account}:{kind}/{name}"}


def same_principal(derived: str, listed: str) -> bool:
    """Whether a principal EKS lists is the one an access-entry ARN names: same partition, account, kind
    and name, whatever its IAM path (a role or user name is unique in its account, path or not)."""
    d_head, _, d_res = derived.rpartition(":")
    l_head, _, l_res = listed.rpartition(":")
    d_kind, _, d_name = d_res.partition("/")
    l_kind, _, l_path = l_res.partition("/")
    return d_head == l_head and d_kind == l_kind and l_path.rsplit("/", 1)[-1] == d_name


def item_from_tagged(t: Tagged, layer: str | None = None, region: str | None = None) -> LiveItem | str:
    """The live item a tagged ARN is, or why it cannot be one (a sentence for the inventory's warnings)."""
    found = classify_arn(t.arn)
    if found is None:
        return f"{t.arn} carries this layer's tags but is not a type groundctl's programs create"
    typ, props = found
    ident = import_id(typ, props)
    if not ident.ok:
        return (f"{t.arn} is a {typ} carrying this layer's tags, but its ARN does not give its import ID: "
                f"{ident.problem}")
    return LiveItem(typ, t.tags.get(naming.TAG_NAME) or None, ident.value, t.arn, None, layer,  # type: ignore[arg-type]
                    region)


_SETTING_OF = {t: part for part, t in BUCKET_SETTING_TYPES.items()}


def child_name(token: str, parent: str, props: Mapping[str, Any]) -> str:
    """The logical name a program gives an untaggable child of the tagged resource named `parent`
    (`props`: the child's fields as inventory reads them; a route table association is named after
    its subnet, so it takes `subnetName`)."""
    if token == T["route"]:
        return naming.route(parent, props["destinationCidrBlock"])
    if token == T["rta"]:
        return naming.route_table_association(props["subnetName"])
    if token == T["rpa"]:
        return naming.policy_attachment(parent, props["policyArn"])
    if token == T["rolepolicy"]:
        return inline_policy_name(parent, props["name"])
    if token == T["alias"]:
        return naming.child(parent, "alias")
    if token == T["apa"]:
        return naming.child(parent, props["policyArn"].rsplit("/", 1)[-1])
    if token in _SETTING_OF:
        return naming.bucket_setting(parent, _SETTING_OF[token])
    raise ValueError(f"{token} is not an untaggable child type")


def child_item(typ: str, name: str, props: Mapping[str, Any], parent: LiveItem) -> LiveItem | None:
    """An untaggable child of `parent` as a live item, or None when its import ID cannot be built."""
    ident = import_id(typ, props)
    if not ident.ok:
        return None
    return LiveItem(typ, name, ident.value, None, parent.name, parent.layer, parent.region)  # type: ignore[arg-type]


def routes_of(table: LiveItem, described: Mapping[str, Any], subnet_names: Mapping[str, str]) -> list[LiveItem]:
    """A route table's program-made routes and subnet associations (not `local`, not propagated)."""
    out: list[LiveItem] = []
    if not table.name:
        return out
    rtb = table.import_id
    for r in described.get("Routes", []):
        dest = r.get("DestinationCidrBlock") or r.get("DestinationIpv6CidrBlock")
        if r.get("Origin") != "CreateRoute" or not dest or str(r.get("GatewayId", "")).startswith("vpce-"):
            continue
        item = child_item(T["route"], child_name(T["route"], table.name, {"destinationCidrBlock": dest}),
                          {"routeTableId": rtb, "destinationCidrBlock": dest}, table)
        if item:
            out.append(item)
    for a in described.get("Associations", []):
        subnet = a.get("SubnetId")
        if a.get("Main") or not subnet or subnet not in subnet_names:
            continue
        item = child_item(T["rta"], child_name(T["rta"], table.name, {"subnetName": subnet_names[subnet]}),
                          {"subnetId": subnet, "routeTableId": rtb}, table)
        if item:
            out.append(item)
    return out


def inline_policy_name(role: str, policy_name: str) -> str:
    """The logical name of a role's inline policy. Programs name it `naming.child(role, part)` and let
    Pulumi auto-name it in AWS (`<logical>-<7 hex>`); a policy named explicitly is `child(role, name)`."""
    auto = _AUTONAME.fullmatch(policy_name)
    if auto and auto.group(1).startswith(f"{role}-"):
        return auto.group(1)
    return naming.child(role, policy_name)

