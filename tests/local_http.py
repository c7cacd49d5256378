"""A test's HTTP server on a free loopback port, served on a daemon thread while the context lasts."""

from __future__ import annotations

import contextlib
import http.server
import threading
from typing import Iterator


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    quiet = False

    def handle_error(self, request, client_address):
        if not self.quiet:
            super().handle_error(request, client_address)


@contextlib.contextmanager
def serving(handler_class, *, quiet_errors: bool = False) -> Iterator[str]:
    """The base URL (http://127.0.0.1:<port>) of `handler_class` served until the context ends. `quiet_errors`:
    a client that stops reading (a refused large file) is the test's point, not a traceback on stderr."""
    server = _Server(("127.0.0.1", 0), handler_class)
    server.quiet = quiet_errors
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
