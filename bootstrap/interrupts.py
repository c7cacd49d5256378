"""Ctrl-C and SIGTERM, turned into one KeyboardInterrupt at a moment where nothing is half-written.

The front door installs `on_signal` for SIGINT and SIGTERM (a cancelled CI job, an evicted pod). Code
that must not be cut in two (taking the lock between its conditional write and its read-back,
releasing it, closing the run record) runs inside `shielded()`: a signal that arrives there is held
and raised as soon as the section ends, when the caller can clean up with its `finally` blocks.
Without the handler installed (a library caller, a test), `shielded()` changes nothing.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

_depth = 0
_pending: Optional[int] = None
received = False  # a signal came: whatever fails after it failed because of it, not because of a bug


def on_signal(signum: int, frame) -> None:
    global _pending, received
    received = True
    if _depth:
        _pending = signum
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def shielded() -> Iterator[None]:
    global _depth, _pending
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers only ever run in the main thread
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _pending is not None:
            signum, _pending = _pending, None
            raise KeyboardInterrupt(signal.Signals(signum).name)


def install() -> None:
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
