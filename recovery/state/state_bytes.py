"""A Pulumi state's bytes, bounded: read from disk, decompressed (gzip or zstd, by magic bytes) and decoded
to JSON, each step capped so that no file, pipe, device or decompression bomb takes the operator's machine
down with it.

Whatever the bytes are, this module either returns them (or their JSON) or raises `NotAState` (or
`BadInput` for a path that is not a readable regular file); it never lets a Python exception escape.
`recovery.state.state_parse` turns the JSON into a `StateDoc`.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Any

import zstandard

from bootstrap.kit.errors import BadInput
from bootstrap.kit.untrusted import decode_json
from bootstrap.kit.user_files import UnusableFile, read_user_file

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# A decompression bomb must not take the operator's machine down with it.
MAX_STATE_BYTES = 1 << 30


class NotAState(BadInput):
    """The bytes are not a Pulumi state (not decodable, not JSON, or not a checkpoint/export)."""

    def __init__(self, source: str, reason: str):
        self.source = source
        self.reason = reason
        super().__init__(
            f"{source} is not a readable Pulumi state: {reason}. Give a checkpoint from "
            "`.pulumi/stacks/<project>/<stack>.json[.gz|.zst]`, a history or backup copy of one, or the "
            "output of `pulumi stack export`."
        )


def _read_capped(reader, source: str, limit: int) -> bytes:
    chunks, total = [], 0
    while True:
        chunk = reader.read(min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise NotAState(source, f"it decompresses to more than {limit} bytes, which no state is")


def decompress(raw: bytes, source: str = "the state", limit: int = MAX_STATE_BYTES) -> tuple[bytes, str]:
    """The JSON bytes inside `raw` and the compression found by its magic bytes."""
    try:
        if raw.startswith(GZIP_MAGIC):
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
                return _read_capped(f, source, limit), "gzip"
        if raw.startswith(ZSTD_MAGIC):
            reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True)
            return _read_capped(reader, source, limit), "zstd"
    except NotAState:
        raise
    except (OSError, EOFError, zlib.error, zstandard.ZstdError, ValueError) as exc:
        kind = "gzip" if raw.startswith(GZIP_MAGIC) else "zstd"
        raise NotAState(source, f"it starts like a {kind} file but does not decompress ({exc})") from None
    return raw, "none"


def _drop_inputs(obj: dict) -> dict:
    # A resource's inputs are never read here and are often as large as its outputs: dropping them
    # while the JSON is decoded keeps peak memory near 3.5x the file instead of 4.5x. A StateDoc is a
    # read model; the stored bytes (not a re-serialisation) are what a restore copies.
    if "urn" in obj and "inputs" in obj:
        del obj["inputs"]
    return obj


def load_json(data: bytes, source: str, *, keep_inputs: bool = True) -> Any:
    """The JSON value in `data`, everything kept unless `keep_inputs=False`; raises `NotAState`."""
    # Go's decoder replaces invalid UTF-8 instead of failing, so Pulumi would load such a file; so do we.
    text = data.decode("utf-8", errors="replace")
    try:
        return decode_json(text, object_hook=None if keep_inputs else _drop_inputs)
    except ValueError as exc:  # syntax, NaN/Infinity, overflowing numbers, too long integers, too deep
        raise NotAState(source, f"{exc} to be a state" if "nested" in str(exc) else str(exc)) from None


def read_state_bytes(path: str | Path, limit: int = MAX_STATE_BYTES) -> bytes:
    """The bytes of a state file on disk, refused as bad input unless it is a regular file of at most `limit`
    bytes, read within the deadline of every file a user names (bootstrap.kit.user_files): a FIFO would block the
    read forever, a device such as /dev/zero never ends, and a hung mount blocks even the check."""
    p = Path(path)
    fix = "Give the path of a state file (a download, a backup or an export); save a pipe's output to a file first"
    try:
        return read_user_file(str(p), what="The state file", max_bytes=limit, fix=fix)
    except UnusableFile as exc:
        if exc.missing:
            raise BadInput(f"{p} does not exist. Give the path of a state file (a download, a backup or an "
                           "export).") from None
        raise
