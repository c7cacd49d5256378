"""The check `up` ends with, and a recovery's verification of the flux layer: Flux's own readiness.

The flux layer tells the Kubernetes provider not to await the controllers' Deployments and Services
(`pulumi.com/skipAwait`, stacks/flux/__main__.py), so the engine reports the layer applied as soon as the
API server has accepted its objects (pulumi-kubernetes provider/pkg/metadata/overrides.go:108,
provider/pkg/await/await.go:406). This check is what says whether Flux came up: the controllers available,
and the root GitRepository and Kustomization the layer exports Ready at a revision of the spec's ref,
within the spec's `flux.ready_timeout_minutes`. What the check reads is judged by the pure functions of
`bootstrap.flux.ready`; the Kubernetes client comes in as `kube_for`, so tests answer it with a double.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Mapping, Optional

from bootstrap.kit.errors import EngineError, GroundctlError
from bootstrap.flux.ready import Install
from bootstrap.flux.wait import WaitResult, wait_ready
from bootstrap.kube.api import KubeApi

_KEY = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?/[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$")


class FluxNotReady(GroundctlError):
    """The flux layer was applied, but Flux did not come up within the deadline (or cannot without a change)."""

    exit_code = 4

    def __init__(self, message: str, reason: str, result: WaitResult):
        super().__init__(message)
        self.reason = reason
        self.result = result


def install_for(spec: Any, flux_outputs: Mapping[str, Any]) -> Install:
    """What to judge, from the spec's ref and the flux layer's outputs. Pure."""
    values = {name: flux_outputs.get(name) for name in ("git_repository", "kustomization")}
    for name, value in values.items():
        if not isinstance(value, str) or not _KEY.fullmatch(value):
            raise EngineError(f"The flux layer's output `{name}` is not a namespace/name such as "
                              f"flux-system/flux-system, so Flux's readiness cannot be checked. Fix stacks/flux to "
                              f"export it and re-run `groundctl up {spec.name} --layers flux`.")
    namespace = flux_outputs.get("flux_namespace")
    ref = spec.flux.ref
    kind = "tag" if ref.tag else "commit" if ref.commit else "branch"
    return Install(namespace if isinstance(namespace, str) and namespace else values["kustomization"].split("/")[0],
                   values["git_repository"], values["kustomization"], kind, getattr(ref, kind))


def await_flux(spec: Any, *, kubeconfig: str, flux_outputs: Mapping[str, Any],
               kube_for: Callable[[Any, str], KubeApi], clock: Callable[[], float] = time.time,
               sleep: Callable[[float], None] = time.sleep) -> WaitResult:
    """Wait, up to the spec's deadline, for the install the flux layer made to be Ready."""
    install = install_for(spec, flux_outputs)
    return wait_ready(kube_for(spec, kubeconfig), timeout_seconds=spec.flux.ready_timeout_minutes * 60,
                      install=install, clock=clock, sleep=sleep)


def flux_readiness(spec: Any, engine: Any, *, kube_for: Callable[[Any, str], KubeApi], secrets: set,
                   flux_outputs: Optional[Mapping[str, Any]] = None, clock: Callable[[], float] = time.time,
                   sleep: Callable[[float], None] = time.sleep) -> WaitResult:
    """`await_flux` on the environment's layers: the cluster's kubeconfig (its secret outputs join `secrets`,
    so nothing quoting them is printed) and the flux layer's outputs, read from the engine."""
    cluster = engine.outputs("cluster")
    secrets.update(str(cluster.values[k]) for k in cluster.secret_keys if k in cluster.values)
    kubeconfig = cluster.values.get("kubeconfig")
    if not isinstance(kubeconfig, str) or not kubeconfig:
        raise EngineError("The cluster layer exports no kubeconfig, so Flux's readiness cannot be checked. "
                          f"Re-run `groundctl up {spec.name} --layers cluster,flux`.")
    outputs = flux_outputs if flux_outputs is not None else engine.outputs("flux").values
    return await_flux(spec, kubeconfig=kubeconfig, flux_outputs=outputs, kube_for=kube_for, clock=clock, sleep=sleep)


def not_ready(spec: Any, result: WaitResult) -> FluxNotReady:
    """The error a run stops with when `result` is not Ready: Flux's reason, what was seen, what to do. Pure."""
    reason = result.last_reason or result.reason
    minutes = spec.flux.ready_timeout_minutes
    if result.outcome == "stalled":
        head = f"Flux cannot come up in '{spec.name}' without a change ({reason}): {result.message}."
    else:
        head = (f"Flux did not become ready in '{spec.name}' within flux.ready_timeout_minutes ({minutes} min; "
                f"reason {reason}): {result.message}.")
    return FluxNotReady(
        f"{head} The flux layer itself was applied; it is Flux that did not come up. See what "
        "Flux says (`flux get all -n flux-system`, `kubectl -n flux-system get deployments,events`), fix the "
        "cause (the Git ref, the deploy key, what flux.path holds, nodes for the controllers), then re-run "
        f"`groundctl up {spec.name} --layers flux`: it applies nothing new and waits again.", reason, result)
