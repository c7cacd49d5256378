"""The builder: which steps a command will run, decided from the spec and the flags alone (no I/O).

The runner (`bootstrap.apply.runner`) executes what this returns and does all the I/O. Keeping the
decision here means "which layers, in what order, which are skipped and why, which preflight
checks" can be read and tested without an engine or a bucket.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional
from urllib.parse import urlparse

from bootstrap.apply.gate import check_destroy_allowed, destroy_layers
from bootstrap.layers import LAYERS, select
from bootstrap.spec import EnvironmentSpec

Operation = Literal["up", "destroy", "preview", "drift"]

# Layers that talk to a Kubernetes API rather than to AWS.
KUBERNETES_LAYERS = frozenset({"flux"})

EMULATOR_HAS_NO_KUBERNETES = (
    "the target is the AWS emulator, which runs no Kubernetes API (its EKS cluster is only an API "
    "record), so there is nothing for Flux to be installed into; run against a real cluster to "
    "deploy Flux"
)


@dataclass(frozen=True)
class LayerStep:
    layer: str
    operation: Operation
    skip_reason: Optional[str] = None  # decided now; reachability is probed by the runner
    needs_kubernetes: bool = False


@dataclass(frozen=True)
class Steps:
    command: str
    environment: str
    preflight: tuple[str, ...]
    layers: tuple[LayerStep, ...]

    @property
    def layer_names(self) -> list[str]:
        return [s.layer for s in self.layers]


def _layer_step(name: str, operation: Operation, emulated: bool) -> LayerStep:
    k8s = name in KUBERNETES_LAYERS
    return LayerStep(name, operation, EMULATOR_HAS_NO_KUBERNETES if (k8s and emulated) else None, k8s)


def build_up(spec: EnvironmentSpec, layers: Optional[list[str]], *, emulated: bool,
             reviewed: bool = False) -> Steps:
    # Nothing is written before the steps after it are known to be able to run: the account and the
    # engine (CLI, its version, the layers' provider plugins) are checked first. The lock lives in the
    # state bucket, so the backend is ensured (idempotent, safe to race) before the lock is taken. A run
    # that applies a reviewed plan (`--plan-dir`) never creates the environment: no plan can have
    # previewed a bucket that did not exist, so it must exist first. Under the lock, before the first
    # layer, every layer's state is read for pending operations.
    return Steps(
        "up", spec.name, ("account", "engine", *(("state-bucket",) if reviewed else ()), "backend", "lock",
                          "pending"),
        tuple(_layer_step(lay.name, "up", emulated) for lay in select(layers)),
    )


def build_destroy(spec: EnvironmentSpec, layers: Optional[list[str]], *, emulated: bool,
                  include_backend: bool, i_mean_production: bool) -> Steps:
    check_destroy_allowed(spec.name, spec.production, i_mean_production=i_mean_production)
    names = destroy_layers([lay.name for lay in select(layers)], include_backend=include_backend,
                           explicit=bool(layers))
    return Steps("destroy", spec.name, ("account", "engine", "state-bucket", "lock", "pending"),
                 tuple(_layer_step(name, "destroy", emulated) for name in names))


def build_preview(spec: EnvironmentSpec, layers: Optional[list[str]], *, emulated: bool,
                  refresh: bool) -> Steps:
    # A plan never creates anything: without the state bucket it says the environment is not deployed
    # yet (bootstrap.apply.preview). A drift check on an emulator may create the backend there (nothing real
    # is touched); against AWS the bucket must already exist.
    bucket_step = "backend" if emulated and refresh else "state-bucket"
    operation: Operation = "drift" if refresh else "preview"
    return Steps("drift" if refresh else "plan", spec.name, ("account", "engine", bucket_step, "pending"),
                 tuple(_layer_step(lay.name, operation, emulated) for lay in select(layers)))


StackAction = Literal["use", "create", "not-deployed", "lost"]


def stack_action(operation: Operation, exists: bool, ledger_serial: int) -> StackAction:
    """What to do about a layer's stack before `operation`. Pure.

    A stack is created only by the `up` of a layer the ledger has never recorded. A stack the ledger
    knows but the backend does not have was lost: starting it again empty would try to create every
    resource a second time, the opposite of recovery.
    """
    if exists:
        return "use"
    if ledger_serial > 0:
        return "lost"
    return "create" if operation == "up" else "not-deployed"


def not_deployed_reason(environment: str, layer: str) -> str:
    return (f"not deployed: the stack organization/{layer}/{environment} does not exist yet, so there is "
            f"nothing to preview against (`groundctl plan {environment} --offline` shows what it declares; "
            f"`groundctl up {environment}` creates it)")


def not_deployed_yet(environment: str, bucket: str) -> str:
    """What a plan of an environment without its state bucket says, with the next step."""
    return (f"not deployed yet: the state bucket {bucket} does not exist. Next: create {environment} once, by "
            f"hand, with its apply role: `groundctl up {environment}` (runbooks/create-environment.md, "
            "'Under CI'); plans preview against it from then on")


def never_applied_yet(environment: str, bucket: str) -> str:
    """What a plan or drift says of an environment whose state bucket no Pulumi command has opened yet."""
    return (f"not deployed yet: the state bucket {bucket} exists, but no layer was ever applied to it (no Pulumi "
            f"command has run on it: it holds no .pulumi/meta.yaml and no stack). Next: `groundctl up {environment}` "
            "with its apply role (runbooks/create-environment.md); plans preview against it from then on")


def kubernetes_endpoint(cluster_outputs: dict) -> Optional[tuple[str, int]]:
    """(host, port) of the cluster's API from its outputs, or None when it does not say."""
    url = cluster_outputs.get("cluster_endpoint")
    if not isinstance(url, str) or not url:
        return None
    parsed = urlparse(url if "://" in url else f"https://{url}")
    if not parsed.hostname:
        return None
    return parsed.hostname, parsed.port or 443


def all_layer_names() -> list[str]:
    return [lay.name for lay in LAYERS]
