"""What each artifact groundctl installs is called where its publisher puts it: the release file, the checksums
file beside it, the URL of both under a release base (GitHub's, or a team's mirror of it). Pure.

Names follow the publishers' goreleaser configurations: pulumi/pulumi's '{{ .ProjectName }}-{{ .Version }}-
checksums.txt' and 'pulumi-v<v>-<os>-x64.tar.gz'; the providers' default '<project>_<v>_checksums.txt' and
'pulumi-resource-<name>-v<v>-<os>-<arch>.tar.gz'; Flux's 'flux_<v>_checksums.txt', holding install.yaml's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GITHUB = "https://github.com"
DOCKER_HUB = "https://registry-1.docker.io"
CLI = "pulumi"
FLUX = "flux"
BASE_IMAGE = "base-image"
PLUGIN_PREFIX = "pulumi-resource-"
ANY = "any"  # a file that is the same on every platform (install.yaml; an image index)
LINUX_AMD64 = "linux-amd64"
_PLATFORM = re.compile(r"(linux|darwin|windows)-(amd64|arm64)")
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def is_platform(value: str) -> bool:
    return bool(_PLATFORM.fullmatch(value))


def plugin_name(plugin: str) -> str:
    """The lock's name for a resource plugin: the binary's name, so no plugin collides with the CLI or Flux."""
    return PLUGIN_PREFIX + plugin


@dataclass(frozen=True, order=True)
class Want:
    """One file the lock must hold: `name` at `version` (no leading v) for `platform`."""

    name: str
    version: str
    platform: str


    @property
    def repository(self) -> str:
        """The GitHub owner/name whose release publishes it (not for the base image)."""
        if self.name == CLI:
            return "pulumi/pulumi"
        if self.name == FLUX:
            return "fluxcd/flux2"
        return f"pulumi/pulumi-{self.name.removeprefix(PLUGIN_PREFIX)}"

    @property
    def file(self) -> str:
        if self.name == CLI:
            system, arch = self.platform.split("-", 1)
            return f"pulumi-v{self.version}-{system}-{'x64' if arch == 'amd64' else arch}.tar.gz"
        if self.name == FLUX:
            return "install.yaml"
        if self.name == BASE_IMAGE:
            return self.version  # the image reference, such as python:3.11.11-slim-bookworm
        return f"{self.name}-v{self.version}-{self.platform}.tar.gz"

    @property
    def checksums_file(self) -> str:
        project = self.repository.split("/", 1)[1]
        if self.name == CLI:
            return f"{project}-{self.version}-checksums.txt"
        if self.name == FLUX:
            return f"flux_{self.version}_checksums.txt"
        return f"{project}_{self.version}_checksums.txt"

    def release_base(self, base: str = GITHUB) -> str:
        return f"{base.rstrip('/')}/{self.repository}/releases/download/v{self.version}"

    def url(self, base: str = GITHUB) -> str:
        return f"{self.release_base(base)}/{self.file}"

    def checksums_url(self, base: str = GITHUB) -> str:
        return f"{self.release_base(base)}/{self.checksums_file}"

    def label(self) -> str:
        where = "" if self.platform == ANY else f" for {self.platform}"
        return f"{self.name} {self.version}{where} ({self.file})"


def wants(cli_version: str, plugins: dict[str, str], flux_versions: list[str], platforms: list[str],
          base_image: str = "") -> list[Want]:
    """Every file the lock must hold: the CLI and each plugin (name → version) per platform, each Flux version's
    install.yaml, and the base image when one is named; sorted, without duplicates. Pure."""
    found = {Want(CLI, cli_version, p) for p in platforms}
    found |= {Want(plugin_name(n), v, p) for n, v in plugins.items() for p in platforms}
    found |= {Want(FLUX, v.removeprefix("v"), ANY) for v in flux_versions}
    if base_image:
        found.add(Want(BASE_IMAGE, base_image, ANY))
    return sorted(found)


def known_name(name: str) -> bool:
    """A name the lock may hold: the CLI, Flux, the base image, or a resource plugin's binary name."""
    return name in (CLI, FLUX, BASE_IMAGE) or (name.startswith(PLUGIN_PREFIX)
                                               and bool(_NAME.fullmatch(name.removeprefix(PLUGIN_PREFIX))))
