"""Provider plugin releases made here, for tests: a tarball shaped like a provider's release (a stand-in
`pulumi-resource-<name>` inside; the real one cannot be had offline), groundctl's versions table holding its
digest, and a stand-in `pulumi` whose `plugin install` answers the download from those local files and checks it
as the real CLI does (--checksum: "invalid checksum, expected …, actual …"; --exact), so a test that models a
runner gets its plugins through the install step the workflows run, never from folders made beside it."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Sequence

from bootstrap.engine import versions
from bootstrap.engine.versions import LINUX_AMD64, Release, plugin_install_argv

STAND_IN_FAILURE = "stand-in pulumi: only version and plugin install"
DOWNLOADS_VAR = "GROUNDCTL_TEST_PLUGIN_DOWNLOADS"  # the folder the stand-in CLI answers downloads from
INSTALLER = Path(__file__).with_name("stand_in_plugin_install.py")


def make_tarball(folder: Path, release: Release, platform: str = LINUX_AMD64) -> Path:
    """`release`'s tarball for `platform`, byte-for-byte the same on every call (no dates in it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / release.tarball(platform)
    binary = (f'#!/bin/sh\necho "stand-in pulumi-resource-{release.name} v{release.version}: not a real '
              'provider" >&2\nexit 1\n').encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo(f"pulumi-resource-{release.name}")
        info.size, info.mode, info.mtime = len(binary), 0o755, 0
        tar.addfile(info, io.BytesIO(binary))
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def local_table(folder: Path, releases: Sequence[Release] = (), platform: str = LINUX_AMD64) -> tuple[Release, ...]:
    """`releases` (default: groundctl's table) with each digest that of the tarball made in `folder`."""
    made = []
    for release in releases or versions.PROVIDER_PLUGINS:
        made.append(dataclasses.replace(release, sha256={platform: sha256(make_tarball(folder, release, platform))}))
    return tuple(made)


def stand_in_cli(bin_dir: Path) -> Path:
    """A `pulumi` that answers `version` (the pinned release) and `plugin install` (from DOWNLOADS_VAR), and fails
    every other command (exit 1, STAND_IN_FAILURE): what the engine needs before groundctl's first write."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    cli = bin_dir / "pulumi"
    cli.write_text(f'#!/bin/sh\n[ "$1" = version ] && echo v{versions.PULUMI_CLI_PINNED} && exit 0\n'
                   f'[ "$1" = plugin ] && [ "$2" = install ] && exec "{sys.executable}" "{INSTALLER}" "$@"\n'
                   f'echo "{STAND_IN_FAILURE}" >&2\nexit 1\n')
    cli.chmod(0o755)
    return cli


def install(cli: Path, releases: Sequence[Release], env: dict, platform: str = LINUX_AMD64) -> None:
    """Run the install step's commands (as the workflows write them) with `cli`; AssertionError when one fails."""
    for release in releases:
        argv = [str(cli), *plugin_install_argv(release, release.digest(platform))[1:]]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (argv, done.stderr)
