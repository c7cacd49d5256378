"""Inventory: the live AWS resources of one environment and layer, found by their `groundctl:*` tags.

Three sources, merged by (type, import ID):
1. the Resource Groups Tagging API (`get_resources`, filtered on `groundctl:env` and `groundctl:layer`,
   100 resources a page — the API's maximum — so N resources cost ceil(N/100) pages);
2. per-service describe calls for taggable types that API does not return everywhere (IAM roles and
   OIDC providers, Elastic IPs, VPC endpoints, EKS clusters and node groups: the emulator's Tagging
   API omits them). EKS add-ons and access entries are taken from the Tagging API only;
3. children that cannot carry tags, read through their tagged parent: a route table's routes and
   subnet associations, a role's policy attachments and inline policies, a bucket's settings, a KMS
   key's aliases, an access entry's policy associations. Children are named by `stacks.common.naming`,
   exactly as the programs name them.

An access entry's ARN names its cluster and its principal (without the principal's IAM path), so it
is classified from the ARN and its principal confirmed against the cluster's `ListAccessEntries`.

Every call is a read and is retried through `retry_transient`. Deciding what a resource *is* (ARN →
type token, import ID, a child's logical name) is done by the pure functions of `recovery.survivors.identify`;
this module does the reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import botocore.exceptions

from bootstrap.aws.clients import AwsClients, error_code, retry_transient
from recovery.survivors.identify import (
    BUCKET_SETTING_TYPES, T, Tagged, child_item, child_name, item_from_tagged, routes_of, same_principal,
)
from recovery.survivors.state_vs_live import LiveItem
from stacks.common import naming

PAGE_SIZE = 100       # GetResources' maximum ResourcesPerPage
TAGS_PER_PAGE = 500   # the maximum; keeps a page from closing early on tag count (moto's default is 100)

# The S3 read for each setting, and the error codes that mean "this bucket has none".
_BUCKET_READS = {
    "versioning": ("get_bucket_versioning", ()),
    "encryption": ("get_bucket_encryption", ("ServerSideEncryptionConfigurationNotFoundError",)),
    "public-access-block": ("get_public_access_block", ("NoSuchPublicAccessBlockConfiguration",)),
    "ownership": ("get_bucket_ownership_controls", ("OwnershipControlsNotFoundError",)),
    "policy": ("get_bucket_policy", ("NoSuchBucketPolicy",)),
    "lifecycle": ("get_bucket_lifecycle_configuration", ("NoSuchLifecycleConfiguration",)),
    "replication": ("get_bucket_replication", ("ReplicationConfigurationNotFoundError",)),
}


@dataclass(frozen=True)
class Inventory:
    items: tuple[LiveItem, ...]
    tagging_pages: int
    calls: Mapping[str, int]
    warnings: tuple[str, ...] = ()
    types_covered: frozenset[str] = field(default_factory=frozenset)

    @property
    def minimum_pages(self) -> int:
        tagged = sum(1 for i in self.items if i.parent_name is None)
        return max(1, -(-tagged // PAGE_SIZE))


class _Calls:
    def __init__(self, aws: AwsClients):
        self.aws = aws
        self.counts: dict[str, int] = {}

    def __call__(self, service: str, op: str, absent: Iterable[str] = (), **kwargs) -> dict | None:
        """One retried read; a ClientError whose code is in `absent` means "none" and returns None."""
        self.counts[f"{service}:{op}"] = self.counts.get(f"{service}:{op}", 0) + 1
        client = self.aws.client(service)
        try:
            return retry_transient(lambda: getattr(client, op)(**kwargs), what=f"read {service} {op}")
        except botocore.exceptions.ClientError as exc:
            if error_code(exc) in set(absent):
                return None
            raise


def tagged_resources(call: _Calls, environment: str, layer: str) -> tuple[list[Tagged], int]:
    """Every resource the Tagging API returns for this environment and layer, and how many pages it took."""
    filters = [{"Key": naming.TAG_ENV, "Values": [environment]}, {"Key": naming.TAG_LAYER, "Values": [layer]}]
    out: list[Tagged] = []
    token, pages = "", 0
    while True:
        page = call("resourcegroupstaggingapi", "get_resources", TagFilters=filters, ResourcesPerPage=PAGE_SIZE,
                    TagsPerPage=TAGS_PER_PAGE, **({"PaginationToken": token} if token else {})) or {}
        pages += 1
        for m in page.get("ResourceTagMappingList", []):
            out.append(Tagged(m["ResourceARN"], {t["Key"]: t.get("Value", "") for t in m.get("Tags", [])}))
        token = page.get("PaginationToken") or ""
        if not token:
            return out, pages


def _ours(tags: Mapping[str, str], environment: str, layer: str) -> bool:
    return tags.get(naming.TAG_ENV) == environment and tags.get(naming.TAG_LAYER) == layer


def _tag_list(raw: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in (raw or [])}


def supplement(call: _Calls, environment: str, layer: str, wanted: set[str]) -> list[Tagged]:
    """Taggable resources found through their own service (for Tagging API gaps)."""
    out: list[Tagged] = []
    ec2_filters = [{"Name": f"tag:{naming.TAG_ENV}", "Values": [environment]},
                   {"Name": f"tag:{naming.TAG_LAYER}", "Values": [layer]}]
    region = call.aws.region
    if T["eip"] in wanted:
        for a in (call("ec2", "describe_addresses", Filters=ec2_filters) or {}).get("Addresses", []):
            if a.get("AllocationId"):
                out.append(Tagged(f"arn:aws:ec2:{region}::elastic-ip/{a['AllocationId']}",
                                  _tag_list(a.get("Tags"))))
    if T["vpce"] in wanted:
        for e in (call("ec2", "describe_vpc_endpoints", Filters=ec2_filters) or {}).get("VpcEndpoints", []):
            out.append(Tagged(f"arn:aws:ec2:{region}:{e.get('OwnerId', '')}:vpc-endpoint/{e['VpcEndpointId']}",
                              _tag_list(e.get("Tags"))))
    if T["role"] in wanted:
        marker: dict[str, str] = {}
        while True:
            page = call("iam", "list_roles", **marker) or {}
            for role in page.get("Roles", []):
                tags = _tag_list((call("iam", "list_role_tags", RoleName=role["RoleName"]) or {}).get("Tags"))
                if _ours(tags, environment, layer):
                    out.append(Tagged(role["Arn"], tags))
            if not page.get("IsTruncated"):
                break
            marker = {"Marker": page["Marker"]}
    if T["oidc"] in wanted:
        for p in (call("iam", "list_open_id_connect_providers") or {}).get("OpenIDConnectProviderList", []):
            got = call("iam", "list_open_id_connect_provider_tags", OpenIDConnectProviderArn=p["Arn"]) or {}
            tags = _tag_list(got.get("Tags"))
            if _ours(tags, environment, layer):
                out.append(Tagged(p["Arn"], tags))
    if wanted & {T["cluster"], T["nodegroup"], T["addon"], T["entry"]}:
        for name in (call("eks", "list_clusters") or {}).get("clusters", []):
            cluster = (call("eks", "describe_cluster", name=name) or {}).get("cluster", {})
            if _ours(cluster.get("tags", {}), environment, layer):
                out.append(Tagged(cluster["arn"], cluster.get("tags", {})))
            for ng in (call("eks", "list_nodegroups", clusterName=name) or {}).get("nodegroups", []):
                got = (call("eks", "describe_nodegroup", clusterName=name, nodegroupName=ng) or {}).get("nodegroup", {})
                if _ours(got.get("tags", {}), environment, layer):
                    out.append(Tagged(got["nodegroupArn"], got.get("tags", {})))
    return out


def _listed_principals(call: _Calls, cluster: str) -> list[str]:
    """Every principal with an access entry on `cluster` (none when the cluster is gone)."""
    out: list[str] = []
    token: dict[str, str] = {}
    while True:
        page = call("eks", "list_access_entries", absent=("ResourceNotFoundException",), clusterName=cluster,
                    **token) or {}
        out += page.get("accessEntries", [])
        if not page.get("nextToken"):
            return out
        token = {"nextToken": page["nextToken"]}


def _access_entries(call: _Calls, items: list[LiveItem]) -> tuple[list[LiveItem], list[str]]:
    """Access entries with the principal ARN EKS holds: the entry's own ARN drops the principal's IAM
    path, so the principal built from it is checked against the cluster's list (one listing per cluster)."""
    out: list[LiveItem] = []
    warnings: list[str] = []
    listed: dict[str, list[str]] = {}
    for item in items:
        if item.type != T["entry"]:
            out.append(item)
            continue
        cluster, derived = item.import_id.split(":", 1)
        if cluster not in listed:
            listed[cluster] = _listed_principals(call, cluster)
        principal = next((p for p in listed[cluster] if same_principal(derived, p)), None)
        if principal is None:
            warnings.append(f"{item.arn} carries this layer's tags, but cluster {cluster} lists no access entry "
                            f"for {derived}: it was probably deleted after the tags were read")
            continue
        out.append(LiveItem(item.type, item.name, f"{cluster}:{principal}", item.arn, None, item.layer, item.region))
    return out, warnings


def children(call: _Calls, parents: list[LiveItem], wanted: set[str]) -> list[LiveItem]:
    """The untaggable children of the tagged parents, named by the programs' naming convention."""
    out: list[LiveItem] = []
    subnet_names = {i.import_id: i.name for i in parents if i.type == T["subnet"] and i.name}
    tables = {i.import_id: i for i in parents if i.type == T["rtb"] and i.name}
    ids = sorted(tables)
    for start in range(0, len(ids), 100):
        got = call("ec2", "describe_route_tables", RouteTableIds=ids[start:start + 100]) or {}
        for rt in got.get("RouteTables", []):
            out.extend(routes_of(tables[rt["RouteTableId"]], rt, subnet_names))
    for p in parents:
        if not p.name:
            continue
        if p.type == T["role"] and (T["rpa"] in wanted or T["rolepolicy"] in wanted):
            got = call("iam", "list_attached_role_policies", RoleName=p.import_id) or {}
            for pol in got.get("AttachedPolicies", []):
                props = {"role": p.import_id, "policyArn": pol["PolicyArn"]}
                c = child_item(T["rpa"], child_name(T["rpa"], p.name, props), props, p)
                out += [c] if c else []
            for pname in (call("iam", "list_role_policies", RoleName=p.import_id) or {}).get("PolicyNames", []):
                props = {"role": p.import_id, "name": pname}
                c = child_item(T["rolepolicy"], child_name(T["rolepolicy"], p.name, props), props, p)
                out += [c] if c else []
        elif p.type == T["bucket"]:
            for setting, (op, absent) in _BUCKET_READS.items():
                typ = BUCKET_SETTING_TYPES[setting]
                if typ not in wanted:
                    continue
                got = call("s3", op, absent=absent + ("NoSuchBucket",), Bucket=p.import_id)
                if got is None or (setting == "versioning" and not got.get("Status")):
                    continue
                c = child_item(typ, child_name(typ, p.name, {}), {"bucket": p.import_id}, p)
                out += [c] if c else []
        elif p.type == T["key"] and T["alias"] in wanted:
            for alias in (call("kms", "list_aliases", KeyId=p.import_id) or {}).get("Aliases", []):
                c = child_item(T["alias"], child_name(T["alias"], p.name, {}), {"name": alias["AliasName"]}, p)
                out += [c] if c else []
        elif p.type == T["entry"] and T["apa"] in wanted:
            cluster, principal = p.import_id.split(":", 1)
            got = call("eks", "list_associated_access_policies", clusterName=cluster, principalArn=principal) or {}
            for assoc in got.get("associatedAccessPolicies", []):
                props = {"clusterName": cluster, "principalArn": principal, "policyArn": assoc["policyArn"]}
                c = child_item(T["apa"], child_name(T["apa"], p.name, props), props, p)
                out += [c] if c else []
    return out


def collect(aws: AwsClients, environment: str, layer: str, *, types: Iterable[str] | None = None,
            with_children: bool = True, with_supplements: bool = True) -> Inventory:
    """Inventory the live resources of `environment`/`layer`. `types` limits the per-service reads to the
    types the layer declares (all known types when None); the Tagging API is always read in full."""
    wanted = set(types) if types is not None else set(T.values()) | set(BUCKET_SETTING_TYPES.values())
    call = _Calls(aws)
    tagged, pages = tagged_resources(call, environment, layer)
    if with_supplements:
        seen = {t.arn for t in tagged}
        tagged += [t for t in supplement(call, environment, layer, wanted) if t.arn not in seen]
    warnings: list[str] = []
    items: list[LiveItem] = []
    for t in tagged:
        item = item_from_tagged(t, layer, aws.region)
        if isinstance(item, str):
            warnings.append(item)
        else:
            items.append(item)
    items, entry_warnings = _access_entries(call, _dedupe(items))
    warnings += entry_warnings
    if with_children:
        items += children(call, items, wanted)
    for i in items:
        if not i.name:
            warnings.append(f"{i.arn or i.import_id} has no `{naming.TAG_NAME}` tag, so its logical name is unknown")
    return Inventory(tuple(items), pages, dict(call.counts), tuple(warnings), frozenset(wanted))


def _dedupe(items: list[LiveItem]) -> list[LiveItem]:
    """The same resource can come from the Tagging API and from its service; keep the first."""
    seen: set[tuple[str, str]] = set()
    out = []
    for i in items:
        if (i.type, i.import_id) not in seen:
            seen.add((i.type, i.import_id))
            out.append(i)
    return out
