"""`groundctl init`: start an adopter's repository. A first spec from a bundled example, with the adopter's name,
region and account; the requirements input naming groundctl's wheel; the places of the committed wheel and of the
fleet's Flux manifests; and, once the compiled requirements are there, the workflows (`ci init`'s own code).
It never replaces a file: one that exists with other content stops it (exit 2, naming the file) before anything
is written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput
from groundctl.cli import app
from groundctl.common import json_opt

def lock_step(repo: Path) -> str:
    """The lock's next step. init itself stays offline and never writes the lock: `groundctl pins update` reads
    the publishers' files (a mirror, cosign) for the specs as the adopter edited them, which the first spec
    written here is not yet; run after the edit, it records what the specs really name."""
    from bootstrap.pins.lockfile import LOCK_FILE

    if (repo / LOCK_FILE).is_file():
        return (f"`groundctl pins check` says whether {LOCK_FILE} covers what the specs and this groundctl need "
                "(`groundctl pins update` when it falls short); commit what changes")
    return (f"`groundctl pins update` writes {LOCK_FILE}: the checked digests of every release file groundctl "
            "installs (the Pulumi CLI, its plugins, Flux's install manifest, the image's base); commit it")


@app.command("init")
def init(
    name: Optional[str] = typer.Option(None, "--name", help="The environment's name (environments/<name>.yaml)."),
    region: Optional[str] = typer.Option(None, "--region", help="Its AWS region, e.g. eu-west-1."),
    account: Optional[str] = typer.Option(None, "--account", help="Its AWS account ID (12 digits)."),
    example: str = typer.Option("dev", "--example", help="The bundled example spec to start from: dev (shared, "
                                "non-production), prod (production posture) or local (the AWS emulator)."),
    repo: Path = typer.Option(Path("."), "--dir", help="The repository to start (default: this folder)."),
    default_branch: str = typer.Option("main", "--default-branch", help="The branch merges apply to (workflows)."),
    json_out: bool = json_opt("what was written and the next steps"),
) -> None:
    """Start a repository for groundctl: a first spec, the requirements input, the wheel's and the Flux manifests'
    places, and the workflows once the requirements are compiled. Asks for the name, region and account only
    on a terminal; never replaces a file (exit 2 naming it)."""
    from bootstrap.destinations import check_dir, write_text
    from bootstrap.spec import starter
    from groundctl.ci import version_of

    facts = starter.Facts(*_asked(name, region, account))
    version = version_of("groundctl", "0.1.0")
    files = {f"environments/{facts.name}.yaml": _first_spec(example, facts), **starter.places()}
    kept = []
    if (repo / starter.REQUIREMENTS_IN).exists():
        kept.append(starter.REQUIREMENTS_IN)  # the adopter's own: how they pin groundctl is theirs
    else:
        files[starter.REQUIREMENTS_IN] = starter.requirements_in(version)
    compiled = (repo / starter.REQUIREMENTS_TXT).is_file()
    lock = lock_step(repo)  # before the workflows: what they install is checked against the lock
    if compiled:
        files.update(_workflows(repo, default_branch))
    status = _refuse_replacing(repo, files)
    for folder in sorted({(repo / rel).parent for rel in files} | {repo / starter.WHEEL_DIR}):
        check_dir(folder, "--dir")  # every file can be written, or none is
    for rel, text in files.items():
        if status[rel] == "new":
            write_text(repo / rel, text, "--dir")
            status[rel] = "written"
    status.update({rel: "kept (yours)" for rel in kept})
    steps = _next_steps(facts, version, compiled, lock)
    if json_out:
        console.emit_json({"environment": facts.name, "example": example, "files": status,
                           "workflows": compiled, "next_steps": steps})
        return
    for rel, s in status.items():
        console.info(f"{s:>12}  {rel}")
    console.info("Next:\n" + "\n".join(f"  {i}. {step}" for i, step in enumerate(steps, 1)))


def _asked(name: Optional[str], region: Optional[str], account: Optional[str]) -> tuple[str, str, str]:
    """The three facts from the flags; the missing ones asked for on a terminal, refused without one."""
    given = {"--name": name, "--region": region, "--account": account}
    missing = [flag for flag, value in given.items() if not value]
    if missing and not sys.stdin.isatty():
        raise BadInput(f"`groundctl init` needs {', '.join(missing)} (it asks only on a terminal). Give each, e.g. "
                       "`groundctl init --name dev --region eu-west-1 --account 123456789012`.")
    prompts = {"--name": "Environment name (e.g. dev)", "--region": "AWS region (e.g. eu-west-1)",
               "--account": "AWS account ID (12 digits)"}
    for flag in missing:
        given[flag] = typer.prompt(prompts[flag], err=True).strip()
    return given["--name"], given["--region"], given["--account"]


def _first_spec(example: str, facts) -> str:
    """The example made into the spec of `facts`, validated: a problem names the flag it came from."""
    import yaml

    from bootstrap.spec import parse_spec
    from bootstrap.spec.spec_file import ENVIRONMENTS_DIR
    from bootstrap.spec.starter import FLAGS, StarterProblem, first_spec
    from bootstrap.kit.errors import SpecError

    examples = sorted(p.stem for p in ENVIRONMENTS_DIR.glob("*.yaml"))
    if example not in examples:
        raise BadInput(f"--example {example[:60]!r} is not one of groundctl's example specs ({', '.join(examples)}).")
    try:
        text = first_spec((ENVIRONMENTS_DIR / f"{example}.yaml").read_text(encoding="utf-8"), example, facts)
        parse_spec(yaml.safe_load(text), f"environments/{facts.name}.yaml")
    except StarterProblem as exc:
        raise BadInput(f"Cannot start from the example {example!r}: {exc}.") from None
    except SpecError as exc:
        said = "; ".join(f"{FLAGS.get(where, where)}: {what}" for where, what in exc.problems)
        raise BadInput(f"The spec `groundctl init` would write from the example {example!r} is not valid: {said}. "
                       "Nothing was written. Give other values (or another --example) and run it again.") from None
    return text


def _workflows(repo: Path, default_branch: str) -> dict[str, str]:
    """The workflow set, as `groundctl ci init` writes it with its defaults."""
    from bootstrap.ci import workflows
    from bootstrap.engine.versions import PULUMI_CLI_PINNED
    from groundctl.ci import version_of
    from groundctl.ci_init import workflow_files

    options = workflows.WorkflowOptions(
        install=workflows.DEFAULT_REQUIREMENTS, python_version="3.11", pulumi_version=PULUMI_CLI_PINNED,
        default_branch=default_branch, drift_cron="17 6 * * *", rehearsal_cron="43 4 * * *",
        groundctl_version=version_of("groundctl", "unknown"))
    rendered, notes, _ = workflow_files(repo, options)
    for note in notes:
        console.info(note)
    return rendered


def _refuse_replacing(repo: Path, files: dict[str, str]) -> dict[str, str]:
    from groundctl.ci_init import file_status

    status = file_status(repo, files, "groundctl init")
    differing = [rel for rel, s in status.items() if s == "differs"]
    if differing:
        raise BadInput(f"{', '.join(differing)} already exist{'s' if len(differing) == 1 else ''} in "
                       f"{repo.resolve()} with other content, and `groundctl init` never replaces a file: nothing "
                       "was written. Move it away (or start another environment with --name), then run it again.")
    return status


def _next_steps(facts, version: str, compiled: bool, lock: str) -> list[str]:
    from bootstrap.spec.starter import REQUIREMENTS_IN, REQUIREMENTS_TXT, WHEEL_DIR, wheel_file

    steps = [f"review environments/{facts.name}.yaml, then `groundctl spec check {facts.name}` and "
             f"`groundctl plan {facts.name} --offline`"]
    if not compiled:
        steps += [f"copy groundctl's wheel ({wheel_file(version)}, the one you installed groundctl from) into "
                  f"{WHEEL_DIR}/ and compile its requirements: `pip-compile --generate-hashes --output-file "
                  f"{REQUIREMENTS_TXT} {REQUIREMENTS_IN}`",
                  "`groundctl ci init` writes the workflows, which install groundctl from those two files"]
    steps += [lock,
              f"`groundctl spec roles {facts.name} --repo <org>/<repo>` prints the three roles' trust and permissions "
              "policies to create, whose ARNs go into the spec",
              "commit everything; a pull request then plans the environment"]
    return steps
