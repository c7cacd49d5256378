"""`groundctl ci …`: the command group, and what its commands share — the repository's environments, read
once, and the CI matrix made of them. Each concern is a module of its own, registered with the group:
ci_init (the workflow set), ci_targets (which environments a change touches) and ci_reports (the sticky
plan comment, the merge job's summary, the drift issue). The decisions are pure functions in bootstrap/ci/.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from bootstrap.kit.errors import BadInput
from groundctl.common import Group

ci_app = typer.Typer(cls=Group, help="Pull-request plans, merge applies and drift checks on GitHub Actions.",
                     no_args_is_help=True)  # its modules import it, so it does not import the app: cli adds it

REPO_DIR = typer.Option(Path("."), "--dir", help="The repository root (it holds environments/).")


def version_of(package: str, fallback: str) -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~10 ms: not for `groundctl --help`

    try:
        return version(package)
    except PackageNotFoundError:
        return fallback


def printable(text: str, limit: int = 60) -> str:
    shown = "".join(c if c.isprintable() else "?" for c in text)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def environments_of(repo: Path) -> list:
    """Every environments/*.yaml under `repo`, loaded; a spec that does not load keeps its error."""
    from bootstrap.ci.touched import ENV_NAME, CiEnvironment
    from bootstrap.spec import load_spec

    folder = repo / "environments"
    if not folder.is_dir():
        raise BadInput(f"{repo.resolve()} holds no environments/ folder. Run this in the repository that holds "
                       "environments/<env>.yaml, or point --dir at it.")
    found = []
    for path in sorted(folder.glob("*.yaml")):
        if not ENV_NAME.fullmatch(path.stem):
            continue  # never an environment; a change that adds one is refused by `targets`
        try:
            spec = load_spec(path.stem, base=folder)
        except BadInput as exc:
            found.append(CiEnvironment(path.stem, spec_error=exc.message))
            continue
        # A manifest inside the repository (every relative path is: bootstrap.flux.manifest) touches the environment.
        manifest = spec.flux.manifest_path
        local = manifest and not manifest.startswith(("http://", "https://"))
        inside = local and os.path.relpath(manifest, repo.absolute())
        found.append(CiEnvironment(
            spec.name, region=spec.aws.region, account_id=spec.aws.account_id,
            plan_role=spec.aws.plan_role_arn or "", apply_role=spec.aws.apply_role_arn or "",
            record_role=spec.aws.record_role_arn or "",
            production=spec.production,
            extra_files=(inside,) if inside and not inside.startswith("..") else (),
        ))
    if not found:
        raise BadInput(f"{folder} holds no environment specs (<env>.yaml). Add one (`groundctl init --name <env> "
                       "--region <region> --account <id>` writes a first one from a bundled example), then run the "
                       "command again.")
    return found


def select(environments: list, names: Optional[list[str]], needs: Optional[str]):
    from bootstrap.ci.touched import select

    return select(environments, names if names is not None else [e.environment for e in environments], needs)
