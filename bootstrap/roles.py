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

from dataclasses import dataclass
from typing import Optional

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


def policy(role: str, spec) -> Optional[dict]:
    """The inline IAM policy of `role` for `spec`'s state bucket and key; None for the apply role (what `up`
    needs to create every layer's resources is the layers' own business, not generated here)."""
    if role == "apply":
        return None
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


def policy_template(role: str) -> Optional[dict]:
    """`policy(role, …)` with the environment's facts as blanks (`<bucket>`, `<region>`, `<account>`,
    `<env>`, `<kms alias>`): the statements docs/roles.md and runbooks/run-on-a-schedule.md show verbatim."""
    from types import SimpleNamespace as Facts

    spec = Facts(name="<env>", aws=Facts(region="<region>", account_id="<account>"),
                 backend=Facts(bucket="<bucket>", kms_alias="<kms alias>"))
    return policy(role, spec)


def describe(spec, repo: str = "<org>/<repo>", branch: str = "<default branch>",
             namespace: str = "groundctl") -> list[dict]:
    """Per role: its ARN in the spec, who assumes it (GitHub's subject, the fleet's ServiceAccount), the managed
    policy for reading what the layers create, and the inline policy."""
    out = []
    for role in ROLES:
        arn = getattr(spec.aws, role.spec_field.split(".", 1)[1])
        account = role.fleet_service_account.format(env=spec.name)
        out.append({
            "role": role.name, "spec_field": role.spec_field, "arn": arn, "used_by": role.used_by,
            "github_subject": role.github_subject.format(repo=repo, branch=branch, env=spec.name),
            "fleet_subject": f"system:serviceaccount:{namespace}:{account}" if account else None,
            "writes": [w.format(env=spec.name) for w in role.writes],
            "managed_policies": [READ_ONLY_POLICY] if role.name != "apply" else [],
            "policy": policy(role.name, spec),
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
