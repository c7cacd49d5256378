"""A small fault-injecting HTTP proxy on loopback, in front of the AWS emulator.

boto3 clients pointed at it see the emulator, except that a fraction of requests (10% by default)
is answered with the error AWS gives under load: S3's `503 SlowDown`, or a `Throttling` error in
the query (STS) or JSON (KMS) protocol. Part of those faults are injected *after* the request was
forwarded, so the write happened and only its response is lost: the case that makes a blind retry
of a non-idempotent call create things twice. Choices come from a seeded RNG, so a sequential
client sees the same faults on every run. The proxy is bounded: it serves at most `max_requests`
and shuts itself down after `lifetime_seconds` even if a test forgets to stop it.

Two more faults, each limited to the requests a predicate picks: a *trickle* forwards the request and
sends the answer back one byte a second (from its first byte, or from its body's), which no socket
timeout ever trips (it lasts as many seconds as the dripped part has bytes: a test that expects a
deadline to cut it drips many more bytes than the deadline has seconds); a *storm* answers every picked
request with `503 SlowDown` for a while, starting at the first request its trigger picks (a throttling
storm that begins mid-run).

Every request is logged (`log`: method, path, the X-Amz-Target header), so a test can prove what a command
wrote; and `answer(method, path, headers, body)`, when set, may answer a request itself with (status,
content type, body) instead of forwarding it: an AWS error the emulator never gives (a KMS key disabled).
"""

from __future__ import annotations

import http.client
import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "te", "trailer", "upgrade"}

S3_SLOWDOWN = (503, "application/xml",
               b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
               b"<Message>Please reduce your request rate.</Message><RequestId>faultproxy</RequestId></Error>")
QUERY_THROTTLE = (400, "text/xml",
                  b"<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded"
                  b"</Message></Error><RequestId>faultproxy</RequestId></ErrorResponse>")
JSON_THROTTLE = (400, "application/x-amz-json-1.1",
                 b'{"__type":"ThrottlingException","message":"Rate exceeded"}')


class FaultProxy:
    def __init__(self, upstream: str, *, fraction: float = 0.10, seed: int = 7, after_share: float = 0.3,
                 max_requests: int = 50_000, lifetime_seconds: float = 300.0,
                 only=None, max_faults: int | None = None, trickle=None, trickle_from: str = "head",
                 trickle_interval: float = 1.0, storm=None, storm_trigger=None, storm_seconds: float = 30.0,
                 answer=None):
        """`only(method, path, headers, body)` limits faults to matching requests; `max_faults` caps them.

        `trickle(...)` picks the requests whose answer drips a byte per `trickle_interval` (its whole
        answer with `trickle_from="head"`, its body only with "body"). `storm(...)` picks the requests
        answered 503 SlowDown for `storm_seconds` from the first request `storm_trigger(...)` picks
        (`storm` itself when no trigger is given)."""
        up = urlsplit(upstream)
        self.upstream_host, self.upstream_port = up.hostname, up.port or 80
        self.fraction = fraction
        self.after_share = after_share
        self.max_requests = max_requests
        self.lifetime_seconds = lifetime_seconds
        self.only = only
        self.max_faults = max_faults
        self.trickle = trickle
        self.trickle_from = trickle_from
        self.trickle_interval = trickle_interval
        self.storm = storm
        self.storm_trigger = storm_trigger or storm
        self.storm_seconds = storm_seconds
        self.storm_started: float | None = None  # time.monotonic() of the storm's first request
        self.answer = answer
        self.log: list[tuple[str, str, str]] = []  # (method, path, X-Amz-Target), bounded by max_requests
        self._stopped = threading.Event()
        self.stats: Counter = Counter()
        self._rng = random.Random(seed)
        self._mutex = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None
        self.endpoint_url: str | None = None

    # -- decisions -----------------------------------------------------------------------------

    def decide(self, eligible: bool = True) -> str:
        """'pass', 'before' (fail without forwarding) or 'after' (forward, then lose the response)."""
        with self._mutex:
            self.stats["requests"] += 1
            if self.stats["requests"] > self.max_requests:
                return "refuse"
            if not eligible or self._rng.random() >= self.fraction:
                return "pass"
            if self.max_faults is not None and self.stats["decided_faults"] >= self.max_faults:
                return "pass"
            self.stats["decided_faults"] += 1
            return "after" if self._rng.random() < self.after_share else "before"

    def in_storm(self, method: str, path: str, headers, body: bytes) -> bool:
        if self.storm is None:
            return False
        with self._mutex:
            if self.storm_started is None and self.storm_trigger(method, path, headers, body):
                self.storm_started = time.monotonic()
            if self.storm_started is None or time.monotonic() - self.storm_started >= self.storm_seconds:
                return False
        return bool(self.storm(method, path, headers, body))

    def end_storm(self) -> None:
        """The storm ends now, not at `storm_seconds`: for a test that has seen what it needed of it."""
        with self._mutex:
            if self.storm_started is not None:
                self.storm_seconds = min(self.storm_seconds, time.monotonic() - self.storm_started)

    @property
    def storm_over(self) -> bool:
        return self.storm_started is not None and time.monotonic() - self.storm_started >= self.storm_seconds

    @staticmethod
    def error_for(headers, body: bytes) -> tuple[int, str, bytes]:
        if headers.get("X-Amz-Target"):
            return JSON_THROTTLE
        if headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded") and b"Action=" in body:
            return QUERY_THROTTLE
        return S3_SLOWDOWN

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> str:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet: tests read `stats` instead
                pass

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    out = b""
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return out
                        out += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _send(self, status: int, headers: list[tuple[str, str]], body: bytes, length: int | None = None,
                      drip: str | None = None):
                if drip == "head":  # the status line and headers too: the client is stuck before any answer
                    self._drip(self._head_bytes(status, headers, len(body) if length is None else length) + body)
                    return
                self.send_response_only(status)  # the upstream's own Date, not a second one of ours
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body) if length is None else length))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.flush()
                    self._drip(body) if drip == "body" else self.wfile.write(body)

            @staticmethod
            def _head_bytes(status: int, headers: list[tuple[str, str]], length: int) -> bytes:
                lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, '')}"]
                lines += [f"{k}: {v}" for k, v in headers] + [f"Content-Length: {length}", "", ""]
                return "\r\n".join(lines).encode("latin-1")

            def _drip(self, data: bytes) -> None:
                with proxy._mutex:
                    proxy.stats["trickled"] += 1
                for i in range(len(data)):
                    if proxy._stopped.wait(proxy.trickle_interval):
                        return
                    try:
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                    except OSError:  # the client gave up: what this fault is for
                        self.close_connection = True
                        return

            def _fault(self, body: bytes, kind: str) -> None:
                status, ctype, payload = proxy.error_for(self.headers, body)
                with proxy._mutex:
                    proxy.stats[f"fault_{kind}"] += 1
                extra = [("x-amzn-ErrorType", "ThrottlingException")] if ctype.startswith("application/x-amz-json") else []
                self._send(status, [("Content-Type", ctype), *extra], payload)

            def _handle(self) -> None:
                body = self._body()
                with proxy._mutex:
                    if len(proxy.log) < proxy.max_requests:
                        proxy.log.append((self.command, self.path, self.headers.get("X-Amz-Target", "")))
                answered = proxy.answer(self.command, self.path, self.headers, body) if proxy.answer else None
                if answered is not None:
                    status, ctype, payload = answered
                    with proxy._mutex:
                        proxy.stats["answered"] += 1
                    self._send(status, [("Content-Type", ctype)], payload)
                    return
                if proxy.in_storm(self.command, self.path, self.headers, body):
                    self._fault(body, "storm")
                    return
                drip = proxy.trickle_from if proxy.trickle and proxy.trickle(
                    self.command, self.path, self.headers, body) else None
                verdict = proxy.decide(proxy.only is None or proxy.only(self.command, self.path, self.headers, body))
                if verdict == "refuse":
                    self._send(503, [("Content-Type", "text/plain")], b"fault proxy request budget spent")
                    return
                if verdict == "before":
                    self._fault(body, "before")
                    return
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    headers["Content-Length"] = str(len(body))
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    payload = resp.read()
                    out_headers = [(k, v) for k, v in resp.getheaders()
                                   if k.lower() not in _HOP and k.lower() != "content-length"]
                    upstream_len = resp.getheader("Content-Length")
                finally:
                    conn.close()
                with proxy._mutex:
                    proxy.stats["forwarded"] += 1
                if verdict == "after":
                    self._fault(body, "after")  # the request happened; its answer is lost
                    return
                length = int(upstream_len) if self.command == "HEAD" and upstream_len else None
                self._send(resp.status, out_headers, payload, length, drip)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="faultproxy", daemon=True).start()
        self._timer = threading.Timer(self.lifetime_seconds, self.stop)
        self._timer.daemon = True
        self._timer.start()
        host, port = self._server.server_address[:2]
        self.endpoint_url = f"http://{host}:{port}"
        return self.endpoint_url

    def stop(self) -> None:
        self._stopped.set()
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.cancel()

    @property
    def faults(self) -> int:
        return self.stats["fault_before"] + self.stats["fault_after"]

    def __enter__(self) -> "FaultProxy":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
