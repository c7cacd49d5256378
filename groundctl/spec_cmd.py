"""`groundctl spec check <env>`: validate an environment spec and show what it resolves to."""

from __future__ import annotations

import typer

from bootstrap.kit import console
from groundctl.cli import app
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
    json_out: bool = json_opt("each role: who assumes it, what it writes, its IAM policy"),
) -> None:
    """The plan, record and apply roles of an environment: who assumes each and the IAM statements each needs."""
    import json

    from bootstrap.roles import describe
    from bootstrap.spec import load_spec

    described = describe(load_spec(environment), repo=repo, branch=branch, namespace=namespace)
    if json_out:
        console.emit_json({"environment": environment, "roles": described})
        return
    for role in described:
        console.data(f"{role['role']} role ({role['spec_field']}: {role['arn'] or 'not set'})\n"
                     f"  used by: {role['used_by']}\n"
                     f"  trusts: {role['github_subject']}"
                     + (f", {role['fleet_subject']}" if role["fleet_subject"] else "") + "\n"
                     f"  writes in the state bucket: {', '.join(role['writes']) or 'nothing'}")
        if role["managed_policies"]:
            console.data(f"  managed policy (reads of what the layers create): {', '.join(role['managed_policies'])}")
        if role["policy"] is not None:
            console.data("  inline policy:\n" + json.dumps(role["policy"], indent=2))
        else:
            console.data("  policy: what `groundctl up` needs to create every layer (S3, KMS, VPC, IAM, EKS); not "
                         "generated")
