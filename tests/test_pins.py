"""groundctl's versions table (bootstrap/engine/versions.py: versions only) held everywhere it is used:
pyproject's SDK pins and the SDKs installed here; and the image's Dockerfile, which `groundctl pins dockerfile`
writes into the adopter's repository from the template the wheel ships, held to the pins lock: its base image by
the lock's digest, the CLI and plugins only through `groundctl pins install`, groundctl from the repository's
committed wheel and hashed requirements; its steps run as Docker runs them (its SHELL) against a lock read from
the local mirror."""

from __future__ import annotations

import inspect
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
from tests.ci_workflow import WHEEL
from tests.conftest import REPO
from tests.dockerfile import adopter_repository, instructions, shipped_dockerfile
from tests.test_cli_errors import assert_refused, groundctl

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


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


# -- the Dockerfile, written into the adopter's repository -----------------------------------------------------

def test_the_dockerfile_is_written_into_the_adopters_repository_from_the_wheels_template(monkeypatch, capsys,
                                                                                           tmp_path):
    from bootstrap.pins.dockerfile import DOCKERFILE

    repo = adopter_repository(tmp_path / "infra")
    code, _, err = groundctl(monkeypatch, capsys, "pins", "dockerfile", "--dir", str(repo))
    assert code == 0 and f"docker build -f {DOCKERFILE}" in " ".join(err.split()), err
    text = (repo / DOCKERFILE).read_text()
    assert text == shipped_dockerfile()
    steps = instructions(text)
    # Only what the adopter's repository holds: the requirements file, the committed wheel, the lock, the specs.
    copies = [s.split()[1] for s in steps if s.startswith("COPY ")]
    assert copies == ["groundctl-requirements.txt", WHEEL, "groundctl-pins.json", "environments"]
    assert all((repo / c).exists() for c in copies if c != "groundctl-pins.json")
    # Again: unchanged; a file that differs is kept unless --force.
    assert groundctl(monkeypatch, capsys, "pins", "dockerfile", "--dir", str(repo))[0] == 0
    (repo / DOCKERFILE).write_text(text + "RUN echo mine\n")
    assert_refused(groundctl(monkeypatch, capsys, "pins", "dockerfile", "--dir", str(repo)), 2,
                   "differs from what this groundctl writes", "--force")
    assert (repo / DOCKERFILE).read_text().endswith("RUN echo mine\n")
    assert groundctl(monkeypatch, capsys, "pins", "dockerfile", "--dir", str(repo), "--force")[0] == 0
    assert (repo / DOCKERFILE).read_text() == text
    # A repository that does not pin groundctl's wheel: said, and nothing written.
    bare = tmp_path / "bare"
    (bare / "environments").mkdir(parents=True)
    assert_refused(groundctl(monkeypatch, capsys, "pins", "dockerfile", "--dir", str(bare)), 2,
                   "groundctl-requirements.txt is not a readable file", "Nothing was written")
    assert not (bare / DOCKERFILE).exists()
    assert_refused(groundctl(monkeypatch, capsys, "pins", "dockerfile", "--dir", str(repo), "--install", "."), 2,
                   "name the repository's hashed requirements file")


def test_the_dockerfile_takes_its_base_digest_cli_and_plugins_from_the_lock():
    steps = instructions(shipped_dockerfile())
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
    # groundctl and its dependencies come only from the repository's hashed file, installed as the workflows do.
    installs = [s for s in steps if "pip install" in s]
    assert len(installs) == 1 and "python -m pip install --require-hashes -r" in installs[0]
    assert runs.index(installs[0]) < check


def _docker_run(index: int, src: Path, opt: Path, env: dict) -> subprocess.CompletedProcess:
    """The written Dockerfile's RUN `index` (0: groundctl's install, 1: the lock check, 2: the installs from the
    lock), run as Docker runs it (its SHELL, the ARG in the environment, in its WORKDIR), with /src and
    /opt/pulumi here; `pip` and groundctl this checkout's (a shim), the user commands left out."""
    runs = [s for s in instructions((src / "groundctl.Dockerfile").read_text()) if s.startswith("RUN ")]
    script = runs[index][4:].replace("/src", str(src)).replace("/opt/pulumi", str(opt))
    shim = opt.parent / "shim"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "groundctl").write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m groundctl "$@"\n')
    # The install step's pip: records the requirements file it is given (the image's real pip needs PyPI).
    (shim / "python").write_text(f'#!/bin/sh\nfor a; do last="$a"; done\n[ "$3" = install ] && cp "$last" '
                                 f'"{opt.parent}/installed.txt"; exit 0\n')
    for name in ("groundctl", "python", "groupadd", "useradd"):
        if not (shim / name).exists():
            (shim / name).write_text("#!/bin/sh\nexit 0\n")
        (shim / name).chmod(0o755)
    path = f"{opt}/bin:{opt}/plugins:{shim}:/usr/bin:/bin"
    return subprocess.run(["/bin/bash", "-o", "pipefail", "-c", script.replace("mkdir -p /work/environments", "true")],
                          capture_output=True, text=True, timeout=300, cwd=src,
                          env={"PATH": path, "HOME": str(opt.parent), **env})


def test_the_image_build_checks_the_lock_and_installs_from_it_as_docker_runs_it(monkeypatch, capsys, tmp_path,
                                                                                 release_mirror):
    src, opt = adopter_repository(tmp_path / "src"), tmp_path / "opt" / "pulumi"
    assert groundctl(monkeypatch, capsys, "pins", "dockerfile", "--dir", str(src))[0] == 0
    # groundctl's install: the requirements file's file: URL pointed at the committed wheel, hashes still required.
    done = _docker_run(0, src, opt, {})
    assert done.returncode == 0, done.stderr
    installed = (tmp_path / "opt" / "installed.txt").read_text()
    assert installed.startswith(f"./{WHEEL} ") and "--hash=sha256:" in installed
    digest = "sha256:" + "b" * 64
    # No lock: the build stops at the check, naming the command that records it.
    done = _docker_run(1, src, opt, {"BASE_IMAGE_DIGEST": digest})
    assert done.returncode == 4 and "`groundctl pins update" in done.stderr, done.stderr
    entries = release_mirror.entries(src)
    base = Entry("base-image", BASE_IMAGE, "any", BASE_IMAGE, "b" * 64, "https://registry-1.docker.io/v2/library/"
                 "python/manifests/3.11.11-slim-bookworm")
    (src / "groundctl-pins.json").write_text(render([*entries, base]))
    wrong = _docker_run(1, src, opt, {"BASE_IMAGE_DIGEST": "sha256:" + "c" * 64})
    assert wrong.returncode == 1 and f"not the lock's {digest}" in wrong.stderr, wrong.stderr
    assert _docker_run(1, src, opt, {"BASE_IMAGE_DIGEST": digest}).returncode == 0
    done = _docker_run(2, src, opt, {})
    assert done.returncode == 0, done.stderr
    assert (opt / "bin" / "pulumi").is_file()
    linked = sorted(p.name for p in (opt / "plugins").iterdir())
    assert linked == sorted(f"pulumi-resource-{r.name}" for r in versions.PROVIDER_PLUGINS)
    assert all((opt / "plugins" / name).resolve().is_file() for name in linked)
