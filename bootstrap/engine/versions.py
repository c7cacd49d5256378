"""The Pulumi releases groundctl supports and ships with, and the sha256 of each release file it installs: the one
table every other file takes them from (the CLI check and the plugin preflight, the generated workflows, the
Dockerfile, pyproject's SDK pins, the README and the tests hold to it).

A digest is copied from the checksums file the project publishes with the release (`checksums` below), never
computed from a download of one's own: that would only record whatever the download happened to return. Until
it is recorded a slot holds NOT_RECORDED, and everything that would install that file without checking it (the
workflows `ci init` writes, the image) refuses, naming the slot and where its value comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from bootstrap.errors import GroundctlError

# `config set --raw` (how a secret's exact bytes reach the CLI on stdin) exists only from v3.247.0.
PULUMI_CLI_MIN = "3.247.0"
# The release the fleet image and the generated workflows install, and the engine tier was run with.
PULUMI_CLI_PINNED = "3.259.0"
# `Stack.refresh(clear_pending_creates=...)` exists only from the Python SDK 3.151.0.
PULUMI_SDK_MIN = "3.151.0"

# The fleet image's base, by tag; its digest is the adopter's lock's (`groundctl pins update` reads the registry).
BASE_IMAGE = "python:3.11.11-slim-bookworm"

NOT_RECORDED = "not-recorded"
# GitHub's ubuntu-latest runners and the fleet image. `pulumi plugin install --checksum` files the digest under
# the platform it runs on (pkg/cmd/pulumi/plugin/plugin_install.go:176-185), so a job must run where its digest is.
LINUX_AMD64 = "linux-amd64"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}
TABLE = "bootstrap/engine/versions.py"
BUMP = "the README's 'Bumping a Pulumi version'"


def platform_key(system: str, machine: str) -> str:
    """'linux-amd64' for ('Linux', 'x86_64'): the name Pulumi gives a platform (GOOS-GOARCH). Pure."""
    return f"{system.lower()}-{_ARCH.get(machine.lower(), machine.lower())}"


@dataclass(frozen=True)
class Release:
    """One release groundctl installs: the Pulumi CLI (name "pulumi") or a resource plugin, at one version, with the
    sha256 of its tarball per platform."""

    name: str
    version: str  # without the leading "v"
    sha256: Mapping[str, str] = field(default_factory=dict)  # platform → 64 hex digits, or NOT_RECORDED
    sdk: str = ""  # the Python distribution that asks for this plugin (pulumi-aws), for a plugin
    repository: str = ""  # github owner/name, where the release and its checksums file are published

    @property
    def is_cli(self) -> bool:
        return self.name == "pulumi"

    def tarball(self, platform: str) -> str:
        if self.is_cli:
            system, arch = platform.split("-", 1)
            return f"pulumi-v{self.version}-{system}-{'x64' if arch == 'amd64' else arch}.tar.gz"
        return f"pulumi-resource-{self.name}-v{self.version}-{platform}.tar.gz"

    @property
    def checksums(self) -> str:
        """The published checksums file (goreleaser's names: pulumi/pulumi's .goreleaser.yml sets
        '{{ .ProjectName }}-{{ .Version }}-checksums.txt'; the providers keep the default, '…_…_checksums.txt')."""
        base = f"https://github.com/{self.repository}/releases/download/v{self.version}"
        project = self.repository.split("/", 1)[-1]
        return f"{base}/{project}-{self.version}-checksums.txt" if self.is_cli \
            else f"{base}/{project}_{self.version}_checksums.txt"

    def digest(self, platform: str) -> Optional[str]:
        """The recorded sha256 for `platform`, or None when none is recorded. Pure."""
        value = self.sha256.get(platform, NOT_RECORDED)
        return value if _SHA256.fullmatch(value) else None


PULUMI_CLI = Release("pulumi", PULUMI_CLI_PINNED, {LINUX_AMD64: NOT_RECORDED}, repository="pulumi/pulumi")
# The resource plugins the layer programs use, at exactly the versions the pinned SDKs ask for (each SDK's
# pulumi-plugin.json); pyproject.toml pins the SDKs to these versions.
PROVIDER_PLUGINS: tuple[Release, ...] = (
    Release("aws", "7.51.1", {LINUX_AMD64: NOT_RECORDED}, sdk="pulumi-aws", repository="pulumi/pulumi-aws"),
    Release("kubernetes", "4.34.2", {LINUX_AMD64: NOT_RECORDED}, sdk="pulumi-kubernetes",
            repository="pulumi/pulumi-kubernetes"),
)


def table_problems(releases: Sequence[Release]) -> list[str]:
    """Slots that are neither a sha256 nor NOT_RECORDED, and versions that are not releases. Pure."""
    found = []
    for release in releases:
        if not re.fullmatch(r"\d+\.\d+\.\d+", release.version):
            found.append(f"{release.name}: version {release.version!r} is not a release such as 1.2.3")
        for platform, value in release.sha256.items():
            if value != NOT_RECORDED and not _SHA256.fullmatch(value):
                found.append(f"{release.name} {platform}: {value!r} is neither 64 lowercase hex digits nor "
                             f"{NOT_RECORDED!r}")
    return found


def unrecorded(releases: Sequence[Release], platform: str) -> list[Release]:
    """The releases with no sha256 recorded for `platform`. Pure."""
    return [r for r in releases if r.digest(platform) is None]


def unrecorded_message(missing: Sequence[Release], platform: str, purpose: str) -> str:
    """One paragraph: which digests are missing, why `purpose` stops, and how to record them. Pure."""
    files = "; ".join(f"{r.tarball(platform)} (its sha256 is in {r.checksums})" for r in missing)
    return (f"{purpose} stops: groundctl's versions table ({TABLE}) records no sha256 for {platform} of {files}. "
            "Without it the download cannot be checked, and groundctl never installs what it cannot check. Copy "
            f"each digest from that published checksums file into the table, as {BUMP} says, then run again.")


def require_recorded(releases: Sequence[Release], platform: str, purpose: str) -> dict[str, str]:
    """name → sha256 for `platform`; GroundctlError (exit 4, a missing prerequisite) when one is not recorded."""
    missing = unrecorded(releases, platform)
    if missing:
        raise GroundctlError(unrecorded_message(missing, platform, purpose))
    return {r.name: r.digest(platform) for r in releases}


def plugin_install_argv(release: Release, digest: str) -> list[str]:
    """`pulumi plugin install` of one plugin release: its download checked against `digest` (--checksum,
    pkg/cmd/pulumi/plugin/plugin_install.go:95-96, 176-185) and installed at exactly that version even where a
    newer one already is (--exact, :89-90, :290-294; the preflight wants the exact version). Pure."""
    return ["pulumi", "plugin", "install", "resource", release.name, f"v{release.version}", "--exact",
            "--checksum", digest]
