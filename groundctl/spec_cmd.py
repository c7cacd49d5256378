"""`groundctl spec check <env>`: validate an environment spec and show what it resolves to."""

from __future__ import annotations

import typer

from bootstrap import console
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
    from bootstrap.flux_manifest import require_manifest
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
