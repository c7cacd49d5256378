"""What the journeys through the generated workflows share beside the runner itself (tests/workflow_runner.py):
the stand-ins for the actions the workflows use, the runner image's `gh` (tests/gh_stand_in.py) and its world,
and reading what a run did.

What each action provides, and nothing more: a checkout of the repository at the run's commit (a pull request's
merge ref fetched as actions/checkout fetches it); a fresh virtual environment for setup-python, with pip's cache
folder restored by its key; AWS credentials (and, where AWS is the emulator, its endpoint) for
configure-aws-credentials; a folder per run for the artifact actions."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import venv
from pathlib import Path
from typing import ContextManager, Mapping, Optional

import yaml

from tests.conftest import REPO
from tests.journey import BASE_PATH, CLI_FILES
from tests.plugin_releases import LocalReleases, served
from tests.workflow_runner import Runner

REPOSITORY = "acme/infra"


def real_cli_releases(folder: Path, cli: Path) -> ContextManager[LocalReleases]:
    """The local release mirror (tests/plugin_releases.py) with the CLI's tarball holding the real CLI found in
    `cli` (tests/journey.py pinned_cli), served while the context lasts."""
    return served(folder, cli_binaries={name: (cli / name).read_bytes() for name in CLI_FILES})


def run_ok(argv: list, **kwargs) -> subprocess.CompletedProcess:
    """`argv` run to completion; AssertionError with the tail of its output unless it exits 0."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=kwargs.pop("timeout", 3000), **kwargs)
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done


def git(repo: Path, *args: str) -> str:
    return run_ok(["git", "-C", str(repo), *args]).stdout.strip()


class Actions:
    """What each action provides, per job; what they were given is kept for the test to check.

    origin: the repository the checkout clones; folder: the test's folder (the artifacts and the actions cache,
    shared by every run of the test, as GitHub keeps them); account: the account configure-aws-credentials is
    allowed; aws_env: what it adds beside the credentials (AWS_ENDPOINT_URL where AWS is the emulator);
    site_files: files put into each fresh Python's site-packages (a test's seam, if any)."""

    def __init__(self, origin: Path, run_id: int, folder: Path, account: str,
                 aws_env: Optional[Mapping[str, str]] = None, site_files: Optional[Mapping[str, str]] = None):
        self.origin, self.run_id, self.folder, self.account = origin, run_id, folder, account
        self.artifacts = folder / "artifacts"
        self.aws_env, self.site_files = dict(aws_env or {}), dict(site_files or {})
        self.roles: list[str] = []
        self.caches: list[str] = []  # the pip cache key of each setup-python step

    def handlers(self) -> dict:
        return {"actions/checkout": self.checkout, "actions/setup-python": self.setup_python,
                "aws-actions/configure-aws-credentials": self.credentials,
                "actions/upload-artifact": self.upload, "actions/download-artifact": self.download}

    def checkout(self, given: dict, job) -> dict:
        run_ok(["git", "clone", "-q", str(self.origin), str(job.workspace)])
        # A pull request's run checks out its merge ref, which a clone does not fetch (actions/checkout fetches it).
        git(job.workspace, "fetch", "-q", "origin", "+refs/pull/*:refs/remotes/origin/pull/*")
        git(job.workspace, "checkout", "-q", job.runner.github["sha"])
        return {}

    def setup_python(self, given: dict, job) -> dict:
        """A fresh Python and, as the action's `cache: pip` does, pip's cache folder restored by its key: the
        sha256 of the dependency file in the checkout (the action fails the job when no such file is there)."""
        assert given["python-version"] == "3.11"
        assert given["cache"] == "pip"
        dependencies = job.workspace / given["cache-dependency-path"]
        if not dependencies.is_file():
            raise ValueError(f"No file in {job.workspace} matched to [{given['cache-dependency-path']}]")
        key = f"setup-python-Linux-python-3.11-pip-{hashlib.sha256(dependencies.read_bytes()).hexdigest()}"
        self.caches.append(key)
        cache = self.folder / "actions-cache" / key
        cache.mkdir(parents=True, exist_ok=True)
        python = job.folder / "hostedtoolcache" / "python"
        venv.create(python, with_pip=True)
        site, = python.glob("lib/python*/site-packages")
        for name, text in self.site_files.items():
            (site / name).write_text(text)
        return {"path": [str(python / "bin")], "env": {"PIP_CACHE_DIR": str(cache)}}

    def credentials(self, given: dict, job) -> dict:
        assert given["allowed-account-ids"] == self.account
        self.roles.append(given["role-to-assume"])
        return {"env": {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_SESSION_TOKEN": "session-of-" + given["role-to-assume"].rsplit("/", 1)[-1],
                        "AWS_REGION": given["aws-region"], "AWS_DEFAULT_REGION": given["aws-region"],
                        **self.aws_env}}

    def upload(self, given: dict, job) -> dict:
        source = job.workspace / given["path"]
        if not source.exists():
            raise ValueError(f"no files at {given['path']}")
        shutil.copytree(source, self.artifacts / str(self.run_id) / given["name"])
        return {}

    def download(self, given: dict, job) -> dict:
        source = self.artifacts / str(given.get("run-id") or self.run_id) / given["name"]
        if not source.is_dir():
            raise ValueError(f"no artifact {given['name']} in run {given.get('run-id') or self.run_id}")
        shutil.copytree(source, job.workspace / given["path"])
        return {}


def gh_world(folder: Path) -> tuple[Path, Path]:
    """The stand-in `gh`'s world (what GitHub holds: no comment, issue, pull request or run yet) and its call log."""
    world, log = folder / "gh-world.json", folder / "gh-calls.jsonl"
    world.write_text(json.dumps({"repository": REPOSITORY, "comments": {}, "issues": [], "commit_pulls": {},
                                 "pulls": {}, "runs": [], "run_jobs": {}}))
    return world, log


def _gh(folder: Path) -> Path:
    bin_dir = folder / "runner-image-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "gh").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "gh_stand_in.py"}" "$@"\n')
    (bin_dir / "gh").chmod(0o755)
    return bin_dir


def runner(workflow: Path, github: dict, actions: Actions, gh: tuple[Path, Path],
           extra: Optional[Mapping[str, str]] = None) -> Runner:
    """A run of `workflow` (not started) for the event `github` describes, on a runner image with the stand-in `gh`
    and jq on PATH; `extra`: variables of the runner image the test adds."""
    folder = actions.folder / "runs" / str(github["run_id"])
    folder.mkdir(parents=True)
    # PIP_NO_COMPILE: byte-compiling pulumi_aws's thousands of modules took minutes per job on a loaded 2-core
    # machine, and is all the install steps would do differently without it.
    base = {"PATH": f"{_gh(actions.folder)}:{BASE_PATH}", "LANG": "C.UTF-8", "PIP_NO_COMPILE": "1",
            "GH_STAND_IN_WORLD": str(gh[0]), "GH_STAND_IN_LOG": str(gh[1]), **(extra or {})}
    github = {"repository": REPOSITORY, "server_url": "https://github.com", "token": "ghs-journey", **github}
    return Runner(yaml.safe_load(workflow.read_text()), github, {}, actions.handlers(), folder, base)


def steps(run: Runner, job: str) -> dict:
    return {s.name: s for s in run.jobs[job][0].steps}


def failures(run: Runner) -> str:
    return "\n".join(f"{s.job} / {s.name}: exit {s.returncode}\n{s.stdout[-2000:]}\n{s.stderr[-3000:]}"
                     for jobs in run.jobs.values() for j in jobs for s in j.steps if s.outcome == "failure")


def calls(gh_log: Path) -> list[dict]:
    return [json.loads(line) for line in gh_log.read_text().splitlines()] if gh_log.exists() else []


def registry_journey_marks(cli: Optional[str], no_cli: Optional[str], what: str) -> list:
    """A journey through the generated workflows: the engine and registry tiers, an hour's timeout, skipped with
    the reason without the pinned CLI or without GROUNDCTL_TEST_REGISTRY=1. `what`: what it takes from the
    package registry, for that reason."""
    import os

    import pytest

    return [pytest.mark.engine, pytest.mark.registry, pytest.mark.timeout(3600),
            pytest.mark.skipif(cli is None, reason=no_cli or "needs the pinned Pulumi CLI"),
            pytest.mark.skipif(os.environ.get("GROUNDCTL_TEST_REGISTRY") != "1",
                               reason=f"{what}: set GROUNDCTL_TEST_REGISTRY=1")]

