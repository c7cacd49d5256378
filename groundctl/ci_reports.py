"""The small steps the workflows run to report: `groundctl ci comment` (the sticky plan comment), `ci summary`
(the merge job's summary) and `ci drift-issue` (the body of a drifted environment's issue)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput
from groundctl.ci import ci_app
from groundctl.common import json_opt


def _write_or_print(text: str, out: Optional[Path], json_doc: Optional[dict]) -> None:
    if out is not None:
        from bootstrap.destinations import check_file, write_text

        check_file(out)
        write_text(out, text)
    if json_doc is not None:
        console.emit_json(json_doc)
    elif out is None:
        console.data(text)


# A plan's Markdown or JSON, a run record, a job's log: a few MiB at the most.
CI_FILE_MAX_BYTES = 64 * 1024 * 1024


def _read_json(path: Path, what: str) -> Optional[dict]:
    """The JSON document at `path`; None when the file is missing or empty (the step that writes it failed)."""
    text = read_ci_file(path, what)
    if text is None or not text.strip():
        return None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{path} is not JSON ({exc}); it should be {what} written by groundctl.") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{path} is not {what} written by groundctl (not a JSON object).")
    return doc


def read_ci_file(path: Path, what: str = "the file") -> Optional[str]:
    """The text at `path`, read as every file a user names is (bootstrap.kit.user_files); None when there is none."""
    from bootstrap.kit.user_files import UnusableFile, read_user_file

    try:
        data = read_user_file(str(path), what=what[:1].upper() + what[1:], max_bytes=CI_FILE_MAX_BYTES,
                              fix="It is written by the workflow's earlier step; see that step's log")
    except UnusableFile as exc:
        if exc.missing:
            return None
        raise
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"Cannot read {what} {path}: it is not UTF-8 text.") from None


def _digests(live: Path, environment: str, commit: str) -> str:
    """The live plan's digests for the reviewer and the merge job; a note instead when the plan folder cannot be
    bound (the merge then refuses it: no digests are posted)."""
    from bootstrap.ci.binding import block, table
    from groundctl.ci_binding import artifact_digests

    try:
        found = artifact_digests(live, environment)
    except BadInput as exc:
        return f"⚠️ No digests: {exc.message} The merge applies no plan of this commit.\n"
    return table(found) + ("\n" + block(environment, commit.lower(), found) + "\n" if commit else "")


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
    live_doc = _read_json(live / live_json, "a live plan")
    inputs = PlanInputs(
        environment=environment,
        offline_doc=_read_json(offline / f"plan-{environment}.json", "an offline plan"),
        offline_md=read_ci_file(offline / f"plan-{environment}.md"),
        live_doc=live_doc,
        live_md=read_ci_file(live / live_md),
        live_note=live_note, artifact_name=artifact_name, artifact_url=artifact_url, commit=commit,
        digests=_digests(live, environment, commit) if live_doc is not None else "",
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
    text = up_summary(environment, _read_json(record, "a run record"), (read_ci_file(log) or "") if log else "",
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
