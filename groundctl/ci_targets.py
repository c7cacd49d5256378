"""`groundctl ci targets`: which environments a change touches, as the workflow matrix with each one's roles."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput
from groundctl.ci import REPO_DIR, ci_app, environments_of, printable, select
from groundctl.common import json_opt, table


@ci_app.command("targets")
def targets(
    changed_files: Optional[Path] = typer.Option(
        None, "--changed-files", help="File listing the changed paths, one per line (`-` reads stdin)."),
    every: bool = typer.Option(False, "--all", help="Every environment, whatever changed."),
    needs: Optional[str] = typer.Option(None, "--needs", help="Only environments whose spec names this role: "
                                                               "plan-role, record-role or apply-role."),
    repo: Path = REPO_DIR,
    json_out: bool = json_opt("the matrix (include, count, skipped)"),
) -> None:
    """Which environments a change touches, with the roles CI would use for each (a workflow matrix)."""
    from bootstrap.ci.touched import touched

    if (changed_files is None) == (not every):
        raise BadInput("Give either --changed-files FILE (the paths a change touches) or --all, not both or neither.")
    if needs not in (None, "plan-role", "record-role", "apply-role"):
        raise BadInput(f"--needs {needs!r} is not a role; use plan-role, record-role or apply-role.")
    environments = environments_of(repo)
    if every:
        names, why = [e.environment for e in environments], "every environment"
    else:
        paths = _read_changed(changed_files)
        _refuse_unusable_names(paths)
        # The workflows name the requirements file they install (GROUNDCTL_INSTALL): a change to it is an upgrade.
        names, why = touched(paths, environments, install=os.environ.get("GROUNDCTL_INSTALL", ""))
    selection = select(environments, names, needs.removesuffix("-role") if needs else None)
    for name, reason in selection.skipped:
        console.warn(f"{name}: not included: {reason}")
    if json_out:
        console.emit_json({**selection.matrix(), "why": why})
        return
    console.info(why)
    shown = table("Environments for CI", "environment", "region", "plan role", "record role", "apply role")
    for env in selection.include:
        shown.add_row(*(Text(v) for v in (env.environment, env.region, env.plan_role or "-", env.record_role or "-",
                                          env.apply_role or "-")))
    console.data(shown)


CHANGED_FILES_MAX_BYTES = 16 * 1024 * 1024  # `git diff --name-only` of a change of 100,000 files is a few MiB


def _read_changed(path: Path) -> list[str]:
    from bootstrap.ci.touched import environment_of, not_paths
    from bootstrap.kit.user_files import read_user_file

    how = "Give a text file with one changed path per line, such as the output of `git diff --name-only`"
    if environment_of(str(path)) is not None:
        raise BadInput(f"--changed-files {path} is an environment spec, not a list of changed paths. {how} (a file "
                       f"holding the line {path} touches that environment), or --all for every environment.")
    try:
        text = sys.stdin.read() if str(path) == "-" else read_user_file(
            str(path), what="--changed-files", max_bytes=CHANGED_FILES_MAX_BYTES, fix=f"{how}.").decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"Cannot read --changed-files {path} ({exc}). {how}.") from None
    lines = text.splitlines()
    bad = not_paths(lines)
    if bad:
        number, line = bad[0]
        raise BadInput(f"--changed-files {path} is not a list of changed paths: line {number} ({printable(line)!r}) "
                       f"is not a path{f', nor are {len(bad) - 1} more lines' if len(bad) > 1 else ''}. {how}.")
    return [line for line in lines if line.strip()]


def _refuse_unusable_names(paths: list[str]) -> None:
    from bootstrap.ci.touched import ENV_NAME, environment_of

    bad = sorted({p for p in paths if (name := environment_of(p)) is not None and not ENV_NAME.fullmatch(name)})
    if bad:
        raise BadInput(f"{', '.join(bad)}: an environment file's name must be the environment's name, made of "
                       "lowercase letters, digits and hyphens (it becomes the Pulumi stack name). Rename it.")
