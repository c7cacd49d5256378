"""Reading the rendered workflows the way a runner would: jobs, steps, and the groundctl command lines
in their `run:` scripts, with the step's variables filled in."""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path
from typing import Mapping

import yaml

from bootstrap.ci.workflows import DEFAULT_REQUIREMENTS, WorkflowOptions, render
from bootstrap.engine.versions import PULUMI_CLI_PINNED

OPTIONS = WorkflowOptions(install=DEFAULT_REQUIREMENTS, python_version="3.11", pulumi_version=PULUMI_CLI_PINNED,
                          default_branch="main", drift_cron="17 6 * * *", groundctl_version="0.1.0")
# A repository's pinned copy of groundctl, as the README says to write it: a committed wheel (a stand-in: only its
# bytes' digest matters to `ci init`) and its dependencies' hashes (the form's, not real).
WHEEL = "vendor/groundctl-0.1.0-py3-none-any.whl"
WHEEL_BYTES = b"a stand-in for groundctl's wheel: ci init checks its sha256, pip never reads it here\n"
WHEEL_SHA256 = hashlib.sha256(WHEEL_BYTES).hexdigest()
REQUIREMENTS = (f"./{WHEEL} --hash=sha256:{WHEEL_SHA256}\n"
                f"boto3==1.35.0 \\\n    --hash=sha256:{'2' * 64}\n")


def pin_groundctl(repo: Path, requirements: str = REQUIREMENTS) -> None:
    """Commit the stand-in wheel and the requirements file naming it into `repo`."""
    (repo / WHEEL).parent.mkdir(parents=True, exist_ok=True)
    (repo / WHEEL).write_bytes(WHEEL_BYTES)
    (repo / DEFAULT_REQUIREMENTS).write_text(requirements)


def rendered(options: WorkflowOptions = OPTIONS) -> dict[str, dict]:
    """Workflow file name → parsed YAML."""
    return {path.rsplit("/", 1)[-1]: yaml.safe_load(text) for path, text in render(options).items()}


def step(job: dict, name: str) -> dict:
    return next(s for s in job["steps"] if s.get("name") == name)


def groundctl_lines(script: str) -> list[str]:
    """Each `groundctl …` command in a shell script, without redirections (folded lines are already joined)."""
    lines = []
    for line in script.splitlines():
        line = line.strip()
        if line.startswith("groundctl "):
            lines.append(re.split(r"\s(?:\d?>|>>|\|)", line, maxsplit=1)[0])
    return lines


def argv(command: str, env: Mapping[str, str]) -> list[str]:
    """The words of a command line after the shell's quoting and `$VAR` / `${VAR}` expansion from `env`."""
    def expand(word: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: env[m.group(1)], word)

    return [expand(w) for w in shlex.split(command)][1:]
