"""`groundctl ci …`: write the GitHub Actions workflow set, and the small steps those workflows run
(which environments a change touches, the sticky plan comment, the merge job's summary, the drift issue).

The decisions are pure functions in bootstrap/ci/; this module reads files, writes files and reports.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from bootstrap import console
from bootstrap.errors import BadInput, Refused
from groundctl.cli import app
from groundctl.common import Group, json_opt, table

ci_app = typer.Typer(cls=Group, help="Pull-request plans, merge applies and drift checks on GitHub Actions.",
                     no_args_is_help=True)
app.add_typer(ci_app, name="ci")

_DIR = typer.Option(Path("."), "--dir", help="The repository root (it holds environments/).")


def _version(package: str, fallback: str) -> str:
    from importlib.metadata import PackageNotFoundError, version  # ~10 ms: not for `groundctl --help`

    try:
        return version(package)
    except PackageNotFoundError:
        return fallback


# -- init -----------------------------------------------------------------------------------------------


@ci_app.command("init")
def init(
    repo: Path = _DIR,
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

    environments = _environments(repo)
    options = workflows.WorkflowOptions(
        install=install,
        python_version=python_version,
        pulumi_version=pulumi_version or PULUMI_CLI_PINNED,
        default_branch=default_branch,
        drift_cron=drift_schedule,
        rehearsal_cron=rehearsal_schedule,
        groundctl_version=_version("groundctl", "unknown"),
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
    chosen = {role: {x.environment for x in _select(environments, None, role).include}
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
                 ".github/workflows/ and see the README section 'Pull requests on GitHub Actions' for the roles' "
                 "trust policies.")


REQUIREMENTS_MAX_BYTES = 1 << 20  # a hashed requirements file of a few hundred packages is ~200 KiB


def _pinned_copy(repo: Path, install: str) -> tuple[list[str], list[str], Optional[str]]:
    """(problems, notes, the wheel's folder when the install step must point a `file:` URL at it) for the
    repository's requirements file `install`."""
    from bootstrap.ci import requirements as req
    from bootstrap.user_files import UnusableFile, read_user_file

    why = ""
    try:  # a FIFO, a device or a hung mount is a problem naming the file, never a wait (bootstrap.user_files)
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


# -- targets --------------------------------------------------------------------------------------------


@ci_app.command("targets")
def targets(
    changed_files: Optional[Path] = typer.Option(
        None, "--changed-files", help="File listing the changed paths, one per line (`-` reads stdin)."),
    every: bool = typer.Option(False, "--all", help="Every environment, whatever changed."),
    needs: Optional[str] = typer.Option(None, "--needs", help="Only environments whose spec names this role: "
                                                               "plan-role, record-role or apply-role."),
    repo: Path = _DIR,
    json_out: bool = json_opt("the matrix (include, count, skipped)"),
) -> None:
    """Which environments a change touches, with the roles CI would use for each (a workflow matrix)."""
    from bootstrap.ci.touched import touched

    if (changed_files is None) == (not every):
        raise BadInput("Give either --changed-files FILE (the paths a change touches) or --all, not both or neither.")
    if needs not in (None, "plan-role", "record-role", "apply-role"):
        raise BadInput(f"--needs {needs!r} is not a role; use plan-role, record-role or apply-role.")
    environments = _environments(repo)
    if every:
        names, why = [e.environment for e in environments], "every environment"
    else:
        paths = _read_changed(changed_files)
        _refuse_unusable_names(paths)
        names, why = touched(paths, environments)
    selection = _select(environments, names, needs.removesuffix("-role") if needs else None)
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


def _read_changed(path: Path) -> list[str]:
    from bootstrap.ci.touched import environment_of, not_paths

    how = "Give a text file with one changed path per line, such as the output of `git diff --name-only`"
    if environment_of(str(path)) is not None:
        raise BadInput(f"--changed-files {path} is an environment spec, not a list of changed paths. {how} (a file "
                       f"holding the line {path} touches that environment), or --all for every environment.")
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"Cannot read --changed-files {path} ({exc}). {how}.") from None
    lines = text.splitlines()
    bad = not_paths(lines)
    if bad:
        number, line = bad[0]
        raise BadInput(f"--changed-files {path} is not a list of changed paths: line {number} ({printable(line)!r}) "
                       f"is not a path{f', nor are {len(bad) - 1} more lines' if len(bad) > 1 else ''}. {how}.")
    return [line for line in lines if line.strip()]


def printable(text: str, limit: int = 60) -> str:
    shown = "".join(c if c.isprintable() else "?" for c in text)
    return shown if len(shown) <= limit else shown[:limit] + "…"


def _refuse_unusable_names(paths: list[str]) -> None:
    from bootstrap.ci.touched import ENV_NAME, environment_of

    bad = sorted({p for p in paths if (name := environment_of(p)) is not None and not ENV_NAME.fullmatch(name)})
    if bad:
        raise BadInput(f"{', '.join(bad)}: an environment file's name must be the environment's name, made of "
                       "lowercase letters, digits and hyphens (it becomes the Pulumi stack name). Rename it.")


def _environments(repo: Path) -> list:
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
        # A manifest inside the repository (every relative path is: bootstrap.flux_manifest) touches the environment.
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
        raise BadInput(f"{folder} holds no environment specs (<env>.yaml). Add one, e.g. from groundctl's "
                       "environments/dev.yaml, then run the command again.")
    return found


def _select(environments: list, names: Optional[list[str]], needs: Optional[str]):
    from bootstrap.ci.touched import select

    return select(environments, names if names is not None else [e.environment for e in environments], needs)


# -- the renderers the workflows call -------------------------------------------------------------------


def _write_or_print(text: str, out: Optional[Path], json_doc: Optional[dict]) -> None:
    if out is not None:
        from bootstrap.destinations import check_file, write_text

        check_file(out)
        write_text(out, text)
    if json_doc is not None:
        console.emit_json(json_doc)
    elif out is None:
        console.data(text)


def _read_json(path: Path, what: str) -> Optional[dict]:
    """The JSON document at `path`; None when the file is missing or empty (the step that writes it failed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"Cannot read {what} {path} ({exc}).") from None
    if not text.strip():
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{path} is not JSON ({exc}); it should be {what} written by groundctl.") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path} is not {what} written by groundctl (not a JSON object).")
    return doc


def _read_text(path: Path) -> Optional[str]:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"Cannot read {path} ({exc}).") from None


@ci_app.command("comment")
def comment(
    environment: str = typer.Argument(..., help="Environment name."),
    plan_dir: Path = typer.Option(..., "--plan-dir", help="The plan job's folder: offline/ and live/ under it."),
    artifact_name: str = typer.Option("", "--artifact-name", help="Artifact that holds the full plan files."),
    artifact_url: str = typer.Option("", "--artifact-url", help="Where that artifact can be downloaded."),
    commit: str = typer.Option("", "--commit", help="The commit that was planned."),
    live_note: str = typer.Option("", "--live-note", help="Why there is no live plan, when there is none."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the comment here (default: stdout)."),
    json_out: bool = json_opt("the comment, its length and whether it was cut"),
) -> None:
    """The sticky pull-request comment for one environment, cut to GitHub's 65,536-character limit."""
    from bootstrap.ci.comment import GITHUB_COMMENT_LIMIT, PlanInputs, plan_comment
    from bootstrap.ci.touched import ENV_NAME
    from bootstrap.planning.render import live_combined_names

    if not ENV_NAME.fullmatch(environment):
        raise BadInput(f"'{environment}' is not an environment name (lowercase letters, digits, hyphens).")
    offline, live = plan_dir / "offline", plan_dir / "live"
    live_json, live_md = live_combined_names(environment)
    inputs = PlanInputs(
        environment=environment,
        offline_doc=_read_json(offline / f"plan-{environment}.json", "an offline plan"),
        offline_md=_read_text(offline / f"plan-{environment}.md"),
        live_doc=_read_json(live / live_json, "a live plan"),
        live_md=_read_text(live / live_md),
        live_note=live_note, artifact_name=artifact_name, artifact_url=artifact_url, commit=commit,
    )
    body = plan_comment(inputs)
    doc = None
    if json_out:
        whole = plan_comment(inputs, limit=sys.maxsize)
        doc = {"environment": environment, "characters": len(body), "limit": GITHUB_COMMENT_LIMIT,
               "cut": body != whole, "body": body}
    _write_or_print(body, out, doc)


@ci_app.command("summary")
def summary(
    environment: str = typer.Argument(..., help="Environment name."),
    record: Path = typer.Option(..., "--record", help="What `groundctl up --json` printed (may be missing or empty)."),
    log: Optional[Path] = typer.Option(None, "--log", help="What groundctl printed on stderr."),
    plan_dir: str = typer.Option("", "--plan-dir", help="The approved plan folder the run was given."),
    exit_code: str = typer.Option("", "--exit-code", help="The exit code of `groundctl up`, when it ran."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the summary here (default: stdout)."),
    json_out: bool = json_opt("the summary"),
) -> None:
    """The merge job's summary: the run record, and the reason when the run did not succeed."""
    from bootstrap.ci.reports import up_summary

    code = int(exit_code) if exit_code.strip().lstrip("-").isdigit() else None
    text = up_summary(environment, _read_json(record, "a run record"), (_read_text(log) or "") if log else "",
                      plan_dir=plan_dir, exit_code=code)
    _write_or_print(text, out, {"environment": environment, "summary": text} if json_out else None)


@ci_app.command("drift-issue")
def drift_issue(
    environment: str = typer.Argument(..., help="Environment name."),
    report: Path = typer.Option(..., "--report", help="What `groundctl drift --json` printed."),
    run_url: str = typer.Option("", "--run-url", help="The run that found the drift."),
    commit: str = typer.Option("", "--commit", help="The commit whose code was compared."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the issue body here (default: stdout)."),
    json_out: bool = json_opt("the issue title and body"),
) -> None:
    """The body of the one issue a drifted environment keeps open."""
    from bootstrap.ci.reports import drift_issue as body_of, drift_title

    doc = _read_json(report, "a drift report")
    if doc is None:
        raise BadInput(f"{report} is missing or empty: the drift step printed no report. See its log.")
    if doc.get("environment") != environment:
        raise BadInput(f"{report} is the drift report of '{doc.get('environment')}', not '{environment}'.")
    text = body_of(doc, run_url=run_url, commit=commit)
    _write_or_print(text, out, {"title": drift_title(environment), "body": text} if json_out else None)
