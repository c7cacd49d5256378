"""A spec's Flux install manifest pinned by the repository's pins lock (groundctl-pins.json, written by
`groundctl pins update`), so that no spec needs flux.manifest_sha256 or flux.manifest_path by hand.

A spec that pins no digest of its own (no flux.manifest_sha256, or the shipped example's placeholder) and names
no URL takes the digest the lock records for its Flux version's install.yaml; one that names no manifest file
also takes the checked copy `pins update` wrote into the repository (the lock's `path`), when it is there: the
file `up` installs from and `fleet manifests` mounts into the pods, which have no network. Without that copy the
flux layer downloads the release's install.yaml and checks it against the lock's digest. An explicit digest
always wins, and is checked against the file as before.

Applied to the spec's raw data before it is validated (`fill`), so every reader of the spec (`spec check`, the
offline plan, `up`, the jobs, a fleet pod whose lock is mounted beside its spec) sees one pinned spec.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from bootstrap.pins.artifacts import ANY, FLUX
from bootstrap.pins.lockfile import Entry
from bootstrap.pins.repository import read_lock, unpinned


def _flux(data: object) -> Optional[dict]:
    flux = data.get("flux") if isinstance(data, dict) else None
    version = flux.get("version") if isinstance(flux, dict) else None
    return flux if isinstance(version, str) and version.startswith("v") and unpinned(flux) else None


def entry_for(data: object, repo: Path) -> tuple[Optional[Entry], str]:
    """(the lock's Flux entry for the spec's raw data, or None; when None, what the lock lacks, in words).
    (None, "") for a spec the lock has nothing to do with (its digest pinned by hand, or a URL)."""
    flux = _flux(data)
    if flux is None:
        return None, ""
    entries, path = read_lock(repo)
    version = flux["version"].removeprefix("v")
    entry = next((e for e in entries if e.name == FLUX and e.version == version and e.platform == ANY), None)
    if entry is not None:
        return entry, ""
    if not entries and not path.is_file():
        return None, f"{path} does not exist"
    held = sorted(e.version for e in entries if e.name == FLUX)
    return None, (f"{path} records Flux {', '.join(held)}'s install.yaml, not {version}'s" if held else
                  f"{path} records no Flux install.yaml")


def fill(data: object, repo: Path) -> tuple[object, str]:
    """(the spec's raw data with the lock's digest, and its checked copy where the spec names no file; what the
    lock lacks for a spec left unpinned, "" otherwise). The data is not changed in place."""
    entry, lacking = entry_for(data, repo)
    if entry is None:
        return data, lacking
    flux = dict(data["flux"], manifest_sha256=entry.sha256)
    if flux.get("manifest_path") is None and entry.path and (repo / entry.path).is_file():
        flux["manifest_path"] = entry.path
    return dict(data, flux=flux), ""


def copy_path(data: object, repo: Path) -> Optional[str]:
    """The repository path of the checked install.yaml the lock names for a spec that names no manifest file
    (what a fleet pod mounts, with the lock); None otherwise."""
    flux = _flux(data)
    if flux is None or flux.get("manifest_path") is not None:
        return None
    entry, _ = entry_for(data, repo)
    return entry.path if entry is not None and entry.path else None

