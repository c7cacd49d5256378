"""A publisher's checksums file (goreleaser's `sha256sum` format: '<64 hex>  <file name>' per line), read as
untrusted: bounded, printable ASCII only, every line well-formed. Pure."""

from __future__ import annotations

import re

MAX_CHECKSUMS_BYTES = 256 * 1024  # pulumi/pulumi's, the largest (every platform's archives and SDKs), is ~5 KiB
_LINE = re.compile(r"(?P<sha>[0-9a-f]{64}) [ *](?P<file>[A-Za-z0-9._+-][A-Za-z0-9._+/-]{0,254})")


class ChecksumsProblem(ValueError):
    pass


def parse(data: bytes, source: str) -> dict[str, str]:
    """file name → sha256 of a checksums file's bytes; ChecksumsProblem naming `source` and what is wrong."""
    if len(data) > MAX_CHECKSUMS_BYTES:
        raise ChecksumsProblem(f"{source} is over the {MAX_CHECKSUMS_BYTES:,}-byte limit of a checksums file")
    bad = next((i for i, b in enumerate(data) if b not in (9, 10, 13) and not 32 <= b < 127), None)
    if bad is not None:
        raise ChecksumsProblem(f"{source} holds a control or non-ASCII byte (0x{data[bad]:02x} at offset {bad}), "
                               "which no checksums file does")
    found: dict[str, str] = {}
    for number, line in enumerate(data.decode("ascii").splitlines(), 1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line.rstrip("\r"))
        if not match:
            raise ChecksumsProblem(f"{source} line {number} is not '<sha256>  <file name>': {line[:80]!r}")
        if found.get(match["file"], match["sha"]) != match["sha"]:
            raise ChecksumsProblem(f"{source} lists {match['file']} twice with different digests")
        found[match["file"]] = match["sha"]
    if not found:
        raise ChecksumsProblem(f"{source} lists no file")
    return found
