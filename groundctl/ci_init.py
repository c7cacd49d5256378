"""`groundctl ci init`: write the GitHub Actions workflow set into the repository, installing groundctl from the
repository's own hashed requirements file and the wheel it names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput, Refused
from groundctl.ci import REPO_DIR, ci_app, environments_of, select, version_of
from groundctl.common import json_opt, table


@ci_app.command("init")
def init(
    repo: Path = REPO_DIR,
    install: str = typer.Option(
        "groundctl-requirements.txt", "--install",
        help="What the workflows install: the repository's requirements file pinning groundctl and its "
             "dependencies with sha256 hashes (installed with --require-hashes), or `.` for a repository that "
             "is groundctl itself."),
    python_version: str = typer.Option("3.11", "--python-version", help="Python for the workflows."),
    pulumi_version: Optional[str] = typer.Option(
        None, "--pulumi-version", help="Pulumi CLI release the workflows install (default: the one groundctl pins)."),
    default_branch: str = typer.Option("main", "--default-branch", help="Branch that merges apply to."),
    drift_schedule: str = typer.Option("17 6 * * *", "--drift-schedule", help="Cron schedule (UTC) of the drift run."),
    rehearsal_schedule: str = typer.Option("43 4 * * *", "--rehearsal-schedule",
                                           help="Cron schedule (UTC) of the restore rehearsal run."),
    force: bool = typer.Option(False, "--force", help="Overwrite workflow files that differ from what would be written."),
    json_out: bool = json_opt("what was written and what CI will do per environment"),
) -> None:
    """Write .github/workflows/groundctl-{pr,apply,drift,rehearse}.yml into a repository that holds environments/."""
    from bootstrap.ci import workflows
    from bootstrap.destinations import check_dir, symlink_on_the_way, write_text

    from bootstrap.engine.versions import PULUMI_CLI_PINNED

    environments = environments_of(repo)
    options = workflows.WorkflowOptions(
        install=install,
        python_version=python_version,
        pulumi_version=pulumi_version or PULUMI_CLI_PINNED,
        default_branch=default_branch,
        drift_cron=drift_schedule,
        rehearsal_cron=rehearsal_schedule,
        groundctl_version=version_of("groundctl", "unknown"),
    )
    wrong = workflows.problems(options)
    notes: list[str] = []
    if not wrong and options.install != workflows.CHECKOUT:
        wrong, notes, wheel_dir = _pinned_copy(repo, options.install)
        options = replace(options, wheel_dir=wheel_dir)
    if wrong:
        raise BadInput(f"Cannot write the workflows: {'; '.join(wrong)}.")
    for note in notes:
        console.info(note)
    rendered = workflows.render(options)
    status = {}
    for rel, text in rendered.items():
        path = repo / rel
        link = symlink_on_the_way(repo, rel)
        if link is not None:
            # A link planted in a repository (a pull request can add one) would send the write anywhere.
            raise BadInput(f"{link} is a symbolic link, and `groundctl ci init` never writes through one: the "
                           f"workflow could land outside {repo.resolve()}. Nothing was written. Replace the link "
                           "with a plain folder or file (or remove it), then run `groundctl ci init` again.")
        if path.is_file():
            status[rel] = "unchanged" if path.read_text(encoding="utf-8") == text else "differs"
        elif path.exists():
            raise BadInput(f"{path} exists and is not a file. Move it away and run `groundctl ci init` again.")
        else:
            status[rel] = "new"
    differing = [rel for rel, s in status.items() if s == "differs"]
    if differing and not force:
        raise Refused(
            f"{', '.join(differing)} already exist{'s' if len(differing) == 1 else ''} with other content, so "
            "nothing was written. Review the difference (the repository's history keeps the old file), then "
            "re-run with --force to replace them."
        )
    # The jobs install the CLI and plugins from the lock when they run (ubuntu-latest: linux-amd64), so the lock
    # must cover them before workflows that would stop at that step are written.
    from groundctl.pins import require_covered

    require_covered(repo, "Writing the workflows (their install steps read the repository's pins lock)",
                    cli_version=options.pulumi_version)
    pending = {rel: text for rel, text in rendered.items() if status[rel] != "unchanged"}
    if pending:
        check_dir(repo / workflows.WORKFLOW_DIR, "--dir")  # every file can be written, or none is
    for rel, text in pending.items():
        write_text(repo / rel, text, "--dir")
        status[rel] = "replaced" if status[rel] == "differs" else "written"
    chosen = {role: {x.environment for x in select(environments, None, role).include}
              for role in ("plan", "record", "apply")}
    rows = [{"environment": e.environment, "live_plan": e.environment in chosen["plan"],
             "scheduled_drift": e.environment in chosen["record"], "apply_on_merge": e.environment in chosen["apply"],
             "spec_error": e.spec_error} for e in environments]
    if json_out:
        console.emit_json({"files": status, "install": options.install, "pulumi_version": options.pulumi_version,
                           "install_notes": notes, "environments": rows})
        return
    for rel, s in status.items():
        console.info(f"{s:>9}  {rel}")
    shown = table("What CI does per environment", "environment", "PR: spec check + offline plan", "PR: live plan",
                  "schedule: drift --record", "merge: up --plan-dir")
    for row in rows:
        broken = "spec invalid: " if row["spec_error"] else ""
        shown.add_row(Text(row["environment"]), Text(f"{broken}yes"),
                      Text("plan role" if row["live_plan"] else "no (no aws.plan_role_arn)"),
                      Text("record role" if row["scheduled_drift"] else "no (no aws.record_role_arn)"),
                      Text("apply role" if row["apply_on_merge"] else "no (no aws.apply_role_arn)"))
    console.data(shown)
    console.info(f"The workflows install {options.install} and Pulumi CLI {options.pulumi_version}. Commit "
                 ".github/workflows/ and see groundctl's docs/roles.md for the roles' "
                 "trust policies.")


REQUIREMENTS_MAX_BYTES = 1 << 20  # a hashed requirements file of a few hundred packages is ~200 KiB


def _pinned_copy(repo: Path, install: str) -> tuple[list[str], list[str], Optional[str]]:
    """(problems, notes, the wheel's folder when the install step must point a `file:` URL at it) for the
    repository's requirements file `install`."""
    from bootstrap.ci import requirements as req
    from bootstrap.kit.user_files import UnusableFile, read_user_file

    why = ""
    try:  # a FIFO, a device or a hung mount is a problem naming the file, never a wait (bootstrap.kit.user_files)
        text = read_user_file(str(repo / install), what="", fix="", max_bytes=REQUIREMENTS_MAX_BYTES,
                              follow_symlinks=False).decode("utf-8")
    except UnusableFile as exc:
        text, why = None, f" ({exc.reason})"
    except UnicodeDecodeError:
        text, why = None, " (it is not UTF-8 text)"
    if text is None:
        return [f"{install} is not a readable file in {repo.resolve()}{why}: the workflows install groundctl from the "
                "repository's own hashed requirements file. Build groundctl's wheel (`python -m build --wheel` in "
                "its checkout), commit it, and write its path and every dependency with `--hash=sha256:…` there "
                "(e.g. `pip-compile --generate-hashes`); or pass --install . in groundctl's own repository"], [], None
    parsed = req.parse(text, install)
    found = _find_wheel(repo, parsed.pin.candidates()) if parsed.pin else None
    problems = list(parsed.problems) + (req.wheel_problems(parsed.pin, found, install) if parsed.pin else [])
    return problems, list(parsed.notes), req.wheel_dir(parsed.pin, found) if not problems else None


def _find_wheel(repo: Path, candidates: tuple[str, ...]):
    """The first candidate that is a file inside the repository (no link leads out of it), with its sha256."""
    import hashlib

    from bootstrap.ci.requirements import Wheel

    root = repo.resolve()
    for rel in candidates:
        path = root / rel
        try:
            if not path.is_file() or not path.resolve().is_relative_to(root):
                continue
            digest = hashlib.sha256()
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        except OSError:
            continue
        return Wheel(rel, digest.hexdigest())
    return None
