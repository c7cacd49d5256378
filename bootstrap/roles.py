"""The three AWS roles groundctl's unattended jobs run with, who assumes each, what each writes, and the IAM
statements that grant exactly that. Pure: `groundctl spec roles` prints them, the workflows and the fleet's
CronJobs assume them, and docs/roles.md and runbooks/run-on-a-schedule.md carry `table()` verbatim (a test holds
all of them to this module).

- plan: previews, and nothing else. A pull request's job runs the pull request's code with it, so it writes
  nothing: no record a reviewer trusts, no state, no lock (a Pulumi preview takes no stack lock).
- record: scheduled checks that keep a record (`drift --record`, restore rehearsals): the plan role's reads,
  plus writes to those records only. Only the default branch's scheduled workflow and the fleet's CronJobs
  assume it, never a pull request.
- apply: `up`, `destroy`, `recover` and the drills, which change the environment; the merge's apply job (in the
  GitHub environment named after the groundctl environment) and the fleet's drill CronJobs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

READ_ONLY_POLICY = "arn:aws:iam::aws:policy/ReadOnlyAccess"
_BUCKET_READS = ("s3:GetBucketLocation", "s3:GetBucketVersioning", "s3:ListBucket", "s3:ListBucketVersions")
_OBJECT_READS = ("s3:GetObject", "s3:GetObjectVersion")
# Previews decrypt the stacks' secret config (the awskms secrets provider) and read SSE-KMS objects.
_KEY_READS = ("kms:Decrypt", "kms:DescribeKey")
# A put into a bucket whose default encryption is SSE-KMS asks the key for a data key.
_KEY_WRITES = ("kms:GenerateDataKey",)


@dataclass(frozen=True)
class Role:
    name: str
    spec_field: str
    used_by: str
    github_subject: str            # the OIDC `sub` its trust policy names ({repo}, {branch}, {env} filled in)
    fleet_service_account: str     # "" when no CronJob uses it; {env} filled in
    writes: tuple[str, ...] = ()   # state-bucket key patterns, {env} filled in; empty: writes nothing


ROLES = (
    Role("plan", "aws.plan_role_arn", "the pull request's live plan (`groundctl plan <env>`)",
         "repo:{repo}:pull_request", ""),
    Role("record", "aws.record_role_arn",
         "the scheduled drift check (`groundctl drift <env> --record`, workflow and CronJob) and restore rehearsals",
         "repo:{repo}:ref:refs/heads/{branch}", "{env}-record",
         writes=(".groundctl/drift/{env}/*", ".groundctl/rehearsals/{env}/*")),
    Role("apply", "aws.apply_role_arn", "the merge's `groundctl up <env> --plan-dir`, and the drills",
         "repo:{repo}:environment:{env}", "{env}-apply", writes=("everything (state, locks, ledger, records)",)),
)
BY_NAME = {r.name: r for r in ROLES}


def _key_statement(sid: str, actions: tuple[str, ...], spec) -> dict:
    aws = spec.aws
    # The key's id is only known once `up` made it; its alias is in the spec from the start.
    return {"Sid": sid, "Effect": "Allow", "Action": list(actions),
            "Resource": f"arn:aws:kms:{aws.region}:{aws.account_id}:key/*",
            "Condition": {"ForAnyValue:StringEquals": {"kms:ResourceAliases": spec.backend.kms_alias}}}


def policy(role: str, spec) -> dict:
    """The inline IAM policy of `role` for `spec`'s state bucket and key (the apply role's: `apply_policy`)."""
    if role == "apply":
        return apply_policy(spec)
    bucket = spec.backend.bucket
    statements = [
        {"Sid": "GroundctlStateBucket", "Effect": "Allow", "Action": list(_BUCKET_READS),
         "Resource": f"arn:aws:s3:::{bucket}"},
        {"Sid": "GroundctlStateRead", "Effect": "Allow", "Action": list(_OBJECT_READS),
         "Resource": f"arn:aws:s3:::{bucket}/*"},
        _key_statement("GroundctlStateKeyRead", _KEY_READS, spec),
    ]
    if role == "record":
        statements += [
            {"Sid": "GroundctlRecordsWrite", "Effect": "Allow", "Action": ["s3:PutObject"],
             "Resource": [f"arn:aws:s3:::{bucket}/{p.format(env=spec.name)}" for p in BY_NAME["record"].writes]},
            _key_statement("GroundctlRecordsKey", _KEY_WRITES, spec),
        ]
    return {"Version": "2012-10-17", "Statement": statements}


# What `up`, `destroy`, `recover` and the drills do to each service, action by action (the refreshes' reads come
# from AWS's ReadOnlyAccess beside the policy). Never s3:DeleteObjectVersion nor s3:DeleteBucket: no groundctl
# command deletes a version of state or the state bucket, so no credential of it may.
_STATE_BUCKET_WRITES = ("s3:CreateBucket", "s3:PutBucketVersioning", "s3:PutEncryptionConfiguration",
                        "s3:PutBucketPublicAccessBlock", "s3:PutBucketOwnershipControls", "s3:PutBucketPolicy",
                        "s3:PutLifecycleConfiguration", "s3:PutReplicationConfiguration", "s3:PutBucketTagging")
_STATE_OBJECTS = ("s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject")
_KEY_ACTIONS = ("kms:DescribeKey", "kms:GetKeyPolicy", "kms:PutKeyPolicy", "kms:GetKeyRotationStatus",
                "kms:EnableKeyRotation", "kms:UpdateKeyDescription", "kms:TagResource", "kms:UntagResource",
                "kms:ListResourceTags", "kms:ScheduleKeyDeletion", "kms:CreateGrant", "kms:Decrypt", "kms:Encrypt",
                "kms:GenerateDataKey", "kms:CreateAlias", "kms:DeleteAlias", "kms:UpdateAlias")
_LOG_ACTIONS = ("logs:CreateLogGroup", "logs:DeleteLogGroup", "logs:PutRetentionPolicy", "logs:TagResource",
                "logs:UntagResource", "logs:ListTagsForResource", "logs:TagLogGroup", "logs:ListTagsLogGroup")
_ROLE_ACTIONS = ("iam:CreateRole", "iam:DeleteRole", "iam:GetRole", "iam:UpdateRole", "iam:UpdateAssumeRolePolicy",
                 "iam:TagRole", "iam:UntagRole", "iam:PassRole", "iam:PutRolePolicy", "iam:GetRolePolicy",
                 "iam:DeleteRolePolicy", "iam:ListRolePolicies", "iam:AttachRolePolicy", "iam:DetachRolePolicy",
                 "iam:ListAttachedRolePolicies", "iam:ListInstanceProfilesForRole")
_OIDC_ACTIONS = ("iam:CreateOpenIDConnectProvider", "iam:DeleteOpenIDConnectProvider", "iam:GetOpenIDConnectProvider",
                 "iam:TagOpenIDConnectProvider", "iam:UntagOpenIDConnectProvider",
                 "iam:UpdateOpenIDConnectProviderThumbprint")
_CLUSTER_ACTIONS = ("eks:DeleteCluster", "eks:DescribeCluster", "eks:UpdateClusterConfig", "eks:UpdateClusterVersion",
                    "eks:AssociateEncryptionConfig", "eks:TagResource", "eks:UntagResource",
                    "eks:ListTagsForResource", "eks:CreateNodegroup", "eks:ListNodegroups", "eks:DescribeUpdate",
                    "eks:ListUpdates", "eks:CreateAccessEntry", "eks:ListAccessEntries")
_CLUSTER_PART_ACTIONS = ("eks:DeleteNodegroup", "eks:DescribeNodegroup", "eks:UpdateNodegroupConfig",
                         "eks:UpdateNodegroupVersion", "eks:DeleteAccessEntry", "eks:DescribeAccessEntry",
                         "eks:UpdateAccessEntry", "eks:AssociateAccessPolicy", "eks:DisassociateAccessPolicy",
                         "eks:ListAssociatedAccessPolicies", "eks:TagResource", "eks:UntagResource")
# Actions IAM cannot hold to a resource (a key's or a cluster's ARN is only known once it exists).
_UNSCOPED = ("kms:CreateKey", "kms:ListAliases", "eks:CreateCluster", "eks:ListAccessPolicies",
             "logs:DescribeLogGroups", "sts:GetCallerIdentity")


def _arn(service: str, region: str, account: str, resource: str) -> str:
    return f"arn:aws:{service}:{region}:{account}:{resource}"


def apply_policy(spec) -> dict:
    """What `up`, `destroy`, `recover` and the drills need to create, change and delete every layer's resources,
    each statement held to this environment's names where IAM lets a policy name them (the layers name their
    roles, cluster and log groups `<env>-…`: stacks.common.naming.physical), and to its region where it does not
    (EC2). AWS's `ReadOnlyAccess` beside it covers the refreshes' reads."""
    from stacks.common.naming import physical

    env, aws, bucket = spec.name, spec.aws, spec.backend.bucket
    account, regions = aws.account_id, [aws.region] + ([spec.backend.replica_region]
                                                       if spec.backend.replica_region else [])
    buckets = [bucket] + ([f"{bucket[:55]}-replica"] if spec.backend.replica_region else [])  # stacks/backend
    cluster = physical(env, "cluster", "cluster")
    eks = lambda kind, tail: _arn("eks", aws.region, account, f"{kind}/{cluster}{tail}")  # noqa: E731
    return {"Version": "2012-10-17", "Statement": [
        {"Sid": "GroundctlStateBuckets", "Effect": "Allow", "Action": list(_BUCKET_READS + _STATE_BUCKET_WRITES),
         "Resource": [f"arn:aws:s3:::{b}" for b in buckets]},
        {"Sid": "GroundctlState", "Effect": "Allow", "Action": list(_STATE_OBJECTS),
         "Resource": [f"arn:aws:s3:::{b}/*" for b in buckets]},
        {"Sid": "GroundctlKeys", "Effect": "Allow", "Action": list(_KEY_ACTIONS),
         "Resource": [_arn("kms", r, account, "key/*") for r in regions]
                     + [_arn("kms", aws.region, account, spec.backend.kms_alias)]},
        {"Sid": "GroundctlNetwork", "Effect": "Allow", "Action": ["ec2:*"], "Resource": "*",
         "Condition": {"StringEquals": {"aws:RequestedRegion": aws.region}}},
        {"Sid": "GroundctlLogs", "Effect": "Allow", "Action": list(_LOG_ACTIONS),
         "Resource": [_arn("logs", aws.region, account, f"log-group:/groundctl/{env}/*"),
                      _arn("logs", aws.region, account, f"log-group:/aws/eks/{cluster}/*")]},
        {"Sid": "GroundctlRoles", "Effect": "Allow", "Action": list(_ROLE_ACTIONS),
         "Resource": f"arn:aws:iam::{account}:role/{physical(env, '', '')}*"},
        {"Sid": "GroundctlClusterOidc", "Effect": "Allow", "Action": list(_OIDC_ACTIONS),
         "Resource": f"arn:aws:iam::{account}:oidc-provider/oidc.eks.{aws.region}.amazonaws.com/id/*"},
        {"Sid": "GroundctlEksServiceRoles", "Effect": "Allow", "Action": ["iam:CreateServiceLinkedRole"],
         "Resource": "*", "Condition": {"StringEquals": {"iam:AWSServiceName": [
             "eks.amazonaws.com", "eks-nodegroup.amazonaws.com"]}}},
        {"Sid": "GroundctlCluster", "Effect": "Allow", "Action": list(_CLUSTER_ACTIONS),
         "Resource": eks("cluster", "")},
        {"Sid": "GroundctlClusterParts", "Effect": "Allow", "Action": list(_CLUSTER_PART_ACTIONS),
         "Resource": [eks("nodegroup", "/*"), eks("access-entry", "/*")]},
        {"Sid": "GroundctlUnscoped", "Effect": "Allow", "Action": list(_UNSCOPED), "Resource": "*"},
    ]}


GITHUB_ISSUER = "token.actions.githubusercontent.com"


def trust_policy(role: str, spec, repo: str, branch: str, namespace: str = "groundctl",
                 fleet_issuer: str = "") -> dict:
    """Who may assume `role`: GitHub's OIDC provider for the one subject the table names, and, where a CronJob
    uses the role and `fleet_issuer` (the fleet cluster's OIDC issuer, `oidc.eks.<region>.amazonaws.com/id/…`)
    is given, that cluster's provider for the one ServiceAccount. StringEquals, never StringLike: a pattern in a
    subject would let every branch or every repository in."""
    r, account = BY_NAME[role], spec.aws.account_id
    statements = [_web_identity("GitHubActions", account, GITHUB_ISSUER,
                                r.github_subject.format(repo=repo, branch=branch, env=spec.name))]
    if r.fleet_service_account and fleet_issuer:
        statements.append(_web_identity("FleetCronJobs", account, fleet_issuer, "system:serviceaccount:"
                                        f"{namespace}:{r.fleet_service_account.format(env=spec.name)}"))
    return {"Version": "2012-10-17", "Statement": statements}


def _web_identity(sid: str, account: str, issuer: str, subject: str) -> dict:
    return {"Sid": sid, "Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity",
            "Principal": {"Federated": f"arn:aws:iam::{account}:oidc-provider/{issuer}"},
            "Condition": {"StringEquals": {f"{issuer}:aud": "sts.amazonaws.com", f"{issuer}:sub": subject}}}


_REPO = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
_PATTERN = re.compile(r"[*?\[\]]")
_ISSUER = re.compile(r"^[A-Za-z0-9.-]{1,253}(/[A-Za-z0-9._-]{1,200}){0,8}$")
PLACEHOLDER_REPO = "<org>/<repo>"


def subject_problems(repo: str, branch: str, namespace: str, fleet_issuer: str = "") -> list[str]:
    """What is wrong with the values a trust policy names: each must name one thing, never a pattern (IAM reads
    `*` and `?` as wildcards in StringLike, and a reader of the policy may not see StringEquals)."""
    shown = {"--repo": repo, "--branch": branch, "--namespace": namespace, "--fleet-oidc-issuer": fleet_issuer}
    problems = [f"{flag} {value[:120]!r} holds a wildcard ({', '.join(sorted(set(_PATTERN.findall(value))))}); name "
                "one (read as a pattern, in a StringLike condition, it would let every match assume the role)"
                for flag, value in shown.items() if _PATTERN.search(value)]
    if not problems:
        if repo != PLACEHOLDER_REPO and not _REPO.match(repo):
            problems.append(f"--repo {repo[:120]!r} is not a GitHub repository as owner/name")
        # git's own rules for a ref's name (git check-ref-format): none of these, which also keeps `:` out of the subject
        if not branch or len(branch) > 255 or any(not c.isprintable() or c.isspace() or c in "~^:\\" for c in branch):
            problems.append(f"--branch {branch[:120]!r} is not a branch name")
        if not re.match(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", namespace):
            problems.append(f"--namespace {namespace[:120]!r} is not a Kubernetes namespace")
        issuer = fleet_issuer.removeprefix("https://")
        if fleet_issuer and not _ISSUER.match(issuer):
            problems.append(f"--fleet-oidc-issuer {fleet_issuer[:120]!r} is not an OIDC issuer (host and path, such "
                            "as oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE)")
    return problems


def role_name(role: str, spec) -> tuple[str, str]:
    """The IAM name and path of `role`: those its ARN in the spec names, else `groundctl-<env>-<role>` at `/`."""
    arn = getattr(spec.aws, BY_NAME[role].spec_field.split(".", 1)[1])
    if not arn:
        return f"groundctl-{spec.name}-{role}", "/"
    path, _, name = arn.split(":role", 1)[1].rpartition("/")
    return name, path + "/"


def policy_template(role: str) -> dict:
    """`policy(role, …)` with the environment's facts as blanks (`<bucket>`, `<region>`, `<account>`,
    `<env>`, `<kms alias>`): the statements docs/roles.md and runbooks/run-on-a-schedule.md show verbatim."""
    from types import SimpleNamespace as Facts

    spec = Facts(name="<env>", aws=Facts(region="<region>", account_id="<account>"),
                 backend=Facts(bucket="<bucket>", kms_alias="<kms alias>", replica_region=None))
    return policy(role, spec)


def describe(spec, repo: str = PLACEHOLDER_REPO, branch: str = "<default branch>",
             namespace: str = "groundctl", fleet_issuer: str = "") -> list[dict]:
    """Per role: its ARN in the spec, who assumes it (GitHub's subject, the fleet's ServiceAccount), its trust
    policy and permissions (the inline policy, and AWS's managed ReadOnlyAccess for the refreshes' reads), and
    the same as the inputs of `aws iam create-role`, `put-role-policy` and `attach-role-policy`
    (`--cli-input-json`: the policy documents as JSON strings, as the API takes them)."""
    import json

    out = []
    for role in ROLES:
        arn = getattr(spec.aws, role.spec_field.split(".", 1)[1])
        account = role.fleet_service_account.format(env=spec.name)
        name, path = role_name(role.name, spec)
        trust, inline = trust_policy(role.name, spec, repo, branch, namespace, fleet_issuer), policy(role.name, spec)
        out.append({
            "role": role.name, "spec_field": role.spec_field, "arn": arn, "used_by": role.used_by,
            "github_subject": role.github_subject.format(repo=repo, branch=branch, env=spec.name),
            "fleet_subject": f"system:serviceaccount:{namespace}:{account}" if account else None,
            "writes": [w.format(env=spec.name) for w in role.writes],
            "managed_policies": [READ_ONLY_POLICY],
            "trust_policy": trust,
            "policy": inline,
            "create_role": {"RoleName": name, "Path": path, "AssumeRolePolicyDocument": json.dumps(trust),
                            "Description": f"groundctl {role.name} role of {spec.name}: {role.used_by}"[:1000]},
            "put_role_policy": {"RoleName": name, "PolicyName": f"groundctl-{spec.name}-{role.name}",
                                "PolicyDocument": json.dumps(inline)},
            "attach_role_policy": {"RoleName": name, "PolicyArn": READ_ONLY_POLICY},
        })
    return out


def table() -> str:
    """The roles as docs/roles.md and the scheduling runbook show them (Markdown)."""
    rows = ["| role | spec field | assumed by | OIDC subject it trusts | writes in the state bucket |",
            "|---|---|---|---|---|"]
    for r in ROLES:
        subjects = f"`{r.github_subject.format(repo='<org>/<repo>', branch='<default branch>', env='<env>')}`"
        if r.fleet_service_account:
            subjects += f"; `system:serviceaccount:groundctl:{r.fleet_service_account.format(env='<env>')}`"
        writes = ", ".join(f"`{w.format(env='<env>')}`" if "/" in w else w for w in r.writes) or "nothing"
        rows.append(f"| {r.name} | `{r.spec_field}` | {r.used_by} | {subjects} | {writes} |")
    return "\n".join(rows) + "\n"
