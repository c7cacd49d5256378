"""Whether Flux on the cluster already has another owner than the flux layer, read before the layer applies.

A cluster set up with `flux bootstrap` (or `flux install`, Helm, `kubectl apply` of install.yaml) has its own
flux-system objects. Applying the layer over them makes two owners of the same controllers, GitRepository
and Kustomization: each run of one undoes the other's fields, and a bootstrapped repository's
`flux-system/gotk-components.yaml` is applied back by the root Kustomization a minute after groundctl's
`up`. So the layer refuses, with the adoption path (runbooks/adopt-flux-bootstrap.md), when what it reads
shows another owner:
- the `kustomize.toolkit.fluxcd.io/name=flux-system` label on the flux-system Namespace, a controller, or the
  flux-system source or Kustomization: Flux's own root Kustomization applies it, which is what `flux bootstrap`
  sets up;
- a server-side apply (operation `Apply`) by a field manager that is not Pulumi's: `flux` for the CLI's
  install and bootstrap, `kustomize-controller` for a self-managed Flux, `kubectl` for
  `kubectl apply --server-side`, Helm 4;
- an update by a client that installs manifests with updates: `helm` (Helm 3) and
  `kubectl-client-side-apply` (`kubectl apply -f install.yaml`).
Any other update is not an owner: an operator's fix by hand (`kubectl edit`, `kubectl patch`, the way back
from drift), the flux CLI's `reconcile` and `suspend` (`flux-client-side-apply`), a `kubectl rollout restart`,
the Deployment revision kube-controller-manager writes. Nor is any write to the status subresource, by
update or by apply: that is a controller reporting, not declaring. Pulumi's next apply takes an update's
fields back; an owner's next apply would take them away again.
`owner_evidence` is the pure decision over the objects a read returns; `read_flux_system` is the read,
through any client with `get_json` (the `KubeApi` protocol).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from bootstrap.kit.errors import EngineError, GroundctlError, Refused

NAMESPACE = "flux-system"
LABEL = "kustomize.toolkit.fluxcd.io/name"
# The provider's field managers: `pulumi-kubernetes-<id>` in server-side apply mode, `pulumi-kubernetes` in
# client-side mode (pulumi-kubernetes provider/pkg/provider/provider.go, fieldManagerName), and the names of
# its executable that older client-side versions wrote (provider/pkg/await/await.go, fixCSAFieldManagers).
PULUMI_MANAGER = "pulumi-kubernetes"
PULUMI_CSA = "pulumi-resource-kubernetes"
RUNBOOK = "runbooks/adopt-flux-bootstrap.md"
READS = (
    f"/api/v1/namespaces/{NAMESPACE}",
    f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
    f"/apis/source.toolkit.fluxcd.io/v1/namespaces/{NAMESPACE}/gitrepositories/{NAMESPACE}",
    f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{NAMESPACE}/kustomizations/{NAMESPACE}",
)
# Clients that install whole manifests with updates rather than server-side applies.
INSTALLERS_BY_UPDATE = {"helm", "kubectl-client-side-apply"}


def _name(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    kind = obj.get("kind") or "object"
    if kind == "Namespace":
        return f"Namespace {meta.get('name')}"
    return f"{kind} {meta.get('namespace') or NAMESPACE}/{meta.get('name')}"


def _foreign_manager(entry: dict) -> Optional[str]:
    manager = str(entry.get("manager") or "")
    if manager.startswith(PULUMI_MANAGER) or manager == PULUMI_CSA or entry.get("subresource") == "status":
        return None
    if entry.get("operation") == "Apply" or manager in INSTALLERS_BY_UPDATE:
        return manager or "(unnamed)"
    return None


def owner_evidence(objects: list[dict]) -> list[str]:
    """What shows another owner of Flux on the cluster, one line per object; empty when there is none. Pure."""
    found = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        why = []
        if labels.get(LABEL) == NAMESPACE:
            why.append(f"the label {LABEL}={NAMESPACE} (Flux's own root Kustomization applies it)")
        managers = sorted({m for e in meta.get("managedFields") or [] if isinstance(e, dict)
                           for m in [_foreign_manager(e)] if m})
        if managers:
            why.append(f"field manager{'s' if len(managers) > 1 else ''} {', '.join(managers)}")
        if why:
            found.append(f"{_name(obj)} has {' and '.join(why)}")
    return found


def read_flux_system(api) -> list[dict]:
    """The controllers' Deployments and the flux-system GitRepository and Kustomization, as the API returns them;
    what does not exist (no namespace, no CRD yet) is left out. EngineError when the API does not answer."""
    objects: list[dict] = []
    for path in READS:
        try:
            doc = api.get_json(path)
        except GroundctlError:
            raise
        except Exception as exc:  # noqa: BLE001 - the client's own error type stays in its module
            if getattr(exc, "status", None) == 404:
                continue
            raise EngineError(f"Before applying the flux layer, groundctl reads the cluster's flux-system objects "
                              f"to make sure no other tool owns Flux there, and {path} could not be read ({exc}). "
                              "Check that the cluster's API answers with these credentials, and run the command "
                              "again.") from None
        if isinstance(doc, dict) and "items" in doc:
            objects += _listed(doc)
        elif isinstance(doc, dict):
            objects.append(doc)
    return objects


def _listed(doc: dict) -> list[dict]:
    """A list's items, each with the kind the list names: the API server leaves a typed list's items without
    one (a DeploymentList's items have no `kind`), and the refusal names each object by it."""
    kind = doc.get("kind")
    kind = kind[:-len("List")] if isinstance(kind, str) and kind.endswith("List") else None
    return [{"kind": kind, **o} if kind and not o.get("kind") else o
            for o in doc.get("items") or [] if isinstance(o, dict)]


def refuse_other_owner(target, kube_client: Callable[[str], Any], log) -> None:
    """Refused (nothing applied) when Flux on the environment's cluster has another owner than the flux layer."""
    with log.phase("flux-owners", "flux") as note:
        cluster = target.engine.outputs("cluster")
        target.extra_secrets.update(str(cluster.values[k]) for k in cluster.secret_keys if k in cluster.values)
        kubeconfig = cluster.values.get("kubeconfig")
        if not isinstance(kubeconfig, str) or not kubeconfig:
            note["detail"] = "the cluster layer exports no kubeconfig: not read"
            return
        evidence = owner_evidence(read_flux_system(kube_client(kubeconfig)))
        if evidence:
            raise Refused(
                f"Flux on the cluster of '{target.name}' is already owned by another tool: {'; '.join(evidence)}. "
                "Applying the flux layer over it would leave two owners undoing each other's changes, so nothing "
                f"was applied. To hand Flux to groundctl, follow {RUNBOOK}; to keep the other owner, leave the "
                f"flux layer out (`groundctl up {target.name} --layers backend,network,cluster`).")
        note["detail"] = "no other owner of flux-system"
