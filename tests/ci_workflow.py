"""Reading the rendered workflows the way a runner would: jobs, steps, and the groundctl command lines
in their `run:` scripts, with the step's variables filled in."""

from __future__ import annotations

import re
import shlex
from typing import Mapping

import yaml

from bootstrap.ci.workflows import DEFAULT_REQUIREMENTS, WorkflowOptions, render
from bootstrap.engine.versions import PULUMI_CLI_PINNED

OPTIONS = WorkflowOptions(install=DEFAULT_REQUIREMENTS, python_version="3.11", pulumi_version=PULUMI_CLI_PINNED,
                          default_branch="main", drift_cron="17 6 * * *", groundctl_version="0.1.0")
# A repository's pinned copy of groundctl, as the README says to write it (the hashes are the form's, not real).
REQUIREMENTS = (f"./vendor/groundctl-0.1.0-py3-none-any.whl --hash=sha256:{'1' * 64}\n"
                f"boto3==1.35.0 \\\n    --hash=sha256:{'2' * 64}\n")


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
