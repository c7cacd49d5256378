"""Where a command writes its files: checked before the command changes anything, and every write failure
reported as what it is (a full, read-only or missing destination, with the path), never as a crash.

A check makes the destination folder as the write would, and writes, syncs and removes a small probe file
there (then removes the folders it made): permission bits say nothing when groundctl runs as root, but a read-only mount, a path
under a file or a full file system all fail the probe as they would fail the real write. The probe cannot
promise room for every byte that follows, so every write is still checked on its own.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Mapping, Optional

from bootstrap.kit.errors import BadInput
from bootstrap.spec.spec_file import check_name

PROBE_BYTES = 64 * 1024  # about the size of a plan or report file: a file system without room for it is full
_WHY = {errno.ENOSPC: "the file system is full", errno.EDQUOT: "the disk quota is used up",
        errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
        errno.EPERM: "the operation is not permitted there", errno.ENOTDIR: "a part of the path is a file",
        errno.ENOENT: "a folder on the way does not exist and cannot be made",
        errno.EISDIR: "it is a folder", errno.ELOOP: "a symbolic link is in the way"}


def why(exc: OSError) -> str:
    """An OSError in the words an operator acts on."""
    return _WHY.get(exc.errno or 0, exc.strerror or type(exc).__name__)


def _refuse(flag: str, path: Path, exc: OSError, hint: str) -> BadInput:
    return BadInput(f"{flag} {path} cannot be written: {why(exc)}. {hint}")


def check_dir(out: Optional[Path], flag: str = "--out") -> None:
    """BadInput now, before any work, unless `out` is a folder a file can be written into (or can be made)."""
    if out is None:
        return
    check_name(str(out), flag)
    hint = f"Give a writable folder with {flag} (it is created when missing)."
    if out.exists() and not out.is_dir():
        raise BadInput(f"{flag} {out} is a file, not a directory. {hint}")
    try:
        _probe(out)
    except OSError as exc:
        raise _refuse(flag, out, exc, hint) from None


def check_file(out: Optional[Path], flag: str = "--out") -> None:
    """BadInput now unless a regular file can be written at `out` (its folder may be missing: it is made)."""
    if out is None:
        return
    check_name(str(out), flag)
    hint = f"Give a writable file path with {flag}."
    if out.is_symlink() or (out.exists() and not out.is_file()):
        raise BadInput(f"{flag} {out} exists and is not a regular file (a folder, a device or a link). {hint}")
    try:
        _probe(out.parent)
    except OSError as exc:
        raise _refuse(flag, out, exc, hint) from None


def _probe(folder: Path) -> None:
    """Make `folder` as the write would, write a probe file into it, then leave things as they were: the
    probe and every folder made for it are removed, so a command refused later has written nothing."""
    made = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".groundctl-probe-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(b"\0" * PROBE_BYTES)
                f.flush()
                os.fsync(f.fileno())
        finally:
            _quietly(os.unlink, name)
    finally:
        for path in made:  # deepest first
            _quietly(os.rmdir, path)


def _quietly(remove, path) -> None:
    try:
        remove(path)
    except OSError:
        pass


def write_text(path: Path, text: str, flag: str = "--out") -> None:
    """Write `path` whole or not at all: a temporary file beside it, synced, then renamed over it (a rename
    replaces a link at `path` rather than following it). A failure is BadInput naming the path and why."""
    tmp: Optional[str] = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_umask())  # what a plain open() would have made, not mkstemp's 0600
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise _refuse(flag, path, exc, f"Free space or give a writable destination with {flag}.") from None
    finally:
        if tmp is not None:
            _quietly(os.unlink, tmp)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_files(folder: Path, files: Mapping[str, str], flag: str = "--out") -> list[Path]:
    """Each name → text under `folder` (created when missing); the paths written, in order."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _refuse(flag, folder, exc, f"Give a writable folder with {flag}.") from None
    written = []
    for name, text in files.items():
        write_text(folder / name, text, flag)
        written.append(folder / name)
    return written


def symlink_on_the_way(root: Path, relative: str) -> Optional[Path]:
    """The first of `root/relative`'s own parts (below `root`) that is a symbolic link, or None: writing
    through one could land anywhere, outside the repository included."""
    here = root
    for part in Path(relative).parts:
        here = here / part
        if here.is_symlink():
            return here
    return None
