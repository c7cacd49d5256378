"""What Flux's objects say, read from the Kubernetes API's list responses into plain data. Pure.

Each Kustomization (kustomize.toolkit.fluxcd.io/v1) and GitRepository (source.toolkit.fluxcd.io/v1)
carries a `Ready` condition with a status, a reason and a message; a Kustomization's
`status.lastAppliedRevision` says which source revision it applied (kept apart from
`lastAttemptedRevision`), a GitRepository's `status.artifact.revision` which revision it fetched. A
condition counts only once `status.observedGeneration` has caught up with `metadata.generation`.

The controllers are Deployments (apps/v1); one is available the way `kubectl rollout status` decides it:
its spec observed, every replica updated, no old replica left, every updated replica available.

Everything here came from the cluster: reasons and messages are clipped, so a ten-kilobyte kustomize
error does not become a ten-kilobyte run record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from bootstrap.kit.untrusted import clip

GROUP, VERSION, PLURAL = "kustomize.toolkit.fluxcd.io", "v1", "kustomizations"
KUSTOMIZATIONS_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
GITREPOSITORIES_PATH = "/apis/source.toolkit.fluxcd.io/v1/gitrepositories"
MESSAGE_LIMIT = 300


def deployments_path(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/deployments"


@dataclass(frozen=True)
class KustomizationStatus:
    """A Kustomization, or a GitRepository (the same conditions and generations; its revision is the artifact's)."""
    namespace: str
    name: str
    ready: str                      # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_applied_revision: Optional[str]
    last_attempted_revision: Optional[str]
    stalled: bool = False
    suspended: bool = False
    up_to_date: bool = True         # observedGeneration has caught up with metadata.generation
    generation: Optional[int] = None
    observed_generation: Optional[int] = None
    source: Optional[str] = None    # the sourceRef as "namespace/name" (Kustomizations only)
    artifact_revision: Optional[str] = None  # what a GitRepository fetched

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def state(self) -> str:
        """Why it is not Ready yet, in words (or that it is)."""
        if not self.up_to_date:
            return (f"not yet observed at generation {self.generation} (Flux last reconciled generation "
                    f"{self.observed_generation})")
        if self.ready == "True":
            return "Ready"
        return f"Ready={self.ready} ({self.reason or 'no reason yet'}: {self.message or 'no message yet'})"

    def to_dict(self) -> dict:
        return {"key": self.key, "ready": self.ready, "reason": self.reason, "message": self.message,
                "last_applied_revision": self.last_applied_revision,
                "last_attempted_revision": self.last_attempted_revision, "stalled": self.stalled,
                "suspended": self.suspended}


def _condition(conditions: list, kind: str) -> dict:
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), {})


def _text(value, limit: int = MESSAGE_LIMIT) -> str:
    return clip(str(value), limit) if value is not None else ""


def _revision(value) -> Optional[str]:
    return _text(value, 200) if isinstance(value, str) and value else None


def _int(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_kustomizations(doc: Mapping) -> tuple[KustomizationStatus, ...]:
    """The Kustomizations (or GitRepositories) of a list response, sorted by namespace/name."""
    out = []
    for item in doc.get("items") or []:
        if not isinstance(item, dict):
            continue
        meta, status = item.get("metadata") or {}, item.get("status") or {}
        spec = item.get("spec") or {}
        conditions = status.get("conditions") or []
        ready = _condition(conditions, "Ready")
        generation, observed = _int(meta.get("generation")), _int(status.get("observedGeneration"))
        ref = spec.get("sourceRef") or {}
        source = (f"{ref.get('namespace') or meta.get('namespace', '')}/{ref['name']}"
                  if isinstance(ref, dict) and ref.get("name") and ref.get("kind", "GitRepository") == "GitRepository"
                  else None)
        artifact = status.get("artifact") if isinstance(status.get("artifact"), dict) else {}
        out.append(KustomizationStatus(
            namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
            ready=_text(ready.get("status", "Unknown"), 16), reason=_text(ready.get("reason"), 80),
            message=_text(ready.get("message")),
            last_applied_revision=_revision(status.get("lastAppliedRevision")),
            last_attempted_revision=_revision(status.get("lastAttemptedRevision")),
            stalled=_condition(conditions, "Stalled").get("status") == "True",
            suspended=spec.get("suspend") is True,
            up_to_date=generation is None or observed is None or observed >= generation,
            generation=generation, observed_generation=observed, source=source,
            artifact_revision=_revision(artifact.get("revision"))))
    return tuple(sorted(out, key=lambda k: k.key))


@dataclass(frozen=True)
class ControllerStatus:
    """A Flux controller's Deployment: whether its rollout is complete, and if not, why."""
    namespace: str
    name: str
    available: bool
    why: str                        # what it waits for, with the Deployment's own reason when it gives one

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def to_dict(self) -> dict:
        return {"key": self.key, "available": self.available, "why": self.why}


def _rollout(spec: dict, status: dict, generation: Optional[int]) -> Optional[str]:
    """None when the rollout is complete, else what it waits for (`kubectl rollout status`'s rule)."""
    observed = _int(status.get("observedGeneration"))
    if generation is not None and (observed is None or observed < generation):
        return "its spec is not yet observed by the cluster"
    wanted = _int(spec.get("replicas"))
    wanted = 1 if wanted is None else wanted
    total, updated = _int(status.get("replicas")) or 0, _int(status.get("updatedReplicas")) or 0
    available = _int(status.get("availableReplicas")) or 0
    if wanted == 0:
        return "it is scaled to zero replicas"
    if updated < wanted:
        return f"{updated} of {wanted} replica(s) updated"
    if total > updated:
        return f"{total - updated} old replica(s) pending termination"
    if available < updated:
        return f"{available} of {updated} replica(s) available"
    return None


def parse_controllers(doc: Mapping) -> tuple[ControllerStatus, ...]:
    """The Deployments of a list response, sorted by name, each judged available or not."""
    out = []
    for item in doc.get("items") or []:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") or {}
        spec = item.get("spec") if isinstance(item.get("spec"), dict) else {}
        status = item.get("status") if isinstance(item.get("status"), dict) else {}
        waiting = _rollout(spec, status, _int(meta.get("generation")))
        if waiting is not None:
            conditions = status.get("conditions") or []
            cond = next((c for c in (_condition(conditions, "Available"), _condition(conditions, "Progressing"))
                         if c.get("status") in ("False", "Unknown") or c.get("reason") == "ProgressDeadlineExceeded"),
                        {})
            if cond:
                waiting += f"; {_text(cond.get('reason'), 80) or 'no reason'}: {_text(cond.get('message'))}"
        out.append(ControllerStatus(str(meta.get("namespace", "")), str(meta.get("name", "")), waiting is None,
                                    waiting or "available"))
    return tuple(sorted(out, key=lambda c: c.key))
