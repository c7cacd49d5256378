"""An upgrade of groundctl in an adopter's repository is planned on its pull request and applied on merge: such a
change touches no spec and no program file of that repository, only the committed wheel, the requirements (input or
compiled), the lock or the workflows, and each of those touches every environment. Run as the pull request's job runs
it: the rendered workflow's step, with bash, on a real two-commit git history."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.ci.touched import CiEnvironment, touched
from bootstrap.ci.workflows import DEFAULT_REQUIREMENTS, PR_WORKFLOW
from tests.ci_workflow import pin_groundctl, rendered, step
from tests.conftest import REPO


ENVS = [CiEnvironment("dev"), CiEnvironment("prod")]


@pytest.mark.parametrize("changed", [
    ["vendor/groundctl-0.2.0-py3-none-any.whl", "vendor/groundctl-0.1.0-py3-none-any.whl"],
    ["groundctl-0.2.0-py3-none-any.whl"],
    ["groundctl-requirements.txt"],
    ["groundctl-requirements.in"],
    ["infra/groundctl-requirements.txt"],
    ["groundctl-pins.json"],
    [".github/workflows/groundctl-pr.yml"],
])
def test_an_upgrade_touches_every_environment(changed):
    names, why = touched(changed, ENVS)
    assert names == ["dev", "prod"]
    assert why.startswith(sorted(changed)[0]) and "every environment" in why


def test_the_requirements_file_the_workflows_install_touches_every_environment_whatever_its_name():
    assert touched(["pins/ci.txt"], ENVS) == ([], "no environment spec or program changed")
    assert touched(["pins/ci.txt"], ENVS, install="pins/ci.txt")[0] == ["dev", "prod"]
    assert touched(["pins/ci.in"], ENVS, install="./pins/ci.txt")[0] == ["dev", "prod"]
    # Other wheels and text files are not groundctl's.
    assert touched(["vendor/other-1.0-py3-none-any.whl", "notes/requirements.txt"], ENVS)[0] == []


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, timeout=60,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})


def test_the_pull_request_job_plans_every_environment_when_the_wheel_and_requirements_change(tmp_path):
    repo = tmp_path / "infra"
    shutil.copytree(REPO / "environments", repo / "environments")
    pin_groundctl(repo)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "groundctl 0.1.0")
    # The upgrade: a new wheel, its requirements compiled again; no spec, no program file.
    (repo / "vendor" / "groundctl-0.1.0-py3-none-any.whl").unlink()
    (repo / "vendor" / "groundctl-0.2.0-py3-none-any.whl").write_bytes(b"the next release\n")
    (repo / DEFAULT_REQUIREMENTS).write_text("./vendor/groundctl-0.2.0-py3-none-any.whl --hash=sha256:" + "4" * 64)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "groundctl 0.2.0")

    workflow = rendered()[PR_WORKFLOW]
    run = step(workflow["jobs"]["detect"], "Which environments the change touches")["run"]
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "groundctl").write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m groundctl "$@"\n')
    (shim / "groundctl").chmod(0o755)
    output = tmp_path / "github-output"
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PATH": f"{shim}:/usr/bin:/bin",
           "GITHUB_OUTPUT": str(output), **workflow["env"]}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", run], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    assert outputs["count"] == "3"
    assert [row["environment"] for row in json.loads(outputs["matrix"])["include"]] == ["dev", "local", "prod"]
    assert "can alter every environment's plan" in json.loads((repo / "targets.json").read_text())["why"]
