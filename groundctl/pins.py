"""`groundctl pins …`: the adopter's lock of checked release artifacts (groundctl-pins.json).

`update` reads the publishers' checksums files (and the registry, for the image's base) and writes the lock;
`check` says offline whether the lock covers what this groundctl, its installed SDKs and the specs need;
`install` installs the CLI or the plugins from the lock, each download checked first. The decisions are in
bootstrap/pins/; this module finds the repository's needs, reads and writes files, and reports.
"""

from __future__ import annotations

import os
import platform as host
import re
from pathlib import Path
from typing import Optional, Sequence

import typer
from rich.text import Text

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput, GroundctlError
from groundctl.cli import app
from groundctl.common import Group, json_opt, table

pins_app = typer.Typer(cls=Group, help="The lock of checked release artifacts: update, check, install.",
                       no_args_is_help=True)
app.add_typer(pins_app, name="pins")

RELEASE_MIRROR_VAR = "GROUNDCTL_RELEASE_MIRROR"
REGISTRY_MIRROR_VAR = "GROUNDCTL_REGISTRY_MIRROR"
_DIR = typer.Option(Path("."), "--dir", help="The repository root (it holds environments/ and the lock).")
_URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~/-]*)?")


# -- what this groundctl pins, and the repository's lock: bootstrap/pins/repository.py decides --------------

def pinned(image: bool = True):
    """What this groundctl installs: its CLI pin, each plugin at the version its installed SDK asks for (the
    table's where none is installed), and the image's base when `image`."""
    from bootstrap.engine import versions
    from bootstrap.engine.plugins import sdk_plugin
    from bootstrap.pins.repository import Pinned

    plugins = {}
    for release in versions.PROVIDER_PLUGINS:
        asked = sdk_plugin(release.sdk.replace("-", "_"))
        plugins[release.name] = asked.version if asked else release.version
    return Pinned(versions.PULUMI_CLI_PINNED, plugins, versions.BASE_IMAGE if image else "")


def _mirror(value: Optional[str], var: str, default: str, flag: str) -> str:
    chosen = value or os.environ.get(var) or default
    if not _URL.fullmatch(chosen):
        raise BadInput(f"{flag} (or {var}) {chosen[:120]!r} is not a base URL such as https://artifacts.example.com"
                       "/github (no query, no credentials): give the mirror's base URL.")
    return chosen.rstrip("/")


def host_platform() -> str:
    from bootstrap.engine.versions import platform_key

    return platform_key(host.system(), host.machine())


# -- update ---------------------------------------------------------------------------------------------

def _current(path: Path, size: int) -> Optional[bytes]:
    """The bytes of a Flux copy already in the repository (bounded: one byte over the new file's size is enough
    to say it differs), or None when there is none or it cannot be read."""
    from bootstrap.kit.user_files import UnusableFile, read_user_file

    if not path.is_file():
        return None
    try:
        return read_user_file(str(path), what="", fix="", max_bytes=size + 1)
    except UnusableFile:
        return None


def record_pins(repo: Path, fetch, sources=None, verifier=None, platforms: Sequence[str] = (), *, image: bool = True,
                extra_plugins: Sequence[str] = (), prune: bool = False):
    """`groundctl pins update` as a plain function (`groundctl init` calls it): bootstrap.pins.repository.
    plan_update reads and checks everything, then the checked Flux copies are written and the lock last.
    Returns (bootstrap.pins.update.Result, whether the lock changed, the lock's path)."""
    from bootstrap.destinations import symlink_on_the_way, write_text
    from bootstrap.pins.lockfile import LOCK_FILE
    from bootstrap.pins.repository import plan_update

    planned = plan_update(repo, pinned(image), fetch, sources, verifier, platforms, extra_plugins, prune)
    for rel in [LOCK_FILE, *planned.files]:
        if symlink_on_the_way(repo, rel) is not None:
            raise BadInput(f"{repo / rel} has a symbolic link on its way, and `groundctl pins update` never writes "
                           "through one. Nothing was written. Replace the link with a plain folder or file.")
    for rel, body in sorted(planned.files.items()):
        if _current(repo / rel, len(body)) != body:
            write_text(repo / rel, body.decode("utf-8"), "--dir")
    if planned.changed:
        write_text(planned.lock_path, planned.lock_text, "--dir")
    return planned.result, planned.changed, planned.lock_path


@pins_app.command("update")
def update(
    repo: Path = _DIR,
    platforms: Optional[list[str]] = typer.Option(
        None, "--platform", help="Another platform to record (linux-amd64 always is), e.g. darwin-arm64. "
                                 "Repeatable."),
    release_mirror: Optional[str] = typer.Option(
        None, "--release-mirror", help=f"Base URL serving GitHub's release paths (default: https://github.com; "
                                       f"or {RELEASE_MIRROR_VAR})."),
    registry_mirror: Optional[str] = typer.Option(
        None, "--registry-mirror",
        help=f"Base URL of an OCI registry mirroring Docker Hub (or {REGISTRY_MIRROR_VAR})."),
    no_image: bool = typer.Option(False, "--no-image", help="Do not record the image's base (no image is built)."),
    no_verify_signatures: bool = typer.Option(
        False, "--no-verify-signatures", help="Record Flux's digests without cosign (the lock says so)."),
    extra_plugins: Optional[list[str]] = typer.Option(
        None, "--plugin", help="Also record this plugin version, NAME@VERSION (one a stack's state still binds its "
                               "provider to). Repeatable; kept by later updates until --prune."),
    prune: bool = typer.Option(False, "--prune", help="Drop plugin versions no installed SDK asks for."),
    json_out: bool = json_opt("the artifacts recorded and the URLs read"),
) -> None:
    """Read the publishers' checksums files and write groundctl-pins.json at the repository root."""
    from bootstrap.pins import cosign
    from bootstrap.pins.artifacts import DOCKER_HUB, GITHUB
    from bootstrap.pins.fetch import fetch
    from bootstrap.pins.lockfile import LOCK_FILE
    from bootstrap.pins.update import Sources

    sources = Sources(_mirror(release_mirror, RELEASE_MIRROR_VAR, GITHUB, "--release-mirror"),
                      _mirror(registry_mirror, REGISTRY_MIRROR_VAR, DOCKER_HUB, "--registry-mirror"))
    with console.progress("Reading the publishers' checksums files") as say:
        def counted(url, **kwargs):
            say(url[-80:])
            return fetch(url, **kwargs)
        result, changed, lock_path = record_pins(
            repo, counted, sources, None if no_verify_signatures else cosign.verifier, platforms or (),
            image=not no_image, extra_plugins=extra_plugins or (), prune=prune)
    if json_out:
        console.emit_json({"lock": str(lock_path), "changed": changed, "read": result.read,
                           "files": sorted(result.files),
                           "artifacts": [e.__dict__ for e in sorted(result.entries)]})
        return
    shown = table(f"{LOCK_FILE}: {'written' if changed else 'unchanged'}", "artifact", "version", "platform", "sha256")
    for e in sorted(result.entries):
        shown.add_row(Text(e.name), Text(e.version), Text(e.platform), Text(e.sha256[:16] + "…"))
    console.data(shown)
    for rel in sorted(result.files):
        console.info(f"Flux's install.yaml, checked, at {rel}")
    console.info(f"Read {len(result.read)} files from {sources.release_base}"
                 + ("" if no_image else f" and {sources.registry}") + f". Review and commit {LOCK_FILE}.")


# -- check ----------------------------------------------------------------------------------------------

def require_covered(repo: Path, purpose: str, image: bool = False, platforms: Sequence[str] = (),
                    cli_version: Optional[str] = None, specs: Optional[Path] = None) -> list:
    """The lock's entries when they cover what `repo` needs with this groundctl's pins; GroundctlError (exit 4)
    naming what is missing and the command that records it. What `ci init`, `fleet manifests`, the jobs and the
    image build call. `cli_version`: the CLI release wanted in place of groundctl's pin."""
    from dataclasses import replace

    from bootstrap.pins.repository import require_covered as covered

    wanted = pinned(image)
    return covered(repo, replace(wanted, cli_version=cli_version) if cli_version else wanted, purpose, platforms,
                   specs)


@pins_app.command("check")
def check(
    repo: Path = _DIR,
    image: bool = typer.Option(False, "--image", help="Also require the image's base (for the image build)."),
    platforms: Optional[list[str]] = typer.Option(None, "--platform", help="Also require this platform."),
    json_out: bool = json_opt("whether the lock covers what is needed"),
) -> None:
    """Offline: does the lock cover the CLI pin, the installed SDKs' plugins and the specs' Flux versions?"""
    entries = require_covered(repo, "The pins check", image, platforms or ())
    if json_out:
        console.emit_json({"covered": True, "artifacts": len(entries)})
        return
    console.info(f"The pins lock covers everything this groundctl, its SDKs and the specs need ({len(entries)} "
                 "artifacts).")


@pins_app.command("base-image")
def base_image(repo: Path = _DIR) -> None:
    """Print the lock's digest of the image's base (sha256:…), for `docker build --build-arg BASE_IMAGE_DIGEST=`."""
    from bootstrap.engine.versions import BASE_IMAGE
    from bootstrap.pins.lockfile import base_image_digest

    entries = require_covered(repo, "The image build", image=True)
    typer.echo(base_image_digest(entries, BASE_IMAGE))


# -- the image's Dockerfile -----------------------------------------------------------------------------------

@pins_app.command("dockerfile")
def dockerfile(
    repo: Path = _DIR,
    install: str = typer.Option(
        "groundctl-requirements.txt", "--install",
        help="The repository's hashed requirements file pinning groundctl's committed wheel (as for `ci init`)."),
    force: bool = typer.Option(False, "--force", help="Replace a groundctl.Dockerfile that differs."),
) -> None:
    """Write groundctl.Dockerfile into the repository: the fleet's image, built from the repository's committed
    wheel, hashed requirements file and pins lock (base digest, CLI and plugins), never groundctl's source."""
    from bootstrap.ci.requirements import CHECKOUT, install_run
    from bootstrap.destinations import symlink_on_the_way, write_text
    from bootstrap.engine.versions import BASE_IMAGE
    from bootstrap.pins.dockerfile import DOCKERFILE, render
    from groundctl.ci_init import _pinned_copy

    if install == CHECKOUT:
        raise BadInput("--install . installs groundctl's own checkout, which an image built from your repository "
                       "does not have: name the repository's hashed requirements file, as for `groundctl ci init`.")
    problems, _, wheel_dir, wheel = _pinned_copy(repo, install)
    if problems:
        raise BadInput(f"The image installs groundctl as the workflows do, and {'; '.join(problems)}. Nothing was "
                       "written.")
    text = render(install.removeprefix("./"), wheel, install_run(install.removeprefix("./"), wheel_dir), BASE_IMAGE)
    target = repo / DOCKERFILE
    if symlink_on_the_way(repo, DOCKERFILE) is not None:
        raise BadInput(f"{target} has a symbolic link on its way; nothing was written. Replace it with a plain file.")
    current = _current(target, 1 << 20)  # a Dockerfile edited by hand may be longer than ours
    if current is not None and current != text.encode() and not force:
        raise BadInput(f"{target} exists and differs from what this groundctl writes. Nothing was written: review "
                       "the difference, then run again with --force (the file is groundctl's: edit nothing in it).")
    if current != text.encode():
        write_text(target, text, "--dir")
    console.info(f"{DOCKERFILE}: {'unchanged' if current == text.encode() else 'written'}. Build the image at the "
                 f"repository's root: docker build -f {DOCKERFILE} --build-arg BASE_IMAGE_DIGEST=\"$(groundctl pins "
                 "base-image)\" -t REGISTRY/groundctl:TAG . (the lock needs the image's base: run `groundctl pins "
                 "update` without --no-image).")


# -- install --------------------------------------------------------------------------------------------

@pins_app.command("install")
def install(
    repo: Path = _DIR,
    cli: Optional[Path] = typer.Option(None, "--cli", help="Unpack the Pulumi CLI into this folder; print it."),
    cli_version: Optional[str] = typer.Option(None, "--cli-version",
                                              help="The CLI release (default: groundctl's pin)."),
    plugins: bool = typer.Option(False, "--plugins", help="Install every plugin the installed SDKs ask for."),
    platform: Optional[str] = typer.Option(None, "--platform", help="Platform of the files (default: this host's)."),
) -> None:
    """Install from the lock, each download checked against its sha256 before anything is installed."""
    from bootstrap.engine import versions
    from bootstrap.pins.artifacts import CLI, Want
    from bootstrap.pins.fetch import fetch
    from bootstrap.pins.install import InstallProblem, checked_first, install_cli, install_plugin
    from bootstrap.pins.lockfile import LOCK_FILE, find, shortfall_message

    if cli is None and not plugins:
        raise BadInput("Say what to install: --cli FOLDER (the Pulumi CLI) and/or --plugins.")
    chosen = platform or host_platform()
    entries = require_covered(repo, "Installing from the lock", platforms=[chosen])
    # Every plugin version the lock records: the SDKs' and any a stack's state still binds its provider to.
    todo = sorted(e for e in entries if e.name.startswith("pulumi-resource-") and e.platform == chosen) \
        if plugins else []
    version = cli_version or versions.PULUMI_CLI_PINNED
    cli_entry = find(entries, Want(CLI, version, chosen)) if cli is not None else None
    if cli is not None and cli_entry is None:
        raise GroundctlError(shortfall_message(str(repo / LOCK_FILE), [Want(CLI, version, chosen).label()],
                                               "Installing the Pulumi CLI"))
    try:
        checked = checked_first([e for e in (cli_entry, *todo) if e is not None], fetch)
        if cli_entry is not None:
            folder = install_cli(cli_entry, checked, cli.absolute())
            console.info(f"Pulumi CLI {version} ({cli_entry.file}, sha256 checked) in {folder}")
            typer.echo(str(folder))
        for entry in todo:
            install_plugin(entry, checked, os.environ)
            console.info(f"{entry.name} v{entry.version} ({entry.file}, sha256 checked) installed")
    except InstallProblem as exc:
        raise GroundctlError(str(exc)) from None
