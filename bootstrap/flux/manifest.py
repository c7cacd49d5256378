"""The Flux install manifest a spec names (`flux.manifest_path`) and pins (`flux.manifest_sha256`).

One base for a relative path: the repository, the folder that holds `environments/` (for a spec kept outside
an `environments/` folder, the spec's own folder). `resolve` makes the path absolute when the spec is read,
after checking that it stays inside the repository, so the offline plan's posture rule and `ci` see the same
file (the program's own folder, stacks/flux, is never a base of the spec's path). The program is told that file
relative to its own folder (`program_manifest_path`): the same words in every clone.

`manifest_problem` is what `spec check`, the offline plan and every engine run ask before the flux layer
runs: a local manifest must be a regular, readable file within MAX_MANIFEST_BYTES (read under a deadline,
`bootstrap.kit.user_files`) whose sha256 is the pinned one when one is pinned. A URL is not fetched here: the
program fetches and checks it before an update (stacks/flux/__main__.py), which is the check a by-hand
`pulumi up` passes through too; a second download here would prove only that copy.

The shipped production example pins PLACEHOLDER_SHA256, as it names a made-up account: no manifest has that
digest, so without a check of its own a URL's placeholder surfaced only when the program's download failed to
match it, after the layers before flux were applied. `spec check` and every engine run refuse it by name,
saying how to record the real one; the offline plan, which applies and downloads nothing, still shows the
example's posture.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from bootstrap.kit.errors import SpecError
from bootstrap.kit.user_files import UnusableFile, read_user_file
from bootstrap.pins.repository import PLACEHOLDER_SHA256  # environments/prod.yaml's: never the digest of any file
from stacks.common.manifest import MAX_MANIFEST_BYTES, RELEASE_URL, is_url, mismatch, sha256_hex

FIELD = "flux.manifest_path"
DIGEST_FIELD = "flux.manifest_sha256"


def repository_of(spec_file: Path) -> Path:
    """The base of the spec's relative paths: the folder holding its environments/ folder, else its own."""
    folder = spec_file.absolute().parent
    return folder.parent if folder.name == "environments" else folder


def resolve(spec, spec_file: Path):
    """`spec` with a relative manifest path made absolute against the repository; a SpecError naming the field
    when it leaves the repository (through `..` or a symbolic link)."""
    path = spec.flux.manifest_path
    if not path or is_url(path) or os.path.isabs(path):
        return spec
    base = repository_of(spec_file)
    full = os.path.normpath(base / path)
    real, real_base = os.path.realpath(full), os.path.realpath(base)
    if os.path.commonpath([real, real_base]) != real_base:
        raise SpecError(str(spec_file), [(FIELD, f"'{path}' leads to {real}, outside the repository {base}; a "
                                                 "relative path names a file inside it (or give an absolute path)")])
    return spec.model_copy(update={"flux": spec.flux.model_copy(update={"manifest_path": full})})


def program_manifest_path(path: str, program_dir: Path) -> str:
    """How the flux program is told a local manifest: relative to the program's own folder when the file is in
    the program's repository, as given otherwise (a URL; a file elsewhere, such as the image's copy). Pure.

    The program hands the path to the Kubernetes provider as the controllers' `file` input. The offline plan's
    files show that input and every update's history records the config, so an absolute path inside a clone
    made them differ from any other clone's (a CI runner's, a colleague's). (The live state does not hold it:
    the provider registers the ConfigFile component without its inputs, provider/pkg/provider/yaml/v2/
    configfile.go Construct.) The provider runs in the program's folder (Pulumi's pwd: pkg/engine/project.go
    getPwdMain; sdk/go/common/resource/plugin/plugin.go ExecPlugin sets it as the process's folder) and reads a
    relative path from there, as the program does when it checks the digest; so does a `pulumi up` run by hand
    there."""
    if is_url(path):
        return path
    real, folder = os.path.realpath(path), os.path.realpath(program_dir)
    repository = os.path.dirname(os.path.dirname(folder))  # <repository>/stacks/flux
    if os.path.commonpath([real, repository]) != repository:
        return path
    return os.path.relpath(real, folder)


def manifest_source(spec) -> str:
    """What the flux program installs from: the spec's manifest (a path or a URL) or the release's URL."""
    return spec.flux.manifest_path or RELEASE_URL.format(version=spec.flux.version)


def placeholder_text(spec, actual: Optional[str] = None) -> str:
    """What a spec pinning PLACEHOLDER_SHA256 is told: that it is one, and how to record the real digest. Pure."""
    version = spec.flux.version
    found = (f"; the file it names has sha256 {actual}, which is the one to record only once it matches that line"
             if actual else "")
    return (f"is the example's placeholder ({PLACEHOLDER_SHA256[:8]}…, 64 zeros), not the digest Flux published for "
            f"{version}'s install.yaml: no manifest has it, so the flux layer could never be applied, and the "
            "repository's pins lock (groundctl-pins.json), whose digest takes its place, does not record it: run "
            "`groundctl pins update` in the repository (it reads the release's checksums file, checks its cosign "
            "signature and records the digest), review and commit the lock; or replace the placeholder by hand "
            f"with the install.yaml line of flux_{version.lstrip('v')}_checksums.txt from "
            f"https://github.com/fluxcd/flux2/releases/download/{version}/ (check its cosign signature first), as "
            f"'Pinning the Flux install manifest' (groundctl's docs/flux-manifest.md) shows{found}")


def manifest_problem(spec, *, placeholder_ok: bool = False) -> Optional[tuple[str, str]]:
    """(field, what is wrong) for a local manifest that is not a regular readable file within the limit, or whose
    sha256 is not the pinned one, and for a pinned PLACEHOLDER_SHA256 (unless `placeholder_ok`); None when it is
    fine, or the manifest is a URL (checked where it is fetched)."""
    path = spec.flux.manifest_path
    placeholder = spec.flux.manifest_sha256 == PLACEHOLDER_SHA256 and not placeholder_ok
    if not path or is_url(path):
        return (DIGEST_FIELD, placeholder_text(spec)) if placeholder else None
    path = os.path.abspath(path)
    try:
        data = read_user_file(path, what="", fix="", max_bytes=MAX_MANIFEST_BYTES)
    except UnusableFile as exc:
        return FIELD, (f"the Flux install manifest '{path}' cannot be read: {exc.reason}; name a regular, readable "
                       "file (a relative path inside the repository, or an absolute path such as the image's copy), "
                       "or an https URL with flux.manifest_sha256")
    pinned = spec.flux.manifest_sha256
    actual = sha256_hex(data)
    if placeholder:
        return DIGEST_FIELD, placeholder_text(spec, actual)
    if pinned and actual != pinned:
        return DIGEST_FIELD, mismatch(path, pinned, actual)
    return None


def require_manifest(spec, *, placeholder_ok: bool = False) -> None:
    """SpecError (exit 2) naming the field when `manifest_problem` finds one."""
    problem = manifest_problem(spec, placeholder_ok=placeholder_ok)
    if problem:
        raise SpecError(f"the spec of '{spec.name}'", [problem])
