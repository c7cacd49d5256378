"""Ctrl-C and SIGTERM, turned into one KeyboardInterrupt at a moment where nothing is half-written.

The front door installs `on_signal` for SIGINT and SIGTERM (a cancelled CI job, an evicted pod). Code
that must not be cut in two (taking the lock between its conditional write and its read-back,
releasing it, closing the run record) runs inside `shielded()`: a signal that arrives there is held
and raised as soon as the section ends, when the caller can clean up with its `finally` blocks.
Without the handler installed (a library caller, a test), `shielded()` changes nothing.

Python runs a signal handler between any two bytecodes, also inside a weakref callback or a `__del__`
(importlib's module-lock clean-up is one), where a raised exception is printed as "Exception ignored"
and dropped: the interrupt would be lost and `emulator start` would serve on. The unraisable hook sends
such a signal again, so it is raised where the run can unwind.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

_depth = 0
_pending: Optional[int] = None
received = False  # a signal came: whatever fails after it failed because of it, not because of a bug
_last: Optional[int] = None


def on_signal(signum: int, frame) -> None:
    global _pending, received, _last
    received = True
    _last = signum
    if frame is not None and frame.f_code is _redeliver.__code__:
        _send_again(signum)  # raised here it would be dropped as well
        return
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


def _send_again(signum: int) -> None:
    # From another thread: `signal.raise_signal` runs the handler at once, inside the hook, where its
    # exception would be dropped too. Sent to the main thread itself, so that a wait it is blocked in
    # (`emulator start`'s) is cut; a signal taken by another thread would leave that wait asleep.
    _thread.start_new_thread(signal.pthread_kill, (threading.main_thread().ident, signum))


def wait_for_signal() -> None:
    """Block until SIGINT or SIGTERM, then raise KeyboardInterrupt. Waits in short slices: a signal whose
    exception was lost on the way (see above) still ends the wait, by the flag its handler set."""
    idle = threading.Event()
    while not received:
        idle.wait(0.5)
    raise KeyboardInterrupt(signal.Signals(_last).name if _last else "signal")


def _redeliver(unraisable) -> None:
    if unraisable.exc_type is KeyboardInterrupt and _last is not None:
        _send_again(_last)  # raised into a callback that swallows it: raised again where the run unwinds
        return
    sys.__unraisablehook__(unraisable)


def install() -> None:
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    sys.unraisablehook = _redeliver
