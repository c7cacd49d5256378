"""The adopter's repository as `groundctl pins` sees it: what its specs need from the lock (each spec's Flux
version, and where the checked install.yaml goes), its lock read as untrusted, what the lock lacks, and an
update planned over a fetcher passed in. Nothing here writes: the CLI writes what `plan_update` returns, the
Flux copies first and the lock that names them last.

What groundctl itself pins (the CLI version, the plugins its SDKs ask for, the image's base) is `Pinned`,
given by the caller (bootstrap.engine knows it; the engine floor reads this package, not the reverse).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from bootstrap.kit.errors import BadInput, GroundctlError
from bootstrap.pins.artifacts import FLUX, LINUX_AMD64, Want, is_platform, plugin_name, wants
from bootstrap.pins.lockfile import (LOCK_FILE, MAX_LOCK_BYTES, Entry, LockProblem, parse, render, shortfall,
                                     shortfall_message)

MAX_SPEC_BYTES = 1 << 20
PLACEHOLDER_SHA256 = "0" * 64   # the shipped production example's: never the digest of any file
FLUX_COPY = "manifests/flux-v{version}.yaml"   # where `pins update` writes the checked install.yaml by default
_PATH = re.compile(r"[A-Za-z0-9._/-]{1,200}")
_FLUX_VERSION = re.compile(r"v\d+\.\d+\.\d+")


@dataclass(frozen=True)
class Pinned:
    """What this groundctl installs whatever the specs say: its CLI pin, each plugin (name → the version its
    installed SDK asks for), and the image's base reference ("" when no image is built)."""
    cli_version: str
    plugins: Mapping[str, str]
    base_image: str = ""


def unpinned(flux: object) -> bool:
    """Whether a spec's raw `flux:` mapping leaves the manifest's digest to the lock: no manifest_sha256, or the
    example's placeholder, and no URL as its manifest. Pure over untrusted data."""
    if not isinstance(flux, dict):
        return False
    digest, path = flux.get("manifest_sha256"), flux.get("manifest_path")
    if isinstance(path, str) and path.startswith(("http://", "https://")):
        return False
    return digest is None or (isinstance(digest, str) and digest.lower() == PLACEHOLDER_SHA256)


def flux_copy_path(flux: dict) -> Optional[str]:
    """Where the checked install.yaml of the spec's raw `flux:` mapping is written: the relative
    flux.manifest_path it names, else FLUX_COPY; None for a spec whose manifest is pinned by hand or named by an
    absolute path or URL. Pure over untrusted data."""
    if not unpinned(flux):
        return None
    written = flux.get("manifest_path")
    if written is None:
        return FLUX_COPY.format(version=flux["version"].removeprefix("v"))
    if isinstance(written, str) and _PATH.fullmatch(written) and not written.startswith("/") \
            and ".." not in written.split("/"):
        return written.removeprefix("./")
    return None


def spec_flux(folder: Path) -> tuple[list[str], dict[str, list[str]]]:
    """Each spec's Flux version, and per version the repository paths its checked install.yaml is written to
    (`flux_copy_path`: where `fleet manifests` mounts it from, and what `up` reads). A spec that does not read as
    YAML contributes nothing here (`spec check` names it)."""
    import yaml

    from bootstrap.kit.user_files import UnusableFile, read_user_file

    versions: set[str] = set()
    paths: dict[str, list[str]] = {}
    for spec in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        try:
            doc = yaml.safe_load(read_user_file(str(spec), what="The spec", max_bytes=MAX_SPEC_BYTES, fix=""))
        except (UnusableFile, yaml.YAMLError):
            continue
        flux = doc.get("flux") if isinstance(doc, dict) else None
        version = flux.get("version") if isinstance(flux, dict) else None
        if not (isinstance(version, str) and _FLUX_VERSION.fullmatch(version)):
            continue
        versions.add(version.removeprefix("v"))
        copy = flux_copy_path(flux)
        if copy and copy not in paths.get(version.removeprefix("v"), []):
            paths.setdefault(version.removeprefix("v"), []).append(copy)
    # The default copy first: the lock's `path`, which a spec naming no file reads.
    for version, found in paths.items():
        found.sort(key=lambda p: (p != FLUX_COPY.format(version=version), p))
    return sorted(versions), paths


def repository_wants(repo: Path, pinned: Pinned, platforms: Sequence[str], specs: Optional[Path] = None):
    """(wants, flux paths) for `repo`: `pinned`'s CLI and plugins on each platform and its base image; the Flux
    install.yaml of each spec in `specs` (default: repo/environments)."""
    flux_versions, flux_paths = spec_flux(specs or repo / "environments")
    return wants(pinned.cli_version, dict(pinned.plugins), flux_versions, list(platforms),
                 pinned.base_image), flux_paths


LOCK_FIX = (f"Restore it from the repository's history (`git checkout -- {LOCK_FILE}`), or delete it and run "
            "`groundctl pins update`; never edit it by hand.")


def read_lock(repo: Path) -> tuple[list[Entry], Path]:
    """The lock's entries ([] when there is none) and its path; BadInput (exit 2) naming a malformed one."""
    from bootstrap.kit.user_files import read_user_file

    path = repo / LOCK_FILE
    if not path.exists() and not path.is_symlink():
        return [], path
    data = read_user_file(str(path), what="The pins lock", max_bytes=MAX_LOCK_BYTES, fix=LOCK_FIX)
    parsed = _PARSED.get(data)
    if parsed is None:
        try:
            parsed = parse(data)
        except LockProblem as exc:
            raise BadInput(f"The pins lock {path} is not usable: {exc}. {LOCK_FIX}") from None
        _PARSED.clear()
        _PARSED[data] = parsed
    return list(parsed), path


# The last lock read, by its bytes: every spec of a fleet that leaves its Flux digest to the lock reads the one
# lock, which is parsed and checked once (its bytes are still read each time: a lock edited meanwhile is seen).
_PARSED: dict[bytes, list[Entry]] = {}


def require_covered(repo: Path, pinned: Pinned, purpose: str, platforms: Sequence[str] = (),
                    specs: Optional[Path] = None) -> list[Entry]:
    """The lock's entries when they cover what `repo` needs; GroundctlError (exit 4) naming what is missing and
    the command that records it."""
    entries, path = read_lock(repo)
    wanted, _ = repository_wants(repo, pinned, sorted({LINUX_AMD64, *platforms}), specs=specs)
    missing = shortfall(entries, wanted)
    if missing:
        flags = "".join(f" --platform {p}" for p in sorted(set(platforms) - {LINUX_AMD64}))
        raise GroundctlError(shortfall_message(str(path), missing, purpose, flags))
    return entries


@dataclass
class Planned:
    """What `groundctl pins update` writes: the checked Flux copies (repository path → bytes), then the lock."""
    result: object                     # bootstrap.pins.update.Result
    lock_path: Path
    lock_text: str
    changed: bool
    files: dict[str, bytes] = field(default_factory=dict)


def plan_update(repo: Path, pinned: Pinned, fetch: Callable, sources=None, verifier=None,
                platforms: Sequence[str] = (), extra_plugins: Sequence[str] = (), prune: bool = False) -> Planned:
    """`groundctl pins update` up to its writes: read what `repo` needs through `fetch` (bootstrap.pins.fetch.
    fetch's signature) from `sources` (bootstrap.pins.update.Sources: GitHub and Docker Hub by default), verify
    Flux's checksums file with `verifier()` (a function returning the verifier, e.g. bootstrap.pins.cosign.
    verifier; None records it unverified). BadInput (exit 2) or GroundctlError (exit 4) naming the file and the
    fix; everything is read and checked before the caller writes anything."""
    from bootstrap.pins.update import Sources, UpdateProblem, update_pins

    if not (repo / "environments").is_dir():
        raise BadInput(f"{repo.resolve()} holds no environments/ folder. Run this in the repository that holds "
                       "environments/<env>.yaml, or point --dir at it.")
    wrong = [p for p in platforms if not is_platform(p)]
    if wrong:
        raise BadInput(f"--platform {wrong[0][:40]!r} is not a platform such as linux-amd64 or darwin-arm64.")
    existing, lock_path = read_lock(repo)
    chosen = sorted({LINUX_AMD64, *platforms, *(e.platform for e in existing if is_platform(e.platform))})
    wanted, flux_paths = repository_wants(repo, pinned, chosen)
    extras = set()
    for value in extra_plugins:
        match = re.fullmatch(r"([a-z0-9][a-z0-9-]{0,62})@v?(\d+\.\d+\.\d+)", value)
        if not match:
            raise BadInput(f"--plugin {value[:60]!r} is not NAME@VERSION such as aws@7.40.0.")
        extras |= {Want(plugin_name(match[1]), match[2], p) for p in chosen}
    if not prune:  # plugin versions recorded before (a state's older provider) stay until --prune
        extras |= {Want(e.name, e.version, e.platform) for e in existing if e.name.startswith("pulumi-resource-")}
    wanted = sorted(set(wanted) | extras)
    try:
        verify = verifier() if verifier and any(w.name == FLUX for w in wanted) else None
        result = update_pins(wanted, fetch, sources or Sources(), verify, flux_paths)
    except UpdateProblem as exc:
        raise GroundctlError(f"{exc} The lock {lock_path} was left as it was.") from None
    text = render(result.entries)
    changed = not lock_path.is_file() or render(existing) != text
    return Planned(result, lock_path, text, changed, dict(result.files))

