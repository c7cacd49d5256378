"""The offline plan as data (plan-<env>.json), Markdown (plan-<env>.md) and terminal tables.

`document()` is the one place that decides what a reader sees; the Markdown and the tables are
views of that document, so the three never disagree. Values arrive already masked by the mock
runtime (`[secret]`, `(known after apply)`); secret outputs are masked again here by name.

The JSON keeps its layers under a mapping, not a list, so the approved-plan reader
(bootstrap/apply/gate.py), which reads every *.json in a plan directory, does not take it for a live plan.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bootstrap.planning.posture import RULES, rule_status

if TYPE_CHECKING:
    from bootstrap.planning.offline import OfflinePlan

KIND = "groundctl.offline-plan"
SECRET = "[secret]"
UNKNOWN = "(known after apply)"

# What a reviewer wants to see of each type; other types show their first few short inputs.
KEY_PROPERTIES: dict[str, tuple[str, ...]] = {
    "pulumi:providers:aws": ("region", "allowedAccountIds"),
    "pulumi:providers:kubernetes": ("kubeconfig",),
    "pulumi:pulumi:StackReference": ("name",),
    "aws:s3/bucket:Bucket": ("bucket", "forceDestroy"),
    "aws:s3/bucketVersioning:BucketVersioning": ("bucket", "versioningConfiguration.status"),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "rules.0.applyServerSideEncryptionByDefault.sseAlgorithm",
        "rules.0.applyServerSideEncryptionByDefault.kmsMasterKeyId", "rules.0.bucketKeyEnabled"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": (
        "blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"),
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": ("rule.objectOwnership",),
    "aws:s3/bucketPolicy:BucketPolicy": ("bucket", "policy.Statement.0.Sid"),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "rules.0.noncurrentVersionExpiration.noncurrentDays",),
    "aws:s3/bucketReplicationConfig:BucketReplicationConfig": ("rules.0.destination.bucket", "role"),
    "aws:kms/key:Key": ("enableKeyRotation", "deletionWindowInDays"),
    "aws:kms/alias:Alias": ("name", "targetKeyId"),
    "aws:iam/role:Role": ("name",),
    "aws:iam/rolePolicy:RolePolicy": ("role",),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("role", "policyArn"),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": ("url", "clientIdLists"),
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/subnet:Subnet": ("cidrBlock", "availabilityZone", "mapPublicIpOnLaunch"),
    "aws:ec2/internetGateway:InternetGateway": ("vpcId",),
    "aws:ec2/routeTable:RouteTable": ("vpcId",),
    "aws:ec2/route:Route": ("destinationCidrBlock", "gatewayId", "natGatewayId"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": ("subnetId", "routeTableId"),
    "aws:ec2/eip:Eip": ("domain",),
    "aws:ec2/natGateway:NatGateway": ("subnetId", "allocationId"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("serviceName", "vpcEndpointType"),
    "aws:ec2/flowLog:FlowLog": ("vpcId", "trafficType"),
    "aws:cloudwatch/logGroup:LogGroup": ("name", "retentionInDays", "kmsKeyId"),
    "aws:eks/cluster:Cluster": ("name", "version", "vpcConfig.endpointPrivateAccess",
                                "vpcConfig.endpointPublicAccess", "enabledClusterLogTypes"),
    "aws:eks/nodeGroup:NodeGroup": ("instanceTypes", "scalingConfig.minSize", "scalingConfig.desiredSize",
                                    "scalingConfig.maxSize", "subnetIds"),
    "aws:eks/accessEntry:AccessEntry": ("principalArn", "type"),
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": ("principalArn", "policyArn"),
    "kubernetes:core/v1:Namespace": ("metadata.name",),
    "kubernetes:core/v1:Secret": ("metadata.namespace", "metadata.name", "stringData", "data"),
    "kubernetes:yaml/v2:ConfigFile": ("file",),
    "kubernetes:source.toolkit.fluxcd.io/v1:GitRepository": ("spec.url", "spec.ref"),
    "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization": ("spec.path", "spec.prune"),
}
_FALLBACK_COUNT = 3
_MAX_VALUE = 90


def _lookup(inputs: dict, dotted: str) -> Any:
    value: Any = inputs
    for part in dotted.split("."):
        if isinstance(value, str) and value.startswith("{"):
            try:  # policies arrive as JSON text
                value = json.loads(value)
            except ValueError:
                return None
        if isinstance(value, list) and part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def show(value: Any) -> str:
    """One value as short text: 90.0 → 90, lists joined, mappings as compact JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, list):
        return ", ".join(show(v) for v in value)
    if value == "":
        return '""'
    if isinstance(value, dict):
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    else:
        text = str(value)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def key_properties(type_token: str, inputs: dict) -> dict[str, str]:
    keys = KEY_PROPERTIES.get(type_token)
    if keys is None:
        keys = tuple(k for k, v in sorted(inputs.items())
                     if k != "tags" and not isinstance(v, (dict, list)))[:_FALLBACK_COUNT]
    # Labelled by the last path segment: `sseAlgorithm`, not the whole path to it.
    return {k.rsplit(".", 1)[-1]: show(v) for k in keys if (v := _lookup(inputs, k)) is not None}


def short_type(type_token: str) -> str:
    """`aws:s3/bucketVersioning:BucketVersioning` → `aws:s3:BucketVersioning`, for narrow terminals."""
    parts = type_token.split(":")
    if len(parts) != 3:
        return type_token
    return f"{parts[0]}:{parts[1].split('/')[0]}:{parts[2]}"


def _reading_order(resource) -> tuple:
    # Registration order varies run to run (async); a fixed order keeps plan files diffable.
    return (not resource.type.startswith("pulumi:"), resource.type, resource.name)


def _masked_outputs(run) -> dict:
    return {k: (SECRET if k in run.secret_outputs else v) for k, v in sorted(run.outputs.items())}


def document(plan: "OfflinePlan") -> dict:
    """The plan as JSON-ready data: deterministic (no timestamps), secrets masked."""
    statuses = rule_status(plan.findings)
    rank = {rule.id: i for i, rule in enumerate(RULES)}
    findings = sorted(plan.findings, key=lambda f: (rank.get(f.rule, len(rank)), f.resource or "", f.message))
    layers = {}
    for run in plan.runs:
        layers[run.layer] = {
            "resource_count": len(run.resources),
            "resources": [
                {"type": r.type, "name": r.name, "urn": r.urn, "protect": r.protect,
                 "key_properties": key_properties(r.type, r.inputs), "inputs": r.inputs}
                for r in sorted(run.resources, key=_reading_order)
            ],
            "outputs": _masked_outputs(run),
            "secret_outputs": sorted(run.secret_outputs),
        }
    rules = []
    for rule in RULES:
        own = [f for f in findings if f.rule == rule.id]
        rules.append({
            "id": rule.id, "layer": rule.layer, "types": list(rule.types), "reason": rule.reason,
            "status": statuses.get(rule.id, "fail"),
            "checked": len(own),
            "failures": [f.to_dict() for f in own if f.status == "fail"],
            "not_applicable": sorted({f.message for f in own if f.status == "not-applicable"}),
        })
    return {
        "kind": KIND,
        "version": 1,
        "environment": plan.environment,
        "production": plan.spec.production,
        "passed": plan.passed,
        "failed_rules": plan.failed_rules,
        "layer_order": [run.layer for run in plan.runs],
        "layers": layers,
        "rules": rules,
        "findings": [f.to_dict() for f in findings],
    }


def summary(doc: dict) -> str:
    counts = {s: sum(1 for r in doc["rules"] if r["status"] == s) for s in ("pass", "fail", "not-applicable")}
    total = sum(layer["resource_count"] for layer in doc["layers"].values())
    verdict = "PASS" if doc["passed"] else "FAIL"
    return (f"{verdict}: {total} resources in {len(doc['layers'])} layers; posture rules: {counts['pass']} pass, "
            f"{counts['fail']} fail, {counts['not-applicable']} not applicable")


def _rule_detail(rule: dict) -> str:
    if rule["failures"]:
        return "; ".join(f"{f['resource'] + ': ' if f['resource'] else ''}{f['message']}" for f in rule["failures"])
    if rule["status"] == "pass":
        return f"{rule['checked']} checked"
    return "not applicable: " + "; ".join(rule["not_applicable"])


# -- Markdown ------------------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def _props(props: dict[str, str]) -> str:
    return "<br>".join(f"{_cell(k)}: `{_cell(v)}`" for k, v in props.items())


def markdown(doc: dict) -> str:
    env = doc["environment"]
    lines = [
        f"# Offline plan: {env}", "",
        f"**{summary(doc)}**", "",
        f"Produced by `groundctl plan {env} --offline`: each layer's program ran under Pulumi's mock runtime, "
        "with no cloud calls and no credentials. A value shown as `(known after apply)` is computed by the "
        "provider when the resource is created; `[secret]` is a secret value, never shown.", "",
    ]
    failing = [r for r in doc["rules"] if r["status"] == "fail"]
    if failing:
        lines += ["## Failing posture rules", "", "| rule | layer | finding | why it matters |", "|---|---|---|---|"]
        lines += [f"| `{r['id']}` | {r['layer']} | {_cell(_rule_detail(r))} | {_cell(r['reason'])} |" for r in failing]
        lines.append("")
    for name in doc["layer_order"]:
        layer = doc["layers"][name]
        lines += [f"## {name} ({layer['resource_count']} resources)", "",
                  "| type | name | key properties | protected |", "|---|---|---|---|"]
        lines += [f"| `{_cell(r['type'])}` | {_cell(r['name'])} | {_props(r['key_properties'])} | "
                  f"{'yes' if r['protect'] else ''} |" for r in layer["resources"]]
        lines += ["", "Outputs: " + ", ".join(f"`{k}` = `{_cell(show(v))}`" for k, v in layer["outputs"].items()), ""]
    lines += ["## Posture rules", "", "| rule | layer | status | detail | why it matters |", "|---|---|---|---|---|"]
    lines += [f"| `{r['id']}` | {r['layer']} | {r['status']} | {_cell(_rule_detail(r))} | {_cell(r['reason'])} |"
              for r in doc["rules"]]
    return "\n".join(lines) + "\n"


def json_text(doc: dict) -> str:
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def files(doc: dict) -> dict[str, str]:
    """File name → text for the --out directory."""
    env = doc["environment"]
    return {f"plan-{env}.md": markdown(doc), f"plan-{env}.json": json_text(doc)}


# -- terminal ------------------------------------------------------------------------------------------


def tables(doc: dict) -> list:
    """Rich tables: one per layer, then the posture rules. User data is passed as Text (no markup)."""
    from rich.table import Table
    from rich.text import Text

    out = []
    for name in doc["layer_order"]:
        layer = doc["layers"][name]
        table = Table(title=Text(f"{name}: {layer['resource_count']} resources"), title_justify="left")
        for column in ("type", "name", "key properties", "protected"):
            table.add_column(column, overflow="fold")
        for r in layer["resources"]:
            props = "\n".join(f"{k}: {v}" for k, v in r["key_properties"].items())
            table.add_row(Text(short_type(r["type"])), Text(r["name"]), Text(props), Text("yes" if r["protect"] else ""))
        out.append(table)
    checks = Table(title=Text("posture rules"), title_justify="left")
    for column in ("rule", "layer", "status", "detail"):
        checks.add_column(column, overflow="fold")
    style = {"pass": "green", "fail": "bold red", "not-applicable": "dim"}
    for r in doc["rules"]:
        checks.add_row(Text(r["id"]), Text(r["layer"]), Text(r["status"], style=style[r["status"]]),
                       Text(_rule_detail(r)))
    out.append(checks)
    return out
