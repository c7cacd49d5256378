"""The Pulumi releases groundctl supports and pins: the one table of versions every other file takes them from
(the CLI check and the plugin preflight, the adopter's pins lock, pyproject's SDK pins, the README and the tests
hold to it).

Digests are not here: an adopter holds groundctl only as a wheel, so the sha256 of each release file lives in
their repository's pins lock (groundctl-pins.json, bootstrap/pins), read from the publisher's checksums file by
`groundctl pins update` and reviewed like any change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# `config set --raw` (how a secret's exact bytes reach the CLI on stdin) exists only from v3.247.0.
PULUMI_CLI_MIN = "3.247.0"
# The release the fleet image and the generated workflows install, and the engine tier was run with.
PULUMI_CLI_PINNED = "3.259.0"
# bootstrap/engine/sdk_objects.py runs an update through the Automation API's own event plumbing:
# `Stack._setup_event_log` and the five-argument `_cleanup` (its gRPC event server) exist only from the Python SDK
# 3.206.0 (tests/test_sdk_private_names.py); `Stack.refresh(clear_pending_creates=...)`, from 3.151.0, is older.
PULUMI_SDK_MIN = "3.206.0"
# The fleet image's base, by tag; its digest is the adopter's lock's (`groundctl pins update` reads the registry).
BASE_IMAGE = "python:3.11.11-slim-bookworm"

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def platform_key(system: str, machine: str) -> str:
    """'linux-amd64' for ('Linux', 'x86_64'): the name Pulumi gives a platform (GOOS-GOARCH). Pure."""
    return f"{system.lower()}-{_ARCH.get(machine.lower(), machine.lower())}"


@dataclass(frozen=True)
class Release:
    """One release groundctl installs: the Pulumi CLI (name "pulumi") or a resource plugin, at one version."""

    name: str
    version: str  # without the leading "v"
    sdk: str = ""  # the Python distribution that asks for this plugin (pulumi-aws), for a plugin
    repository: str = ""  # github owner/name, where the release and its checksums file are published

    @property
    def is_cli(self) -> bool:
        return self.name == "pulumi"


PULUMI_CLI = Release("pulumi", PULUMI_CLI_PINNED, repository="pulumi/pulumi")
# The resource plugins the layer programs use, at exactly the versions the pinned SDKs ask for (each SDK's
# pulumi-plugin.json); pyproject.toml pins the SDKs to these versions.
PROVIDER_PLUGINS: tuple[Release, ...] = (
    Release("aws", "7.51.1", sdk="pulumi-aws", repository="pulumi/pulumi-aws"),
    Release("kubernetes", "4.34.2", sdk="pulumi-kubernetes", repository="pulumi/pulumi-kubernetes"),
)


def table_problems(releases) -> list[str]:
    """Versions that are not releases. Pure."""
    return [f"{r.name}: version {r.version!r} is not a release such as 1.2.3" for r in releases
            if not re.fullmatch(r"\d+\.\d+\.\d+", r.version)]
