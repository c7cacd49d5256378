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
    drift: bool = typer.Option(True, "--drift/--no-drift",
                               help="Write the scheduled drift workflow; --no-drift leaves it out where the fleet's "
                                    "drift CronJobs check drift (both write the same records)."),
    force: bool = typer.Option(False, "--force", help="Overwrite workflow files that differ from what would be written."),
    json_out: bool = json_opt("what was written and what CI will do per environment"),
) -> None:
    """Write .github/workflows/groundctl-{pr,apply,drift,rehearse}.yml into a repository that holds environments/."""
    from bootstrap.ci import workflows
    from bootstrap.destinations import check_dir, write_text

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
        drift=drift,
    )
    rendered, notes, options = workflow_files(repo, options)
    left_out = f"{workflows.WORKFLOW_DIR}/{workflows.DRIFT_WORKFLOW}"
    if not drift and (repo / left_out).is_file():
        # Never deleted here: the repository's history is the operator's to change.
        notes.append(f"{left_out} was left as it is (--no-drift writes no drift workflow); delete it to stop the "
                     "scheduled drift runs there")
    for note in notes:
        console.info(note)
    status = file_status(repo, rendered, "groundctl ci init")
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
             "scheduled_drift": drift and e.environment in chosen["record"],
             "apply_on_merge": e.environment in chosen["apply"],
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
                      Text("record role" if row["scheduled_drift"] else "no (--no-drift)" if not drift
                           else "no (no aws.record_role_arn)"),
                      Text("apply role" if row["apply_on_merge"] else "no (no aws.apply_role_arn)"))
    console.data(shown)
    console.info(f"The workflows install {options.install} and Pulumi CLI {options.pulumi_version}. Commit "
                 ".github/workflows/ and see groundctl's docs/roles.md for the roles' "
                 "trust policies.")


def workflow_files(repo: Path, options):
    """(repository path → text of each workflow, notes on the install, the options with the wheel's folder) for
    `repo`; BadInput naming what stops them (an option, the requirements file, the wheel it pins)."""
    from bootstrap.ci import workflows

    wrong = workflows.problems(options)
    notes: list[str] = []
    if not wrong and options.install != workflows.CHECKOUT:
        wrong, notes, wheel_dir, _ = _pinned_copy(repo, options.install)
        options = replace(options, wheel_dir=wheel_dir)
    if wrong:
        raise BadInput(f"Cannot write the workflows: {'; '.join(wrong)}.")
    return workflows.render(options), notes, options


def file_status(repo: Path, files: dict[str, str], command: str) -> dict[str, str]:
    """Per repository path: `new`, `unchanged` or `differs` from the text to write; BadInput for a path through a
    symbolic link or that is not a file, so that nothing is written."""
    from bootstrap.destinations import symlink_on_the_way
    from bootstrap.kit.user_files import read_user_file

    status = {}
    for rel, text in files.items():
        path = repo / rel
        link = symlink_on_the_way(repo, rel)
        if link is not None:
            # A link planted in a repository (a pull request can add one) would send the write anywhere.
            raise BadInput(f"{link} is a symbolic link, and `{command}` never writes through one: {rel} could land "
                           f"outside {repo.resolve()}. Nothing was written. Replace the link with a plain folder or "
                           f"file (or remove it), then run `{command}` again.")
        if path.is_file():
            # Its size first: a file of another size differs, and is never read whole to say so. One of the same size
            # is read as every file a user names: a FIFO swapped in, or a hung mount, is an error naming it.
            want = text.encode("utf-8")
            same = path.stat().st_size == len(want) and read_user_file(
                str(path), what="The file", max_bytes=len(want), follow_symlinks=False,
                fix=f"Move it away and run `{command}` again") == want
            status[rel] = "unchanged" if same else "differs"
        elif path.exists() or path.is_symlink():
            raise BadInput(f"{path} exists and is not a file. Move it away and run `{command}` again.")
        else:
            status[rel] = "new"
    return status


REQUIREMENTS_MAX_BYTES = 1 << 20  # a hashed requirements file of a few hundred packages is ~200 KiB
WHEEL_MAX_BYTES = 256 << 20  # groundctl's wheel is well under a MiB; the bound is for what a requirement names


def _pinned_copy(repo: Path, install: str) -> tuple[list[str], list[str], Optional[str], Optional[str]]:
    """(problems, notes, the wheel's folder when the install step must point a `file:` URL at it, the committed
    wheel's repository path when it is there) for the repository's requirements file `install`."""
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
                "(e.g. `pip-compile --generate-hashes`); or pass --install . in groundctl's own repository"], [], None, None
    parsed = req.parse(text, install)
    found = _find_wheel(repo, parsed.pin.candidates()) if parsed.pin else None
    problems = list(parsed.problems) + (req.wheel_problems(parsed.pin, found, install) if parsed.pin else [])
    return (problems, list(parsed.notes), req.wheel_dir(parsed.pin, found) if not problems else None,
            found.path if found and not problems else None)


def _find_wheel(repo: Path, candidates: tuple[str, ...]):
    """The first candidate that is a file inside the repository (no link leads out of it), with its sha256."""
    import hashlib

    from bootstrap.ci.requirements import Wheel
    from bootstrap.kit.user_files import UnusableFile, read_user_file

    root = repo.resolve()
    for rel in candidates:
        path = root / rel
        try:
            if not path.is_file() or not path.resolve().is_relative_to(root):
                continue
            data = read_user_file(str(path), what="The wheel", max_bytes=WHEEL_MAX_BYTES, fix="")
        except (OSError, UnusableFile):
            continue
        return Wheel(rel, hashlib.sha256(data).hexdigest())
    return None
