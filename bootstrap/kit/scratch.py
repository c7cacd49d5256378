"""The writable folder for temporary files that every engine run needs, checked before the run writes anything.

Pulumi, its plugins and groundctl's run folder keep their temporary files in `TMPDIR`, else /tmp (Go's
os.TempDir, Python's first choice). In a container started with `--read-only`, or a pod whose /tmp is not a
volume, there is none: Python then falls back to the working directory or fails deep inside a step
("No usable temporary directory"), and Pulumi fails on its own. Both become one line, exit 4, naming the
folder and how to provide it.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable, Mapping, Optional

from bootstrap.kit.errors import GroundctlError

DEFAULT = "/tmp"
HOW = ("Set TMPDIR to a writable folder, or give the default one: `docker run --read-only` needs `--tmpfs /tmp`, "
       "and a pod with a read-only root file system an emptyDir volume mounted at /tmp (as the CronJobs "
       "`groundctl fleet manifests` writes have)")


class NoScratchFolder(GroundctlError):
    """No writable folder for temporary files: a missing prerequisite of the machine, not of the input."""

    exit_code = 4


def folder_of(environ: Mapping[str, str]) -> tuple[str, str]:
    """The folder temporary files go to, and where that choice comes from."""
    named = environ.get("TMPDIR", "")
    return (named, "TMPDIR names it") if named else (DEFAULT, "the default: TMPDIR is unset")


def _probe(folder: str) -> Optional[str]:
    """None when a private folder can be made and removed in `folder`; otherwise why not."""
    if not os.path.isdir(folder):
        return "does not exist" if not os.path.exists(folder) else "is not a folder"
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".groundctl-probe-", dir=folder))
    except OSError as exc:
        return f"cannot be written ({exc.strerror or type(exc).__name__})"
    return None


def message(folder: str, source: str, why: str) -> str:
    return f"groundctl needs a writable folder for temporary files, and {folder} ({source}) {why}. {HOW}."


def require_scratch(environ: Mapping[str, str] = os.environ,
                    probe: Callable[[str], Optional[str]] = _probe) -> str:
    """The writable folder for temporary files; NoScratchFolder (exit 4) when there is none."""
    folder, source = folder_of(environ)
    why = probe(folder)
    if why:
        raise NoScratchFolder(message(folder, source, why))
    return folder


def from_exception(exc: BaseException, environ: Mapping[str, str] = os.environ) -> Optional[NoScratchFolder]:
    """The error to report for Python's own "No usable temporary directory" (tempfile found none), else None."""
    text = getattr(exc, "strerror", None) or ""
    if not (isinstance(exc, FileNotFoundError) and text.startswith("No usable temporary directory")):
        return None
    folder, source = folder_of(environ)
    return NoScratchFolder(message(folder, source, "cannot be used, nor can any fallback Python tried"))
