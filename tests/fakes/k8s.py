"""An in-test Kubernetes API double, for the unit tier only.

`FakeKubeApi` answers what `bootstrap.flux.wait` asks (the Kustomization list; the GitRepository list and
the controllers' Deployments) from objects the test sets, and can be scripted per poll: a poll is one
Kustomization list, `on_poll` runs before each (so a test can make a Kustomization become Ready on the
third poll), and `errors` are raised first, in order. `serve_http`
puts the same double behind a loopback HTTP server that checks the bearer token, so the plain HTTP
client is exercised over a real socket.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from typing import Callable, Iterator, Optional

from bootstrap.flux.status import GITREPOSITORIES_PATH, KUSTOMIZATIONS_PATH
from bootstrap.kube.api import KubeApiError
from tests.local_http import serving

REVISION = "main@sha1:abc123"
CONTROLLERS = ("helm-controller", "kustomize-controller", "notification-controller", "source-controller")


def kustomization(name: str, *, namespace: str = "flux-system", ready: str = "True", reason: str = "ReconciliationSucceeded",
                  message: str = "Applied revision", revision: Optional[str] = REVISION,
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


def git_repository(name: str = "flux-system", *, namespace: str = "flux-system", ready: str = "True",
                   reason: str = "Succeeded", message: str = "stored artifact", revision: Optional[str] = REVISION,
                   generation: int = 1, observed: Optional[int] = None) -> dict:
    doc = kustomization(name, namespace=namespace, ready=ready, reason=reason, message=message, revision=None,
                        generation=generation, observed=observed)
    if revision is not None:
        doc["status"]["artifact"] = {"revision": revision, "digest": "sha256:" + "0" * 64}
    return doc | {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository"}


def deployment(name: str, *, namespace: str = "flux-system", available: bool = True, replicas: int = 1,
               reason: str = "MinimumReplicasUnavailable",
               message: str = "Deployment does not have minimum availability.") -> dict:
    """A controller's Deployment as the deployment controller reports it: rolled out, or its pods not available."""
    ready = replicas if available else 0
    conditions = [{"type": "Available", "status": "True" if available else "False",
                   "reason": "MinimumReplicasAvailable" if available else reason,
                   "message": "Deployment has minimum availability." if available else message}]
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "generation": 1}, "spec": {"replicas": replicas},
            "status": {"observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                       "readyReplicas": ready, "availableReplicas": ready, "conditions": conditions}}


def flux_up(revision: str = REVISION) -> dict:
    """The objects of a Flux install that came up: every controller available, the root source and
    Kustomization Ready at `revision`. Keyword arguments for `FakeKubeApi.set_flux`."""
    return {"deployments": [deployment(n) for n in CONTROLLERS],
            "sources": [git_repository(revision=revision)],
            "items": [kustomization("flux-system", revision=revision)]}


class FakeKubeApi:
    def __init__(self, items: Optional[list[dict]] = None):
        self.items: list[dict] = list(items or [])
        self.errors: list[Exception] = []
        self.on_poll: Optional[Callable[[int], None]] = None
        self.paths: list[str] = []
        self.sources: list[dict] = []                   # GitRepositories
        self.deployments: list[dict] = []               # the controllers, in any namespace

    def set_flux(self, *, items: list[dict], sources: list[dict], deployments: list[dict]) -> "FakeKubeApi":
        self.items, self.sources, self.deployments = list(items), list(sources), list(deployments)
        return self

    def get_json(self, path: str) -> dict:
        self.paths.append(path)
        route = path.split("?", 1)[0]
        if route == GITREPOSITORIES_PATH:  # not a poll: read beside the Kustomizations
            return {"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepositoryList", "items": list(self.sources)}
        if route.startswith("/apis/apps/v1/namespaces/") and route.endswith("/deployments"):
            namespace = route.split("/")[5]
            return {"apiVersion": "apps/v1", "kind": "DeploymentList",
                    "items": [d for d in self.deployments if d["metadata"]["namespace"] == namespace]}
        if route != KUSTOMIZATIONS_PATH:  # before the script: only a poll runs it (bootstrap.flux.owners reads too)
            raise KubeApiError(404, f"the double does not serve {path}")
        if self.on_poll:
            self.on_poll(len(self.polls))
        if self.errors:
            raise self.errors.pop(0)
        return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "KustomizationList", "items": list(self.items)}

    @property
    def polls(self) -> list[str]:
        return [p for p in self.paths if p.split("?", 1)[0] == KUSTOMIZATIONS_PATH]


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

    with serving(Handler) as url:
        yield url
