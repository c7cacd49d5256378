"""Reading a file the operator names (the passphrase file, the Flux install manifest, a spec, a state file, a plan
folder's files, the files the `ci` commands are given): its type and size checked before it is opened, and the
whole read under a deadline. The one way product code reads such a file (tests/test_user_files_structural.py).

A path can name something that is not a file: a FIFO blocks `open()` until a writer comes, a device such as
/dev/zero or /dev/urandom never ends, and a file on a hung network mount blocks `stat()` itself. Each would
make a run wait forever, so the checks and the read run on a daemon thread and the caller waits for it only
until the deadline: past it, the thread is left behind (nothing joins it) and the caller gets exit 2 naming
the file. A FIFO is refused by `stat()` before any `open()`, and the `open()` is non-blocking besides, so a
path swapped for a FIFO between the two checks cannot block it either.
"""

from __future__ import annotations

import os
import stat
import threading
from typing import Callable

from bootstrap.kit.errors import BadInput

DEFAULT_DEADLINE_SECONDS = 10.0

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class UnusableFile(BadInput):
    """A named file that is not a regular, readable file within its size limit; `reason` says which, and
    `missing` whether there is no file at all (a caller for which that is an answer can tell it apart)."""

    def __init__(self, path: str, what: str, reason: str, fix: str, missing: bool = False):
        self.path = path
        self.what = what
        self.reason = reason
        self.missing = missing
        super().__init__(f"{what} {path!r} cannot be read: {reason}. {fix}")


def kind_of(mode: int) -> str:
    """What a file of this `st_mode` is, in words ("a FIFO (named pipe)", …); "a regular file" for one."""
    return next((words for test, words in _KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode)
                else "not a regular file")


def _read(path: str, max_bytes: int, follow_symlinks: bool = True) -> bytes:
    """Checks, then the read; raises ValueError (the reason) or OSError."""
    st = os.stat(path, follow_symlinks=follow_symlinks)
    if stat.S_ISLNK(st.st_mode):
        raise ValueError("it is a symbolic link; name the file itself")
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"it is {kind_of(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise ValueError(f"it is {st.st_size:,} bytes, over the {max_bytes:,}-byte limit")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags if follow_symlinks else flags | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as fh:
        opened = os.fstat(fh.fileno())
        if not stat.S_ISREG(opened.st_mode):  # swapped after the check
            raise ValueError(f"it is {kind_of(opened.st_mode)}, not a regular file")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"it grew past the {max_bytes:,}-byte limit while it was read")
    return data


def read_user_file(path: str, *, what: str, max_bytes: int, fix: str, follow_symlinks: bool = True,
                   deadline: float = DEFAULT_DEADLINE_SECONDS,
                   reader: Callable[[str, int, bool], bytes] = _read) -> bytes:
    """The bytes of the regular file at `path`, at most `max_bytes`, read within `deadline` seconds.

    Anything else raises `UnusableFile` (exit 2): "`what` `path` cannot be read: <reason>. `fix`". Without
    `follow_symlinks`, a symbolic link is refused too. `reader` is the seam the tests hang."""
    box: dict = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["data"] = reader(path, max_bytes, follow_symlinks)
        except ValueError as exc:
            box["reason"] = str(exc)
        except OSError as exc:
            box["reason"] = exc.strerror or type(exc).__name__
            box["missing"] = isinstance(exc, FileNotFoundError)
        finally:
            done.set()

    threading.Thread(target=work, name="user-file", daemon=True).start()
    if not done.wait(deadline):
        raise UnusableFile(path, what, f"it was not read within {deadline:g} s (a hung network mount, or a special "
                                       "file that never answers)", fix)
    if "reason" in box:
        raise UnusableFile(path, what, box["reason"], fix, box.get("missing", False))
    return box["data"]
