"""A call's deadline, on whichever thread the call runs.

A socket timeout bounds each read, not a whole answer: an endpoint that drips a byte a second never
trips one. A signal could cut the main thread only, and groundctl reads in worker threads too (the
ledger pool, the version read-ahead, the fleet pool, the lock heartbeat). So every connection an
AWS client sends on is enlisted with the call in progress on its thread, and one watchdog thread
shuts the connections of any call whose deadline passes: the read blocked on it returns at once and
the call fails, and the caller (`retry_transient`) sees `cut` and reports the deadline.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional


class Cut(BaseException):
    # A BaseException, so no `except Exception` between the connection and the caller swallows it.
    pass


class Call:
    """One attempt of one call: when it must have ended, and what it sends on."""

    __slots__ = ("ends", "conns", "cut", "where")

    def __init__(self, ends: float):
        self.ends = ends
        self.conns: list = []
        self.cut = False
        self.where: Optional[str] = None  # the endpoint it talked to, for the message


class _Watchdog:
    def __init__(self):
        self._cond = threading.Condition()
        self._calls: set[Call] = set()
        self._thread: Optional[threading.Thread] = None

    def watch(self, call: Call) -> None:
        with self._cond:
            self._calls.add(call)
            if self._thread is None or not self._thread.is_alive():  # first use, or a forked child
                # A daemon: the process never waits for it at exit, and it never waits on the network.
                self._thread = threading.Thread(target=self._run, name="cloud-deadline", daemon=True)
                self._thread.start()
            self._cond.notify()

    def release(self, call: Call) -> None:
        with self._cond:
            self._calls.discard(call)

    def enlist(self, call: Call, conn) -> None:
        with self._cond:
            if call.cut:
                raise Cut()  # the deadline passed before this request was sent: do not send it
            # The connection is this call's until another request on it enlists it: a pooled connection goes back
            # to the pool when its answer is read, and may then carry another thread's call, which this call's
            # deadline must never cut.
            conn.groundctl_call = call
            call.conns.append(conn)
            host, port = getattr(conn, "host", None), getattr(conn, "port", None)
            if host:
                call.where = f"https://{host}" if port in (None, 443) else f"http://{host}:{port}"

    def disown(self, conn) -> None:
        with self._cond:
            conn.groundctl_call = None

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for call in [c for c in self._calls if c.ends <= now]:
                    self._calls.discard(call)
                    call.cut = True
                    for conn in call.conns:
                        if getattr(conn, "groundctl_call", None) is call:
                            _shut(conn)
                nearest = min((c.ends for c in self._calls), default=None)
                self._cond.wait(None if nearest is None else max(0.01, nearest - now))


def _shut(conn) -> None:
    sock = getattr(conn, "sock", None)
    if sock is None:
        return
    try:
        # The plain socket's shutdown, also for TLS: it wakes a read blocked in another thread (close would not).
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


WATCHDOG = _Watchdog()
_local = threading.local()


@contextmanager
def bounded(ends: float) -> Iterator[Call]:
    """Run the body as one attempt that must end by `ends` (time.monotonic()); `call.cut` says it was cut."""
    call = Call(ends)
    outer = getattr(_local, "call", None)
    _local.call = call
    WATCHDOG.watch(call)
    try:
        yield call
    finally:
        WATCHDOG.release(call)
        _local.call = outer


def _enlisting(base):
    class Enlisting(base):
        def request(self, *args, **kwargs):
            call = getattr(_local, "call", None)
            if call is not None:
                WATCHDOG.enlist(call, self)
            elif getattr(self, "groundctl_call", None) is not None:
                WATCHDOG.disown(self)  # a request outside any bounded call: no earlier call's deadline cuts it
            return super().request(*args, **kwargs)

    Enlisting.__name__ = Enlisting.__qualname__ = f"Deadline{base.__name__}"
    return Enlisting


_POOLS: dict = {}


def deadline_aware(client) -> None:
    """Make `client`'s connections enlist with the call in progress on their thread (see `bounded`)."""
    from botocore import awsrequest

    if not _POOLS:
        for scheme, pool in (("http", awsrequest.AWSHTTPConnectionPool), ("https", awsrequest.AWSHTTPSConnectionPool)):
            _POOLS[scheme] = type(f"Deadline{pool.__name__}", (pool,), {"ConnectionCls": _enlisting(pool.ConnectionCls)})
    # botocore's session shares this dict with every pool manager it makes (direct and through a proxy).
    classes = client._endpoint.http_session._pool_classes_by_scheme
    classes.update(_POOLS)
