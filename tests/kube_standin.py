"""A stand-in for Flux's controllers and for the deployment controller, inside the tests.

The cluster tier's API server has no nodes, so neither Flux's controllers nor any pod run: like
envtest-based tests, this thread writes what the controllers would write, through the status subresource.
A GitRepository is marked Ready `delay` seconds after the stand-in first sees its current generation, with
an artifact at a revision of its `spec.ref` named as Flux names it (`<tag or branch>@sha1:<hash>`,
`sha1:<commit>`); a Kustomization is marked Ready at its source's revision once that source has an
artifact; a Deployment in flux-system is marked rolled out and available, as the deployment controller
would once its pods ran. Or, when the test says it should fail, Ready=False (a Deployment: Available=False)
with a reason. Nothing else: it never touches spec or metadata.

stacks/flux tells the Kubernetes provider not to await the controllers' Deployments (see the note in
stacks/flux/__main__.py); `groundctl up` waits for them, and for the root Kustomization, itself
(bootstrap/flux/check.py), so the statuses written here are what lets `up` succeed.
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
    "Deployment": "/apis/apps/v1/namespaces/flux-system/deployments",
}
HASH = "5f1c0ffee0ddba11cafe0000000000000000abcd"
REVISION = f"main@sha1:{HASH}"   # a GitRepository without a ref: its default branch


def revision_of(ref: dict) -> str:
    """The revision Flux's source-controller names for `spec.ref` (fluxcd/pkg git/commit.go, Commit.String)."""
    if ref.get("commit"):
        return f"sha1:{ref['commit']}"
    named = ref.get("tag") or ref.get("branch")
    return f"{named}@sha1:{HASH}" if named else REVISION


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
    seen: dict[tuple, float] = field(default_factory=dict)         # (kind, ns, name, generation, uid) -> first seen
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
        artifacts: dict[str, str] = {}   # "ns/name" of a GitRepository -> the revision it has fetched
        for kind, path in KINDS.items():  # sources first: a Kustomization applies what its source fetched
            status, doc = self.cluster.request("GET", path, timeout=10)
            if status == 404:  # the CRD is not there (yet, or any more)
                continue
            for item in doc.get("items") or []:
                revision = self._observe(kind, item, artifacts)
                if kind == "GitRepository" and revision:
                    artifacts[f"{item['metadata']['namespace']}/{item['metadata']['name']}"] = revision

    def _observe(self, kind: str, item: dict, artifacts: dict[str, str]) -> Optional[str]:
        """Write the object's status when it is not yet what it should be; the source revision it ends at."""
        meta, status, spec = item["metadata"], item.get("status") or {}, item.get("spec") or {}
        generation = meta.get("generation", 1)
        failure = self.failures.get(f"{kind} {meta['namespace']}/{meta['name']}")
        if failure is not None and meta["uid"] in failure.spare_uids:
            failure = None
        if kind == "GitRepository":
            revision = None if failure else revision_of(spec.get("ref") or {})
            current = (status.get("artifact") or {}).get("revision")
        elif kind == "Kustomization":
            ref = spec.get("sourceRef") or {}
            revision = None if failure else artifacts.get(f"{ref.get('namespace') or meta['namespace']}/{ref.get('name')}")
            if not failure and revision is None:
                return None  # its source has fetched nothing yet: nothing to apply
            current = status.get("lastAppliedRevision")
        else:
            revision, current = None, None
        # A failing object keeps what it had fetched or applied before (as Flux does): only its condition changes.
        if (status.get("observedGeneration") == generation and _ready(kind, status) == ("False" if failure else "True")
                and (failure or current == revision)):
            return revision
        key = (kind, meta["namespace"], meta["name"], generation, meta["uid"], revision)
        first = self.seen.setdefault(key, time.monotonic())
        if time.monotonic() - first < self.delay:
            return None
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        new_status = (_deployment_status(spec, generation, failure, now) if kind == "Deployment"
                      else _flux_status(kind, generation, failure, revision, now))
        path = f"{KINDS[kind].rsplit('/', 1)[0]}/namespaces/{meta['namespace']}/{KINDS[kind].rsplit('/', 1)[1]}" \
               f"/{meta['name']}/status" if kind != "Deployment" else f"{KINDS[kind]}/{meta['name']}/status"
        code, doc = self.cluster.request("PATCH", path, {"status": new_status},
                                         content_type="application/merge-patch+json", timeout=10)
        if code not in (200, 404, 409):
            self.errors.append(f"PATCH {path}: {code} {doc.get('message')}")
        return revision if code == 200 else None


def _flux_status(kind: str, generation: int, failure: Optional[Failure], revision: Optional[str], now: str) -> dict:
    if failure:
        condition = {"type": "Ready", "status": "False", "reason": failure.reason, "message": failure.message}
    else:
        condition = {"type": "Ready", "status": "True", "reason": "Succeeded",
                     "message": f"stand-in controller: applied revision {revision}"}
    condition |= {"lastTransitionTime": now, "observedGeneration": generation}
    status: dict = {"observedGeneration": generation, "conditions": [condition]}
    if not failure and kind == "Kustomization":
        status |= {"lastAppliedRevision": revision, "lastAttemptedRevision": revision}
    if not failure and kind == "GitRepository":
        status["artifact"] = {"path": f"gitrepository/flux-system/flux-system/{HASH[:8]}.tar.gz",
                              "url": f"http://source-controller.flux-system.svc/{HASH[:8]}.tar.gz",
                              "revision": revision, "digest": "sha256:" + "0" * 64, "lastUpdateTime": now}
    return status


def _deployment_status(spec: dict, generation: int, failure: Optional[Failure], now: str) -> dict:
    """What the deployment controller writes once the pods run (or, failing, while they do not)."""
    replicas = spec.get("replicas", 1)
    available = 0 if failure else replicas
    condition = ({"type": "Available", "status": "False", "reason": failure.reason, "message": failure.message}
                 if failure else {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                                  "message": "Deployment has minimum availability."})
    condition |= {"lastTransitionTime": now, "lastUpdateTime": now}
    return {"observedGeneration": generation, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": available, "availableReplicas": available, "conditions": [condition]}


def _ready(kind: str, status: dict) -> Optional[str]:
    wanted = "Available" if kind == "Deployment" else "Ready"
    return next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == wanted), None)
