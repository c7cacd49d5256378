"""The embedded AWS emulator for the `local` target: a moto server on a free loopback port.

It speaks the AWS wire protocol, so the same boto3 and Pulumi provider code runs against it as
against AWS. It is started in-process for the life of one command, or kept running by
`groundctl emulator start` for several.
"""

from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Iterator

from bootstrap.aws.objectstore import ATOMIC_WRITES_HEADER, ATOMIC_WRITES_VALUE
from bootstrap.kit.errors import BadInput, EngineError

EMULATOR_ACCOUNT_ID = "123456789012"  # moto's fixed account


def _list_versions_without_copying_bodies() -> None:
    """Make moto's ListObjectVersions copy each stored version's metadata instead of its whole body.

    moto (5.x) deep-copies every version of the bucket, bodies included, for each ListObjectVersions
    page, only so that it can mark the copies latest or not; and every copy stays in its model
    registry for good. A bucket of 500 states of 700 KB thus costs 350 MB and seconds per page, and a
    long-running emulator grows without end, where S3 answers a page in milliseconds. The copies made
    here share the stored version's body (the listing reads only metadata), are not registered, and
    never close the body they share. The answer is the same, page for page.

    It also copies (and sorts) every key of the bucket for each page, whatever the prefix asked for, so a
    listing's cost grew with the whole bucket: the keys outside the page's prefix, which moto drops after
    sorting anyway, are left out of the copy (the prefix is the request's, kept per server thread).
    """
    import copy as std_copy
    import functools
    import inspect
    import threading

    import moto.s3.models as s3_models

    if getattr(s3_models.copy, "groundctl_listing", False):
        return

    class ListedVersion(s3_models.FakeKey):
        __module__ = "moto.s3.groundctl_listing"

        def __new__(cls, *args, **kwargs):  # not BaseModel.__new__: a listing's copy is not a stored object
            return object.__new__(cls)

        def dispose(self, garbage: bool = False) -> None:
            pass  # the body belongs to the stored version

        def __del__(self) -> None:
            pass

    def listing_copy(version):
        cls = ListedVersion if isinstance(version, s3_models.FakeKey) else type(version)
        dup = object.__new__(cls)
        dup.__dict__.update(version.__dict__)
        return dup

    class CopyForListings:
        groundctl_listing = True
        copy = staticmethod(std_copy.copy)

        @staticmethod
        def deepcopy(value, memo=None):
            # moto.s3.models calls copy.deepcopy only on a key's list of versions while listing them.
            if isinstance(value, list) and all(isinstance(v, (s3_models.FakeKey, s3_models.FakeDeleteMarker))
                                               for v in value):
                prefix = getattr(listing, "prefix", "")
                return [listing_copy(v) for v in value if v.name.startswith(prefix)]
            return std_copy.deepcopy(value, memo)

        def __getattr__(self, name):
            return getattr(std_copy, name)

    listing = threading.local()
    list_versions = s3_models.S3Backend.list_object_versions

    signature = inspect.signature(list_versions)

    @functools.wraps(list_versions)
    def list_object_versions(*args, **kwargs):
        listing.prefix = signature.bind(*args, **kwargs).arguments.get("prefix") or ""
        try:
            return list_versions(*args, **kwargs)
        finally:
            listing.prefix = ""

    s3_models.copy = CopyForListings()
    s3_models.S3Backend.list_object_versions = list_object_versions


def _list_service_folders_once() -> None:
    """Make moto's server list its own service folders once, not on every request.

    moto (5.x) routes each request by asking whether its Host header names a service, and answers that by
    listing moto's package folder and stat-ing each of its ~180 entries: seeding the fleet status tests' 50
    environments (~2,000 S3 calls, client and server in one process) took a quarter less CPU without it. The
    folder does not change while the process runs; the answer is the same.
    """
    import moto.backends as backends

    if getattr(backends.list_of_moto_modules, "groundctl_once", False):
        return
    folders = tuple(backends.list_of_moto_modules())

    def list_of_moto_modules():
        return iter(folders)

    list_of_moto_modules.groundctl_once = True
    backends.list_of_moto_modules = list_of_moto_modules


# Every answer of this emulator carries the mark the object store trusts (ATOMIC_WRITES_HEADER): its writes run
# one at a time, so a conditional write (If-None-Match, If-Match) is checked and stored with no other write in
# between, as S3 does it. moto's server alone checks and stores in separate steps on concurrent threads: two
# writers can both be told they created an object.


def _writes_one_at_a_time(app):
    """The WSGI app with its S3 writes (PUT, DELETE, a multipart completion or a multi-object delete) run under one
    lock, and every answer marked so (ATOMIC_WRITES_HEADER). Reads, and the other services' POSTs (one of which
    may build a region's backends for half a minute), are not held up by it."""
    lock = threading.Lock()

    def serve(environ, start_response):
        def marked(status, headers, exc_info=None):
            return start_response(status, [*headers, (ATOMIC_WRITES_HEADER, ATOMIC_WRITES_VALUE)], exc_info)

        method, query = environ.get("REQUEST_METHOD", ""), environ.get("QUERY_STRING", "")
        writes = method in ("PUT", "DELETE") or (method == "POST" and ("uploadId=" in query or "delete" in query))
        if not writes:
            return app(environ, marked)
        with lock:
            return app(environ, marked)
    return serve


class Emulator:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, verbose: bool = False):
        try:
            from moto.server import DomainDispatcherApplication, create_backend_app
            from werkzeug.serving import make_server
        except ImportError:
            raise EngineError(
                "The local target needs the AWS emulator, which is not installed. Install it with "
                "`python -m pip install 'moto[server]'` (it is part of the `test` extra) and re-run."
            ) from None
        _list_versions_without_copying_bodies()
        _list_service_folders_once()
        app = _writes_one_at_a_time(DomainDispatcherApplication(create_backend_app))
        self._serve = lambda: make_server(host, port, app, threaded=True)
        self._host, self._port, self._verbose = host, port, verbose
        self._server = None
        self._thread: threading.Thread | None = None
        self.endpoint_url: str | None = None

    def start(self) -> str:
        if not self._verbose:
            # The server logs every request on stderr; that would bury groundctl's own output.
            logging.getLogger("werkzeug").setLevel(logging.ERROR)
        # The socket is bound here, in the caller's thread, not in the serving one (as moto's ThreadedMotoServer
        # does, while its starter waits without a deadline): a busy port is an error at once, and a Ctrl-C at any
        # moment leaves no server or one that stop() can end (moto's stop joined a thread that went on to serve).
        try:
            self._server = self._serve()
        except OSError as exc:
            raise BadInput(
                f"The emulator cannot listen on {self._host}:{self._port} ({exc.strerror or exc}). Pick another "
                "port with --port, or leave it out for a free one."
            ) from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="aws-emulator", daemon=True)
        self._thread.start()
        host, port = self._server.server_address[:2]
        self.endpoint_url = f"http://{host}:{port}"
        return self.endpoint_url

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        if thread is not None and thread.is_alive():
            server.shutdown()  # returns within the server's poll interval, even before serve_forever has begun
            thread.join(timeout=30)
        server.server_close()


@contextmanager
def running_emulator(port: int = 0) -> Iterator[str]:
    emu = Emulator(port=port)
    endpoint = emu.start()
    try:
        yield endpoint
    finally:
        emu.stop()
