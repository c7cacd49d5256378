"""The Flux install manifest's pin: its bytes (a local file or a URL, bounded) and their sha256 against the
one the spec records. Shared by the flux program, which checks right before it applies (so a by-hand
`pulumi up` is checked too), and by groundctl, which checks a local file before every run and says so in
the same words.
"""

from __future__ import annotations

import hashlib
import os
import stat
import urllib.request

RELEASE_URL = "https://github.com/fluxcd/flux2/releases/download/{version}/install.yaml"
MAX_MANIFEST_BYTES = 32 << 20  # a Flux release's install.yaml (every controller and CRD) is a few MiB
DOWNLOAD_TIMEOUT_SECONDS = 60.0


def is_url(source: str) -> bool:
    return source.startswith(("https://", "http://"))


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def mismatch(source: str, expected: str, actual: str) -> str:
    """What a manifest whose digest is not the pinned one is told, naming both digests."""
    return (f"the Flux install manifest {source} has sha256 {actual}, but flux.manifest_sha256 pins {expected}; "
            "nothing was applied. If you meant to change the Flux version, record the digest Flux publishes for "
            "that release's install.yaml (its flux_<version>_checksums.txt); if not, the file is not the release "
            "you pinned: find out why before you use it")


def read_manifest(source: str, *, timeout: float = DOWNLOAD_TIMEOUT_SECONDS) -> bytes:
    """The manifest's bytes, at most MAX_MANIFEST_BYTES: downloaded once for a URL (each read bounded by
    `timeout`), read from a regular file otherwise (a FIFO or device is refused before it is opened).
    Raises ValueError saying why not."""
    try:
        if is_url(source):
            with urllib.request.urlopen(source, timeout=timeout) as response:  # noqa: S310 - http(s) only
                data = response.read(MAX_MANIFEST_BYTES + 1)
        else:
            st = os.stat(source)
            if not stat.S_ISREG(st.st_mode):
                raise ValueError(f"the Flux install manifest {source} is not a regular file")
            fd = os.open(source, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                data = fh.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"the Flux install manifest {source} cannot be read ({exc})") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise ValueError(f"the Flux install manifest {source} is over the {MAX_MANIFEST_BYTES:,}-byte limit")
    return data


def program_source(source: str, program_dir: str) -> str:
    """Where the program reads `source` itself: a URL or an absolute path as given, a relative path against
    the program's folder, where the Kubernetes provider (started there: Pulumi's pwd) reads it too."""
    return source if is_url(source) or os.path.isabs(source) else os.path.join(program_dir, source)


def verify(source: str, expected: str, *, read=read_manifest) -> None:
    """ValueError unless the bytes at `source` have the sha256 `expected` (lowercase hex)."""
    actual = sha256_hex(read(source))
    if actual != expected.lower():
        raise ValueError(mismatch(source, expected.lower(), actual))
