"""`pins update` as a plain function: for each wanted artifact, read its publisher's checksums file (through a
mirror when one is given), verify that file's signature where the publisher signs it, take the entry for the
file groundctl installs, and return the lock's entries; for Flux, the checked install.yaml to write where the
specs name it. Every read goes through the `fetch` passed in (bootstrap.pins.fetch.fetch in the CLI), so
`groundctl init` and the tests call it over their own. Nothing is written here: the caller writes only after
everything was read and checked.

Signatures: Flux signs its checksums file with cosign (keyless, GitHub's OIDC issuer: the README's
`cosign verify-blob`); `verify_flux` is given the checksums file, its .sig and its .pem and returns how it was
checked. pulumi/pulumi's and the providers' goreleaser configurations sign nothing (.goreleaser.yml has no
`signs`), so their checksums files are trusted as served over TLS from the release, and the lock says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Optional, Sequence

from bootstrap.pins import checksums as checksums_file
from bootstrap.pins.artifacts import BASE_IMAGE, DOCKER_HUB, FLUX, GITHUB, Want
from bootstrap.pins.fetch import Answer, FetchProblem
from bootstrap.pins.lockfile import Entry
from bootstrap.pins.registry import RegistryProblem, image_digest
from stacks.common.manifest import MAX_MANIFEST_BYTES

UNSIGNED = "unsigned by its publisher; read over TLS from its release"
MAX_SIGNATURE_BYTES = 64 * 1024


class UpdateProblem(Exception):
    """Why the lock cannot be written; `missing` when a prerequisite (cosign) is absent (exit 4), else the
    publisher's answer is unusable (exit 4 too: nothing the adopter typed is wrong)."""


@dataclass(frozen=True)
class Sources:
    release_base: str = GITHUB      # where release files are read: GitHub, or a mirror with the same paths
    registry: str = DOCKER_HUB      # where the base image's manifest is read


@dataclass
class Result:
    entries: list[Entry]
    files: dict[str, bytes] = field(default_factory=dict)   # repository path → checked bytes (Flux copies)
    read: list[str] = field(default_factory=list)            # every URL read, in order


VerifyFlux = Callable[[Want, bytes, bytes, bytes], str]


def _get(fetch: Callable[..., Answer], url: str, max_bytes: int, read: list[str], what: str) -> bytes:
    try:
        answer = fetch(url, max_bytes=max_bytes)
    except FetchProblem as exc:
        raise UpdateProblem(f"{what} could not be read from {exc.url}: {exc.reason}. Check that the release base "
                            "(--release-mirror or GROUNDCTL_RELEASE_MIRROR; GitHub by default) is reachable and "
                            "serves GitHub's release paths, then run again.") from None
    read.append(url)
    return answer.body


def update_pins(wanted: Sequence[Want], fetch: Callable[..., Answer], sources: Sources = Sources(),
                verify_flux: Optional[VerifyFlux] = None,
                flux_paths: Mapping[str, Sequence[str]] = {}) -> Result:
    """The lock's entries for `wanted`; UpdateProblem naming the file and what is wrong.

    `verify_flux(want, checksums, sig, pem)` returns the lock's note on the signature, raising UpdateProblem when
    it does not verify; None leaves Flux's signature unchecked, which the lock records. `flux_paths` maps a Flux
    version to the repository paths its install.yaml is written to, the one the lock records first."""
    result = Result([])
    parsed: dict[str, dict[str, str]] = {}
    signatures: dict[str, str] = {}
    for want in wanted:
        if want.name == BASE_IMAGE:
            try:
                digest, url = image_digest(want.version, sources.registry, fetch)
            except (FetchProblem, RegistryProblem) as exc:
                raise UpdateProblem(f"the digest of the base image {want.version} could not be read: {exc}. Check "
                                    "that the registry (--registry-mirror or GROUNDCTL_REGISTRY_MIRROR; Docker Hub by "
                                    "default) is reachable, or pass --no-image when no image is built.") from None
            result.read.append(url)
            result.entries.append(Entry(want.name, want.version, want.platform, want.file, digest, url))
            continue
        url = want.checksums_url(sources.release_base)
        if url not in parsed:
            raw = _get(fetch, url, checksums_file.MAX_CHECKSUMS_BYTES + 1, result.read, "The checksums file")
            try:
                parsed[url] = checksums_file.parse(raw, url)
            except checksums_file.ChecksumsProblem as exc:
                raise UpdateProblem(f"The checksums file cannot be used: {exc}. Nothing was written.") from None
            signatures[url] = UNSIGNED
            if want.name == FLUX and verify_flux is None:
                signatures[url] = "not verified (--no-verify-signatures)"
            elif want.name == FLUX:
                sig = _get(fetch, f"{url}.sig", MAX_SIGNATURE_BYTES, result.read, "Its signature")
                pem = _get(fetch, f"{url}.pem", MAX_SIGNATURE_BYTES, result.read, "Its certificate")
                signatures[url] = verify_flux(want, raw, sig, pem)
        signature = signatures[url]
        digest = parsed[url].get(want.file)
        if digest is None:
            raise UpdateProblem(f"The checksums file {url} has no line for {want.file}, the file groundctl installs "
                                f"for {want.label()}: the release may not publish it (check the version and "
                                "platform) or the mirror serves another file. Nothing was written.")
        file_url = want.url(sources.release_base)
        entry = Entry(want.name, want.version, want.platform, want.file, digest, file_url, url, signature)
        if want.name == FLUX:
            paths = list(dict.fromkeys(flux_paths.get(want.version, ())))  # the first is the lock's `path`
            if paths:
                body = _get(fetch, file_url, MAX_MANIFEST_BYTES, result.read, "Flux's install.yaml")
                actual = hashlib.sha256(body).hexdigest()
                if actual != digest:
                    raise UpdateProblem(f"{file_url} has sha256 {actual}, not the {digest} its checksums file {url} "
                                        "records: the mirror serves another file. Nothing was written.")
                result.files.update({p: body for p in paths})
                entry = replace(entry, path=paths[0])
        result.entries.append(entry)
    return result
