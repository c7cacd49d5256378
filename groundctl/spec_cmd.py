"""`groundctl spec check <env>`: validate an environment spec and show what it resolves to."""

from __future__ import annotations

import typer

from bootstrap.kit import console
from groundctl.cli import app
from bootstrap.kit.errors import BadInput
from groundctl.common import Group, ENV_ARG, json_opt

spec_app = typer.Typer(cls=Group, help="Validate and show environment specs.", no_args_is_help=True)
app.add_typer(spec_app, name="spec")


@spec_app.command("check")
def check(
    environment: str = ENV_ARG,
    json_out: bool = json_opt("the validated spec"),
) -> None:
    """Validate an environment spec; exit 2 with the field and the fix when it is wrong."""
    from bootstrap.flux.manifest import require_manifest
    from bootstrap.spec import load_spec

    spec = load_spec(environment)
    require_manifest(spec)  # the file it names, and its digest: exit 2 naming the field
    if json_out:
        console.emit_json(spec.model_dump(mode="json"))
    else:
        console.info(
            f"{environment}: valid ({'production' if spec.production else 'non-production'}, "
            f"{spec.aws.region}, {spec.network.az_count} AZ, NAT {spec.network.nat}, "
            f"public endpoint {'on' if spec.endpoint_public_access else 'off'}, flux path {spec.flux_path})"
        )


@spec_app.command("roles")
def roles(
    environment: str = ENV_ARG,
    repo: str = typer.Option("<org>/<repo>", "--repo", help="The GitHub repository whose workflows assume the roles."),
    branch: str = typer.Option("main", "--branch", help="Its default branch (the scheduled drift runs there)."),
    namespace: str = typer.Option("groundctl", "--namespace", help="The fleet's namespace (its CronJobs' IRSA)."),
    fleet_issuer: str = typer.Option(
        "", "--fleet-oidc-issuer", help="The OIDC issuer of the cluster the fleet's CronJobs run in "
        "(oidc.eks.<region>.amazonaws.com/id/<id>): the record and apply roles then trust its ServiceAccounts too."),
    json_out: bool = json_opt("each role: who assumes it, its trust and permissions policies, and the inputs of "
                              "`aws iam create-role`, `put-role-policy` and `attach-role-policy`"),
) -> None:
    """The plan, record and apply roles of an environment: who assumes each, its trust policy and its permissions."""
    import json

    from bootstrap.roles import describe, subject_problems
    from bootstrap.spec import load_spec

    from bootstrap.roles import PLACEHOLDER_REPO

    wrong = subject_problems(repo=repo, branch=branch, namespace=namespace, fleet_issuer=fleet_issuer)
    if wrong:
        raise BadInput(f"{'; '.join(wrong)}. Nothing was printed: a role trusts exactly one repository, branch and "
                       "ServiceAccount.")
    if repo == PLACEHOLDER_REPO:
        console.warn(f"the trust policies name {PLACEHOLDER_REPO}: give --repo <owner>/<name> for policies to create")
    described = describe(load_spec(environment), repo=repo, branch=branch, namespace=namespace,
                         fleet_issuer=fleet_issuer.removeprefix("https://"))
    if json_out:
        console.emit_json({"environment": environment, "roles": described})
        return
    for role in described:
        name = role["create_role"]["RoleName"]
        console.data(f"{role['role']} role {name} ({role['spec_field']}: {role['arn'] or 'not set'})\n"
                     f"  used by: {role['used_by']}\n"
                     f"  trusts: {role['github_subject']}"
                     + (f", {role['fleet_subject']}" if role["fleet_subject"] else "") + "\n"
                     f"  writes in the state bucket: {', '.join(role['writes']) or 'nothing'}\n"
                     f"  managed policy (reads of what the layers create): {', '.join(role['managed_policies'])}")
        if role["fleet_subject"] and not fleet_issuer:
            console.data("  (the fleet's CronJobs are trusted once --fleet-oidc-issuer names their cluster's issuer)")
        console.data("  trust policy (create-role --assume-role-policy-document):\n"
                     + json.dumps(role["trust_policy"], indent=2))
        console.data(f"  inline policy {role['put_role_policy']['PolicyName']} (put-role-policy):\n"
                     + json.dumps(role["policy"], indent=2))
    console.info("`--json` gives each role's create_role, put_role_policy and attach_role_policy as the inputs of "
                 "`aws iam create-role --cli-input-json`, `put-role-policy` and `attach-role-policy`.")
