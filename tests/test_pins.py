"""groundctl's versions table (bootstrap/engine/versions.py: versions only) held everywhere it is used:
pyproject's SDK pins and the SDKs installed here, the image's hashed requirements; and the Dockerfile held to the
pins lock: its base image by the lock's digest, the CLI and plugins only through `groundctl pins install`, its
lock check run as Docker runs it (its SHELL) against a lock read from the local mirror."""

from __future__ import annotations

import inspect
import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import version as installed_version
from pathlib import Path

from packaging.requirements import Requirement

from bootstrap.engine import versions
from bootstrap.engine.plugins import Plugin, sdk_plugin
from bootstrap.engine.preflight import parse_version
from bootstrap.engine.versions import PULUMI_CLI_PINNED, PULUMI_SDK_MIN, Release
from bootstrap.engine.versions import BASE_IMAGE
from bootstrap.pins.artifacts import LINUX_AMD64
from bootstrap.pins.lockfile import Entry, render
from tests.conftest import REPO

DOCKERFILE = REPO / "Dockerfile"
REQUIREMENTS = REPO / "requirements" / "image.txt"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def dockerfile_instructions() -> list[str]:
    """Each instruction on one line (continuations joined), comments left out."""
    text = re.sub(r"\s*\\\n\s*", " ", DOCKERFILE.read_text())
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


# -- the table -----------------------------------------------------------------------------------------------

def test_the_table_holds_versions_only():
    releases = (versions.PULUMI_CLI, *versions.PROVIDER_PLUGINS)
    assert versions.table_problems(releases) == []
    assert versions.table_problems([Release("aws", "latest")]) == [
        "aws: version 'latest' is not a release such as 1.2.3"]
    assert all(r.repository for r in releases) and versions.PULUMI_CLI.version == PULUMI_CLI_PINNED
    assert not any(hasattr(r, "sha256") for r in releases)  # digests live in the adopter's lock
    assert versions.platform_key("Linux", "x86_64") == LINUX_AMD64 == versions.platform_key("linux", "amd64")


def test_the_sdks_are_pinned_to_the_plugin_versions_they_ask_for():
    deps = {Requirement(d).name: Requirement(d) for d in PYPROJECT["project"]["dependencies"]}
    for release in versions.PROVIDER_PLUGINS:
        assert str(deps[release.sdk].specifier) == f"=={release.version}", release.sdk
        package = release.sdk.replace("-", "_")
        # The SDK installed here asks for exactly the table's plugin (its pulumi-plugin.json).
        assert sdk_plugin(package) == Plugin(release.name, release.version, package)
    assert str(deps["pulumi"].specifier) == f"<4,>={PULUMI_SDK_MIN}"
    from pulumi.automation import Stack

    # The SDK installed here meets the floor, and has what the floor is for.
    assert parse_version(installed_version("pulumi")) >= parse_version(PULUMI_SDK_MIN)
    assert "clear_pending_creates" in inspect.signature(Stack.refresh).parameters


# -- the image's requirements --------------------------------------------------------------------------------

def requirement_lines(text: str) -> list[str]:
    logical = re.sub(r"\\\n", " ", text)
    return [line.split(" #", 1)[0].strip() for line in logical.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_images_requirements_pin_every_dependency_of_pyproject_with_hashes():
    text = REQUIREMENTS.read_text()
    command = next(line for line in text.splitlines() if line.startswith("#    pip-compile "))
    for flag in ("--generate-hashes", "--allow-unsafe", "--all-build-deps", "--no-emit-index-url",
                 "--no-emit-find-links", "pyproject.toml", "--output-file=requirements/image.txt"):
        assert flag in command, flag
    pins = {}
    for line in requirement_lines(text):
        assert not line.startswith("-"), f"an option line ({line.split()[0]}) is a host's setting, not a pin"
        requirement, *hashes = line.split()
        name, pinned = requirement.split("==")
        assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), name
        pins[name.lower()] = pinned
    wanted = [Requirement(d) for d in PYPROJECT["project"]["dependencies"] + PYPROJECT["build-system"]["requires"]]
    for requirement in wanted:
        assert requirement.name.lower() in pins, f"{requirement.name} is not in {REQUIREMENTS.name}"
        assert requirement.specifier.contains(pins[requirement.name.lower()], prereleases=True), requirement
    for release in versions.PROVIDER_PLUGINS:
        assert pins[release.sdk] == release.version


# -- the Dockerfile ------------------------------------------------------------------------------------------

def test_the_dockerfile_takes_its_base_digest_cli_and_plugins_from_the_lock():
    steps = dockerfile_instructions()
    text = " ".join(steps)
    assert steps[0] == "ARG BASE_IMAGE_DIGEST=not-recorded"
    assert steps[1] == f"FROM {BASE_IMAGE}@${{BASE_IMAGE_DIGEST}}" and steps[2] == "ARG BASE_IMAGE_DIGEST"
    # Nothing is fetched but through the lock: no ADD, curl or wget, no --checksum install, no version ARG.
    assert not any(s.startswith(("ADD ", "ARG PULUMI")) for s in steps)
    assert "curl" not in text and "wget" not in text and "--checksum" not in text
    assert text.count("pulumi plugin install") == 0 and text.count("groundctl pins install") == 2
    runs = [s for s in steps if s.startswith("RUN ")]
    check = next(i for i, s in enumerate(runs) if "groundctl pins check --dir /src --image" in s)
    install = next(i for i, s in enumerate(runs) if "groundctl pins install" in s)
    assert check < install and "groundctl pins base-image --dir /src" in runs[check]
    assert "COPY groundctl-pins.json /src/groundctl-pins.json" in steps
    assert "groundctl pins install --dir /src --platform linux-amd64 --cli /opt/pulumi/bin" in runs[install]
    assert "PULUMI_HOME=/opt/pulumi/home groundctl pins install --dir /src --platform linux-amd64 --plugins" in \
        runs[install]
    # groundctl's dependencies come only from the hashed file; groundctl itself resolves and downloads nothing.
    installs = [s for s in steps if "pip install" in s]
    assert installs[0] == "RUN pip install --no-cache-dir --require-hashes -r /src/requirements/image.txt"
    assert installs[1].startswith("RUN pip install --no-cache-dir --no-deps --no-build-isolation --no-index /src ")


def _docker_run(index: int, src: Path, opt: Path, env: dict) -> subprocess.CompletedProcess:
    """The Dockerfile's RUN after its lock arrives (`index` 0: the check, 1: the installs), run as Docker runs it
    (its SHELL, the ARG in the environment), with /src and /opt/pulumi here; groundctl this checkout's."""
    runs = [s for s in dockerfile_instructions() if s.startswith("RUN ") and "groundctl pins" in s]
    script = runs[index][4:].replace("/src", str(src)).replace("/opt/pulumi", str(opt))
    shim = opt.parent / "shim"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "groundctl").write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m groundctl "$@"\n')
    (shim / "groundctl").chmod(0o755)
    path = f"{opt}/bin:{opt}/plugins:{shim}:/usr/bin:/bin"
    return subprocess.run(["/bin/bash", "-o", "pipefail", "-c", script], capture_output=True, text=True,
                          timeout=300, env={"PATH": path, "HOME": str(opt.parent), **env})


def test_the_image_build_checks_the_lock_and_installs_from_it_as_docker_runs_it(tmp_path, release_mirror):
    src, opt = tmp_path / "src", tmp_path / "opt" / "pulumi"
    shutil.copytree(REPO / "environments", src / "environments")
    digest = "sha256:" + "b" * 64
    # No lock: the build stops at the check, naming the command that records it.
    done = _docker_run(0, src, opt, {"BASE_IMAGE_DIGEST": digest})
    assert done.returncode == 4 and "`groundctl pins update" in done.stderr, done.stderr
    entries = release_mirror.entries(src)
    base = Entry("base-image", BASE_IMAGE, "any", BASE_IMAGE, "b" * 64, "https://registry-1.docker.io/v2/library/"
                 "python/manifests/3.11.11-slim-bookworm")
    (src / "groundctl-pins.json").write_text(render([*entries, base]))
    wrong = _docker_run(0, src, opt, {"BASE_IMAGE_DIGEST": "sha256:" + "c" * 64})
    assert wrong.returncode == 1 and f"not the lock's {digest}" in wrong.stderr, wrong.stderr
    assert _docker_run(0, src, opt, {"BASE_IMAGE_DIGEST": digest}).returncode == 0
    done = _docker_run(1, src, opt, {})
    assert done.returncode == 0, done.stderr
    assert (opt / "bin" / "pulumi").is_file()
    linked = sorted(p.name for p in (opt / "plugins").iterdir())
    assert linked == sorted(f"pulumi-resource-{r.name}" for r in versions.PROVIDER_PLUGINS)
    assert all((opt / "plugins" / name).resolve().is_file() for name in linked)
