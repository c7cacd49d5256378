"""An in-test Kubernetes API double, for the unit tier only.

`FakeKubeApi` answers what `recovery.drills.flux_ready` asks (the Kustomization list, and the GitRepository list that explains a wait) from objects the test
sets, and can be scripted per poll: `on_poll` runs before each answer (so a test can make a
Kustomization become Ready on the third poll), and `errors` are raised first, in order. `serve_http`
puts the same double behind a loopback HTTP server that checks the bearer token, so the plain HTTP
client is exercised over a real socket.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator, Optional

from recovery.drills.flux_ready import GITREPOSITORIES_PATH, KUSTOMIZATIONS_PATH
from recovery.drills.kube_api import KubeApiError


def kustomization(name: str, *, namespace: str = "flux-system", ready: str = "True", reason: str = "ReconciliationSucceeded",
                  message: str = "Applied revision", revision: Optional[str] = "main@sha1:abc123",
                  stalled: bool = False, suspend: bool = False, generation: int = 1,
                  observed: Optional[int] = None) -> dict:
    conditions = [{"type": "Ready", "status": ready, "reason": reason, "message": message}]
    if stalled:
        conditions.append({"type": "Stalled", "status": "True", "reason": reason, "message": message})
    status: dict = {"conditions": conditions, "observedGeneration": generation if observed is None else observed}
    if revision is not None:
        status["lastAppliedRevision"] = revision
        status["lastAttemptedRevision"] = revision
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace, "generation": generation},
            "spec": {"suspend": suspend}, "status": status}


class FakeKubeApi:
    def __init__(self, items: Optional[list[dict]] = None):
        self.items: list[dict] = list(items or [])
        self.errors: list[Exception] = []
        self.on_poll: Optional[Callable[[int], None]] = None
        self.paths: list[str] = []
        self.sources: list[dict] = []                   # GitRepositories

    def get_json(self, path: str) -> dict:
        self.paths.append(path)
        if path.split("?", 1)[0] == GITREPOSITORIES_PATH:  # read only to explain a wait: not a poll
            return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepositoryList", "items": list(self.sources)}
        if self.on_poll:
            self.on_poll(len(self.polls))
        if self.errors:
            raise self.errors.pop(0)
        if path.split("?", 1)[0] != KUSTOMIZATIONS_PATH:
            raise KubeApiError(404, f"the double does not serve {path}")
        return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "KustomizationList", "items": list(self.items)}

    @property
    def polls(self) -> list[str]:
        return [p for p in self.paths if p.split("?", 1)[0] != GITREPOSITORIES_PATH]


@contextmanager
def serve_http(api: FakeKubeApi, token: str) -> Iterator[str]:
    """The double behind http://127.0.0.1:<port>; requests without `Bearer <token>` get 401."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            if self.headers.get("Authorization") != f"Bearer {token}":
                return self._send(401, {"kind": "Status", "message": "Unauthorized", "code": 401})
            try:
                body = api.get_json(self.path)
            except KubeApiError as exc:
                return self._send(exc.status or 500, {"kind": "Status", "message": exc.detail, "code": exc.status})
            self._send(200, body)

        def _send(self, code: int, doc: dict) -> None:
            data = json.dumps(doc).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:  # keep test output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
