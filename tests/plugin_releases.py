"""Release files made here, for tests, served by a local mirror in the publishers' formats (tests/release_mirror.py):
the pinned CLI (a stand-in `pulumi`, or the real one where a test gives it), each plugin groundctl's table pins (a
stand-in `pulumi-resource-<name>` that says so and fails; the kubernetes plugin is the real binary when it is on
PATH or in /root/engine/bin, built by hand), and Flux's install.yaml (tests/data/flux/install.yaml). A repository's
pins lock is written from that mirror by groundctl's own `update_pins`, and plugins are installed by groundctl's
own checked install (the tarball's sha256 against the lock, then `pulumi plugin install … --file … --reinstall`),
so a test that models a runner gets its plugins through the install step the workflows run."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Optional, Sequence

from bootstrap.engine import versions
from bootstrap.pins.artifacts import LINUX_AMD64
from bootstrap.pins.fetch import fetch
from bootstrap.pins.install import install_plugin
from bootstrap.pins.lockfile import LOCK_FILE, Entry, render
from bootstrap.pins.update import Sources, update_pins
from tests.release_mirror import Mirror

STAND_IN_FAILURE = "stand-in pulumi: only version and plugin install"
INSTALLER = Path(__file__).with_name("stand_in_plugin_install.py")
FLUX_MANIFEST = Path(__file__).with_name("data") / "flux" / "install.yaml"
FLUX_VERSIONS = ("2.4.0", "2.7.0")
REAL_PLUGIN_DIRS = ("/root/engine/bin",)


def real_plugin(name: str) -> Optional[Path]:
    """The real `pulumi-resource-<name>` on PATH or where the engine is built by hand, if any."""
    found = shutil.which(f"pulumi-resource-{name}")
    if found:
        return Path(found)
    for folder in REAL_PLUGIN_DIRS:
        path = Path(folder) / f"pulumi-resource-{name}"
        if path.is_file():
            return path
    return None


def stand_in_cli(bin_dir: Path) -> Path:
    """A `pulumi` that answers `version` (the pinned release) and `plugin install … --file` (the stand-in
    installer), and fails every other command (exit 1, STAND_IN_FAILURE)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cli = bin_dir / "pulumi"
    cli.write_text(f'#!/bin/sh\n[ "$1" = version ] && echo v{versions.PULUMI_CLI_PINNED} && exit 0\n'
                   f'[ "$1" = plugin ] && [ "$2" = install ] && exec "{sys.executable}" "{INSTALLER}" "$@"\n'
                   f'echo "{STAND_IN_FAILURE}" >&2\nexit 1\n')
    cli.chmod(0o755)
    return cli


def build_mirror(root: Path, cli_binaries: Optional[dict[str, bytes]] = None, real: Sequence[str] = ("kubernetes",),
                 platforms: Sequence[str] = (LINUX_AMD64,)) -> Mirror:
    """A mirror of every release the shipped table and specs need. `cli_binaries`: the CLI tarball's files (a
    stand-in `pulumi` by default); `real`: the plugins whose real binary goes in when one is found."""
    mirror = Mirror(root)
    if cli_binaries is None:
        cli_binaries = {"pulumi": stand_in_cli(root.parent / f"{root.name}-cli").read_bytes()}
    for platform in platforms:
        mirror.add_cli(versions.PULUMI_CLI_PINNED, platform, cli_binaries)
        for release in versions.PROVIDER_PLUGINS:
            binary = real_plugin(release.name) if release.name in real else None
            mirror.add_plugin(release.name, release.version, platform, binary.read_bytes() if binary else None)
    for version in FLUX_VERSIONS:
        mirror.add_flux(version, FLUX_MANIFEST.read_bytes())
    return mirror


class LocalReleases:
    """A mirror served over HTTP while it lives: `url`, and `lock(repo)` writing a repository's pins lock from it."""

    def __init__(self, mirror: Mirror, url: str):
        self.mirror, self.url = mirror, url

    def entries(self, repo: Path, platforms: Sequence[str] = (LINUX_AMD64,)) -> list[Entry]:
        from bootstrap.pins.repository import repository_wants
        from groundctl.pins import pinned

        wanted, _ = repository_wants(repo, pinned(image=False), platforms)
        return update_pins(wanted, fetch, Sources(self.url), None, {}).entries

    def lock(self, repo: Path, platforms: Sequence[str] = (LINUX_AMD64,)) -> Path:
        path = repo / LOCK_FILE
        path.write_text(render(self.entries(repo, platforms)))
        return path


@contextlib.contextmanager
def served(root: Path, **kwargs) -> Iterator[LocalReleases]:
    mirror = build_mirror(root, **kwargs)
    with mirror.serve() as url:
        yield LocalReleases(mirror, url)


def install(cli: Path, entries: Sequence[Entry], env: dict) -> None:
    """Install every plugin entry with `cli` as the workflows' step does (checked, then --file); AssertionError
    naming the one that fails."""
    for entry in entries:
        if entry.name.startswith("pulumi-resource-"):
            install_plugin(entry, fetch, env, pulumi=str(cli), run=subprocess.run)
