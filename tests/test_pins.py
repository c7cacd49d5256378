"""One table of the Pulumi releases groundctl installs, versions and sha256 digests (bootstrap/engine/versions.py),
held everywhere it is used: pyproject's SDK pins and the SDKs installed here, the image's hashed requirements,
the Dockerfile, `ci init` and the README. A digest not recorded is refused by what would install the file
unchecked, naming the file and where its digest is published."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import tomllib
from importlib.metadata import version as installed_version

from packaging.requirements import Requirement

from bootstrap.engine import versions
from bootstrap.engine.plugins import Plugin, sdk_plugin
from bootstrap.engine.preflight import parse_version
from bootstrap.engine.versions import (LINUX_AMD64, NOT_RECORDED, PULUMI_CLI_MIN, PULUMI_CLI_PINNED, PULUMI_SDK_MIN,
                                       Release, plugin_install_argv)
from tests import docs
from tests.conftest import REPO
from tests.test_cli_errors import assert_refused, groundctl

DOCKERFILE = REPO / "Dockerfile"
REQUIREMENTS = REPO / "requirements" / "image.txt"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
RELEASES = (versions.PULUMI_CLI, *versions.PROVIDER_PLUGINS)


def dockerfile_args() -> dict[str, str]:
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), re.M))


def dockerfile_instructions() -> list[str]:
    """Each instruction on one line (continuations joined), comments left out."""
    text = re.sub(r"\s*\\\n\s*", " ", DOCKERFILE.read_text())
    return [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _arg(release: Release, what: str) -> str:
    return "PULUMI_" + (f"{release.name.upper()}_" if not release.is_cli else "") + what


# -- the table -----------------------------------------------------------------------------------------------

def test_the_table_is_well_formed_and_a_bad_slot_is_caught():
    assert versions.table_problems(RELEASES) == []
    assert all(LINUX_AMD64 in r.sha256 and r.repository for r in RELEASES)
    assert versions.PULUMI_CLI.version == PULUMI_CLI_PINNED and versions.PULUMI_CLI.is_cli
    assert versions.table_problems([Release("aws", "7.51.1", {LINUX_AMD64: "ABC"})]) == [
        f"aws linux-amd64: 'ABC' is neither 64 lowercase hex digits nor {NOT_RECORDED!r}"]
    assert versions.table_problems([Release("aws", "latest")]) == [
        "aws: version 'latest' is not a release such as 1.2.3"]
    assert Release("aws", "7.51.1", {LINUX_AMD64: NOT_RECORDED}).digest(LINUX_AMD64) is None
    assert Release("aws", "7.51.1", {LINUX_AMD64: "a" * 64}).digest("linux-arm64") is None
    assert versions.PULUMI_CLI.tarball(LINUX_AMD64) == f"pulumi-v{PULUMI_CLI_PINNED}-linux-x64.tar.gz"
    assert versions.PULUMI_CLI.checksums == (f"https://github.com/pulumi/pulumi/releases/download/v{PULUMI_CLI_PINNED}/"
                                             f"pulumi-{PULUMI_CLI_PINNED}-checksums.txt")
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

def test_the_dockerfile_takes_every_version_and_digest_from_the_table():
    args = dockerfile_args()
    expected = {}
    for release in RELEASES:
        expected[_arg(release, "VERSION")] = release.version
        expected[_arg(release, "SHA256")] = release.sha256[LINUX_AMD64]
    assert {k: args.get(k) for k in expected} == expected
    steps = dockerfile_instructions()
    text = " ".join(steps)
    for release in versions.PROVIDER_PLUGINS:
        # The install step's own command, its version and digest the table's (through the ARGs above).
        argv = plugin_install_argv(release, f'"${{{_arg(release, "SHA256")}}}"')
        argv[5] = f'"v${{{_arg(release, "VERSION")}}}"'
        assert f"PULUMI_HOME=/opt/pulumi/home {' '.join(argv)}" in text, release.name
    assert 'echo "${PULUMI_SHA256}  /tmp/pulumi.tgz" | sha256sum --check --strict -' in text
    # groundctl's dependencies come only from the hashed file; groundctl itself resolves and downloads nothing.
    installs = [s for s in steps if "pip install" in s]
    assert installs[0] == "RUN pip install --no-cache-dir --require-hashes -r /src/requirements/image.txt"
    assert installs[1].startswith("RUN pip install --no-cache-dir --no-deps --no-build-isolation --no-index /src ")
    assert len(installs) == 2 and "COPY requirements/image.txt /src/requirements/image.txt" in steps


def test_the_base_image_is_pinned_by_its_digest_slot():
    args, steps = dockerfile_args(), dockerfile_instructions()
    assert steps[0] == "ARG BASE_IMAGE_DIGEST=" + args["BASE_IMAGE_DIGEST"]
    assert steps[1] == "FROM python:3.11.11-slim-bookworm@${BASE_IMAGE_DIGEST}"
    # Recorded from the registry when the image is first built; until then the build stops at FROM, naming it.
    assert args["BASE_IMAGE_DIGEST"] == NOT_RECORDED or re.fullmatch(r"sha256:[0-9a-f]{64}",
                                                                      args["BASE_IMAGE_DIGEST"])


def _slot_check(env: dict) -> subprocess.CompletedProcess:
    """The Dockerfile's first RUN, run as Docker runs it (its SHELL, the ARGs in the environment)."""
    script = next(s for s in dockerfile_instructions() if s.startswith("RUN "))[4:]
    assert "sha256" in script and "wget" not in script and "curl" not in script  # it downloads nothing
    return subprocess.run(["/bin/bash", "-o", "pipefail", "-c", script], env={"PATH": "/usr/bin:/bin", **env},
                          capture_output=True, text=True, timeout=60)


def test_the_image_build_stops_first_when_a_digest_is_not_recorded():
    args = dockerfile_args()
    recorded = {k: ("a" * 64 if k.endswith("_SHA256") else v) for k, v in args.items()}
    assert _slot_check(recorded).returncode == 0
    for slot in ("PULUMI_SHA256", "PULUMI_AWS_SHA256", "PULUMI_KUBERNETES_SHA256"):
        for value in (NOT_RECORDED, "abc", "A" * 64):
            done = _slot_check({**recorded, slot: value})
            assert done.returncode == 1 and f"{slot} is '{value}', not a sha256" in done.stderr, done.stderr
            assert "bootstrap/engine/versions.py" in done.stderr
    shipped = _slot_check(args)
    assert (shipped.returncode == 0) is all(r.digest(LINUX_AMD64) for r in RELEASES), shipped.stderr


# -- ci init -------------------------------------------------------------------------------------------------

def test_ci_init_refuses_while_a_plugin_digest_is_not_recorded(monkeypatch, capsys, tmp_path, local_plugin_releases):
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "dev.yaml").write_text((REPO / "environments" / "dev.yaml").read_text())
    aws, kubernetes = local_plugin_releases[1]
    monkeypatch.setattr(versions, "PROVIDER_PLUGINS",
                        (aws, dataclasses.replace(kubernetes, sha256={LINUX_AMD64: NOT_RECORDED})))
    result = groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(tmp_path), "--install", ".")
    assert_refused(result, 4, f"pulumi-resource-kubernetes-v{kubernetes.version}-linux-amd64.tar.gz",
                   kubernetes.checksums, "Bumping a Pulumi version", "bootstrap/engine/versions.py")
    assert "pulumi-resource-aws" not in result[2] and not (tmp_path / ".github").exists()


def test_the_shipped_table_writes_the_workflows_only_with_every_digest_recorded(monkeypatch, capsys, tmp_path):
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "dev.yaml").write_text((REPO / "environments" / "dev.yaml").read_text())
    result = groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(tmp_path), "--install", ".")
    missing = versions.unrecorded(versions.PROVIDER_PLUGINS, LINUX_AMD64)
    if missing:
        assert_refused(result, 4, *(r.tarball(LINUX_AMD64) for r in missing))
    else:
        assert result[0] == 0, result[2]


# -- the README ----------------------------------------------------------------------------------------------

def test_the_readme_states_the_table_and_how_to_bump_it():
    def flat(text: str) -> str:
        return " ".join(text.split())

    prerequisites = flat(docs.section("running.md", "Prerequisites for real runs"))
    bump = flat(docs.section("maintaining.md", "Bumping a Pulumi version"))
    assert f"v{PULUMI_CLI_MIN} or later" in prerequisites and f"v{PULUMI_CLI_PINNED}" in prerequisites
    assert f"`pulumi>={PULUMI_SDK_MIN}`" in prerequisites
    assert not any("any Pulumi CLI 3.x" in flat(p.read_text()) for p in [docs.README, *docs.pages()])
    for release in versions.PROVIDER_PLUGINS:
        assert f"`{release.name} v{release.version}`" in prerequisites and f"{release.sdk} {release.version}" in \
            prerequisites
    aws = versions.PROVIDER_PLUGINS[0]
    assert f"`pulumi plugin install resource aws v{aws.version} --exact --checksum <sha256>`" in prerequisites
    assert "`bootstrap/engine/versions.py`" in bump and "`pyproject.toml`" in bump and "ARG BASE_IMAGE_DIGEST" in bump
    command = next(line for line in REQUIREMENTS.read_text().splitlines() if line.startswith("#    pip-compile "))
    flags = [w for w in command.split() if w.startswith("--") and not w.startswith("--output-file")]
    assert all(flag in bump for flag in flags), flags
    assert ("records no sha256" in versions.unrecorded_message([aws], LINUX_AMD64, "x")
            and "Bumping a Pulumi version" in versions.BUMP)


def test_the_checksums_file_named_for_each_plugin_is_its_releases():
    platform = LINUX_AMD64
    for release in versions.PROVIDER_PLUGINS:
        project = release.repository.split("/")[1]
        assert release.checksums == (f"https://github.com/{release.repository}/releases/download/v{release.version}/"
                                     f"{project}_{release.version}_checksums.txt")
        assert release.tarball(platform) == f"pulumi-resource-{release.name}-v{release.version}-{platform}.tar.gz"
