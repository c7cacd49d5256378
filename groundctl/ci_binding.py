"""`groundctl ci digests` and `ci verify-plan`: the reviewed plan bound to what the reviewer saw
(bootstrap/ci/binding.py). The plan job posts each layer's digests in the sticky comment and its check's output;
the merge job refuses an artifact that is not the plan those digests describe."""

from __future__ import annotations

from pathlib import Path

import typer

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput, Refused
from groundctl.ci import ci_app
from groundctl.common import json_opt


def artifact_digests(plan_dir: Path, environment: str) -> dict:
    """Layer → LayerDigest of the live plan folder, read as `up --plan-dir` reads it (the one reader, each saved plan
    checked against the sha256 its plan file names). BadInput when the folder holds no usable plan."""
    from bootstrap.apply.runner import approved_plans
    from bootstrap.ci.binding import layer_digest
    from bootstrap.planning.knowledge import NotASavedPlan, knowledge

    found = {}
    for layer, entry in approved_plans(plan_dir, environment).items():
        known = None
        if entry.saved_plan_text is not None:
            try:
                known = knowledge(entry.saved_plan_text)
            except NotASavedPlan as exc:
                raise BadInput(f"{plan_dir / entry.saved_plan[0]} is not a Pulumi saved plan ({exc}). Re-create the "
                               f"plan folder with `groundctl plan {environment} --out DIR`.") from None
        found[layer] = layer_digest(entry.fingerprint, entry.saved_plan[1] if entry.saved_plan else None, known)
    return found


def _environment(environment: str) -> None:
    from bootstrap.ci.touched import ENV_NAME

    if not ENV_NAME.fullmatch(environment):
        raise BadInput(f"'{environment}' is not an environment name (lowercase letters, digits, hyphens).")


@ci_app.command("digests")
def digests(
    environment: str = typer.Argument(..., help="Environment name."),
    plan_dir: Path = typer.Option(..., "--plan-dir", help="The live plan folder (`groundctl plan --out`)."),
    json_out: bool = json_opt("each layer's digests"),
) -> None:
    """Each layer's fingerprint, saved plan sha256 and unknown planned values: what the reviewer is shown."""
    from dataclasses import asdict

    from bootstrap.ci.binding import table

    _environment(environment)
    found = artifact_digests(plan_dir, environment)
    if json_out:
        console.emit_json({"environment": environment, "layers": {k: asdict(v) for k, v in found.items()}})
        return
    console.data(f"Digests of the plan of {environment} for review:\n\n{table(found)}")


@ci_app.command("verify-plan")
def verify_plan(
    environment: str = typer.Argument(..., help="Environment name."),
    plan_dir: Path = typer.Option(..., "--plan-dir", help="The downloaded live plan folder (the artifact)."),
    comment: Path = typer.Option(..., "--comment", help="The sticky comment's body, as the workflow's bot posted it."),
    commit: str = typer.Option(..., "--commit", help="The pull request's last commit, whose plan was reviewed."),
    json_out: bool = json_opt("the layers checked"),
) -> None:
    """Refuse (exit 3) a plan artifact that is not the plan whose digests were posted for review."""
    from bootstrap.ci.binding import NotPosted, posted, problems
    from groundctl.ci_reports import read_ci_file

    _environment(environment)
    again = ("Nothing was applied. Push to the pull request again (or re-run its checks) so that its plan is posted "
             "and reviewed, then merge; or apply by hand after review.")
    body = read_ci_file(comment, "the sticky comment")
    if body is None:
        raise Refused(f"No sticky plan comment of the workflow was found for {environment} ({comment} is missing), so "
                      f"nothing says which plan was reviewed. {again}")
    try:
        reviewed = posted(body, environment)
    except NotPosted as exc:
        raise Refused(f"The sticky plan comment of {environment} cannot bind the plan: {exc}. {again}") from None
    found = artifact_digests(plan_dir, environment)
    wrong = problems(reviewed, found, commit.strip().lower())
    if wrong:
        raise Refused(f"The plan in {plan_dir} is not the plan reviewed on the pull request: {'; '.join(wrong)}. "
                      f"{again}")
    if json_out:
        console.emit_json({"environment": environment, "commit": reviewed.commit, "layers": sorted(found),
                           "bound": True})
        return
    console.info(f"The plan in {plan_dir} is the one reviewed for {reviewed.commit[:12]}: "
                 f"{', '.join(sorted(found))} match the digests posted.")

