"""A stand-in for Flux's source and kustomize controllers, inside the tests.

The cluster tier's API server has no nodes, so Flux's controllers never run: like envtest-based tests,
this thread writes what they would write, through the status subresource. A GitRepository or
Kustomization is marked Ready `delay` seconds after the stand-in first sees its current generation
(observedGeneration, the Ready condition, the artifact / lastAppliedRevision), or Ready=False with a
reason when the test says it should fail. Nothing else: it never touches spec or metadata.

The Flux layer's Deployments are not marked available here: stacks/flux tells the Kubernetes provider
not to await them (see the note in stacks/flux/__main__.py), so no test depends on their status.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from tests.kubeapi import KubeCluster

KINDS = {
    "GitRepository": "/apis/source.toolkit.fluxcd.io/v1/gitrepositories",
    "Kustomization": "/apis/kustomize.toolkit.fluxcd.io/v1/kustomizations",
}
REVISION = "main@sha1:5f1c0ffee0ddba11cafe0000000000000000abcd"


@dataclass(frozen=True)
class Failure:
    reason: str
    message: str
    spare_uids: frozenset = frozenset()   # objects that existed before the failure was wanted stay Ready


@dataclass
class StandIn:
    cluster: KubeCluster
    delay: float = 1.0
    failures: dict[str, Failure] = field(default_factory=dict)   # "Kind ns/name" -> how it fails
    paused: bool = False                                           # sees nothing while True
    seen: dict[tuple, float] = field(default_factory=dict)         # (kind, ns, name, generation) -> first seen
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: Optional[threading.Thread] = None

    def start(self) -> "StandIn":
        self._thread = threading.Thread(target=self._run, name="flux-stand-in", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            if self.paused:
                continue
            try:
                self.reconcile_once()
            except Exception as exc:  # noqa: BLE001 - a poll that fails is retried; the tests read `errors`
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def reconcile_once(self) -> None:
        for kind, path in KINDS.items():
            status, doc = self.cluster.request("GET", path, timeout=10)
            if status == 404:  # the CRD is not there (yet, or any more)
                continue
            for item in doc.get("items") or []:
                self._observe(kind, item)

    def _observe(self, kind: str, item: dict) -> None:
        meta, status = item["metadata"], item.get("status") or {}
        generation = meta.get("generation", 1)
        failure = self.failures.get(f"{kind} {meta['namespace']}/{meta['name']}")
        if failure is not None and meta["uid"] in failure.spare_uids:
            failure = None
        if status.get("observedGeneration") == generation and _ready(status) == ("False" if failure else "True"):
            return
        key = (kind, meta["namespace"], meta["name"], generation, meta["uid"])
        first = self.seen.setdefault(key, time.monotonic())
        if time.monotonic() - first < self.delay:
            return
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if failure:
            condition = {"type": "Ready", "status": "False", "reason": failure.reason, "message": failure.message}
        else:
            condition = {"type": "Ready", "status": "True", "reason": "Succeeded",
                         "message": f"stand-in controller: applied revision {REVISION}"}
        condition |= {"lastTransitionTime": now, "observedGeneration": generation}
        new_status: dict = {"observedGeneration": generation, "conditions": [condition]}
        if not failure and kind == "Kustomization":
            new_status |= {"lastAppliedRevision": REVISION, "lastAttemptedRevision": REVISION}
        if not failure and kind == "GitRepository":
            new_status["artifact"] = {"path": "gitrepository/flux-system/flux-system/5f1c0ffe.tar.gz",
                                      "url": "http://source-controller.flux-system.svc/5f1c0ffe.tar.gz",
                                      "revision": REVISION, "digest": "sha256:" + "0" * 64,
                                      "lastUpdateTime": now}
        path = f"{KINDS[kind].rsplit('/', 1)[0]}/namespaces/{meta['namespace']}/{KINDS[kind].rsplit('/', 1)[1]}" \
               f"/{meta['name']}/status"
        code, doc = self.cluster.request("PATCH", path, {"status": new_status},
                                         content_type="application/merge-patch+json", timeout=10)
        if code not in (200, 404, 409):
            self.errors.append(f"PATCH {path}: {code} {doc.get('message')}")


def _ready(status: dict) -> Optional[str]:
    return next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
