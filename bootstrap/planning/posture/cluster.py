"""Posture rules of the cluster layer: encryption, logs, endpoint exposure, nodes, admins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from bootstrap.planning.posture.model import Context, Outcome, Rule, each, ok

if TYPE_CHECKING:
    from bootstrap.planning.mockrun import DeclaredResource

EKS = "aws:eks/cluster:Cluster"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
ACCESS_ENTRY = "aws:eks/accessEntry:AccessEntry"
ACCESS_POLICY = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"


CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


def _secrets_encryption(ctx: Context, r: "DeclaredResource") -> Outcome:
    enc = r.inputs.get("encryptionConfig") or {}
    enc = enc[0] if isinstance(enc, list) and enc else enc
    key = (enc.get("provider") or {}).get("keyArn") if isinstance(enc, dict) else None
    resources = enc.get("resources") or [] if isinstance(enc, dict) else []
    return ok("secrets" in resources and bool(key), r.name, "Kubernetes secrets envelope-encrypted with KMS",
              "secrets are not envelope-encrypted with a KMS key")


def _log_types(ctx: Context, r: "DeclaredResource") -> Outcome:
    missing = [t for t in CONTROL_PLANE_LOG_TYPES if t not in (r.inputs.get("enabledClusterLogTypes") or [])]
    return ok(not missing, r.name, "all five control-plane log types", f"log types off: {', '.join(missing)}")


def _private_access(ctx: Context, r: "DeclaredResource") -> Outcome:
    on = (r.inputs.get("vpcConfig") or {}).get("endpointPrivateAccess") is True
    return ok(on, r.name, "private endpoint access on", "private endpoint access is off")


def _public_in_production(ctx: Context, r: "DeclaredResource") -> Outcome:
    public = (r.inputs.get("vpcConfig") or {}).get("endpointPublicAccess")
    if not ctx.spec.production:
        return "not-applicable", r.name, f"non-production (public access {'on' if public else 'off'} per spec)"
    return ok(public is False, r.name, "public endpoint off",
              "the API endpoint is public in production; set cluster.endpoint_public_access: false")


def _nodes_private(ctx: Context) -> Iterable[Outcome]:
    net = ctx.runs.get("network")
    private = set((net.outputs if net else {}).get("private_subnet_ids") or [])
    for group in ctx.of_type("cluster", NODE_GROUP):
        ids = group.inputs.get("subnetIds") or []
        ids = ids if isinstance(ids, list) else [ids]
        stray = [i for i in ids if i not in private]
        yield ok(bool(ids) and not stray, group.name, "only private subnets",
                 f"subnets outside the private ones: {', '.join(map(str, stray))}" if stray else "no subnets")


def _admin_access(ctx: Context) -> Iterable[Outcome]:
    arns = ctx.spec.cluster.admin_principal_arns
    if not arns:
        yield "not-applicable", None, "the spec names no admin principals"
        return
    entries = {r.inputs.get("principalArn") for r in ctx.of_type("cluster", ACCESS_ENTRY)}
    admins = {r.inputs.get("principalArn") for r in ctx.of_type("cluster", ACCESS_POLICY)
              if str(r.inputs.get("policyArn", "")).endswith(f"/{ADMIN_POLICY}")}
    for arn in arns:
        missing = [what for what, present in (("access entry", arn in entries), (ADMIN_POLICY, arn in admins))
                   if not present]
        yield ok(not missing, arn, "access entry with cluster admin policy", f"missing {' and '.join(missing)}")


RULES: tuple[Rule, ...] = (
    Rule("cluster-secrets-encryption", "cluster", (EKS,),
         "Kubernetes secrets are envelope-encrypted with a KMS key", each("cluster", EKS, _secrets_encryption)),
    Rule("cluster-control-plane-logs", "cluster", (EKS,),
         "every control-plane log type is kept for audit", each("cluster", EKS, _log_types)),
    Rule("cluster-endpoint-private-access", "cluster", (EKS,),
         "nodes and operators in the VPC reach the API privately", each("cluster", EKS, _private_access)),
    Rule("cluster-endpoint-private-in-production", "cluster", (EKS,),
         "a production API server is not exposed to the internet", each("cluster", EKS, _public_in_production)),
    Rule("cluster-nodes-private-subnets", "cluster", (NODE_GROUP,),
         "worker nodes never sit in public subnets", _nodes_private),
    Rule("cluster-admin-access", "cluster", (ACCESS_ENTRY, ACCESS_POLICY),
         "every named admin can reach the cluster, through access entries", _admin_access),
)
