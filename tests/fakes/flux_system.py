"""A Kubernetes API double serving flux-system objects by path, for the check that Flux has no other owner
(`bootstrap.flux.owners`): objects as the API returns them, with their labels and managed fields. Paths it
does not hold answer 404, as the API does for a namespace or CRD that does not exist; `serve_http`
(tests/fakes/k8s.py) puts it behind a real socket."""

from __future__ import annotations

from typing import Optional

from bootstrap.flux.owners import READS
from bootstrap.kube.api import KubeApiError

NAMESPACE, DEPLOYMENTS, GIT_REPOSITORY, KUSTOMIZATION = READS
CONTROLLERS = ("source-controller", "kustomize-controller", "helm-controller", "notification-controller")


def managed(manager: str, operation: str = "Apply", subresource: Optional[str] = None) -> dict:
    entry = {"manager": manager, "operation": operation, "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {}}, "time": "2026-01-01T00:00:00Z"}
    return entry | ({"subresource": subresource} if subresource else {})


def obj(kind: str, name: str, *, labels: Optional[dict] = None, managers: tuple[dict, ...] = ()) -> dict:
    meta = {"name": name, "labels": dict(labels or {}), "managedFields": list(managers)}
    return {"kind": kind, "metadata": meta if kind == "Namespace" else {**meta, "namespace": "flux-system"}}


class FluxSystemApi:
    def __init__(self, deployments: list[dict] = (), source: Optional[dict] = None,
                 kustomization: Optional[dict] = None):
        # A typed list's items carry no kind or apiVersion of their own: the API server leaves them out.
        self.docs = {DEPLOYMENTS: {"kind": "DeploymentList", "apiVersion": "apps/v1",
                                   "items": [{k: v for k, v in d.items() if k != "kind"} for d in deployments]}}
        if source is not None:
            self.docs[GIT_REPOSITORY] = source
        if kustomization is not None:
            self.docs[KUSTOMIZATION] = kustomization
        self.paths: list[str] = []

    def get_json(self, path: str) -> dict:
        self.paths.append(path)
        if path not in self.docs:
            raise KubeApiError(404, f"{path} not found")
        return self.docs[path]
