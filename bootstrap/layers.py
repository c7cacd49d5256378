"""The layer graph: which layers exist, in what order, and what each promises the next.

A layer's output contract is checked by the orchestrator after every `up`; a missing output means
the next layer would fail in a confusing way, so it stops there instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STACKS_DIR = Path(__file__).resolve().parent.parent / "stacks"


@dataclass(frozen=True)
class Layer:
    name: str
    upstream: tuple[str, ...]
    outputs: tuple[str, ...]
    secret_outputs: tuple[str, ...] = ()

    @property
    def project(self) -> str:
        # The Pulumi project name is the layer name (stacks/<layer>/Pulumi.yaml).
        return self.name

    @property
    def directory(self) -> Path:
        return STACKS_DIR / self.name

    def stack_reference(self, environment: str) -> str:
        return f"organization/{self.name}/{environment}"


LINEAGE_OUTPUT = "groundctl_lineage"

LAYERS: tuple[Layer, ...] = (
    Layer(
        "backend",
        upstream=(),
        outputs=("bucket_name", "bucket_arn", "kms_key_arn", "kms_alias", "secrets_provider", LINEAGE_OUTPUT),
    ),
    Layer(
        "network",
        upstream=("backend",),
        outputs=(
            "vpc_id", "vpc_cidr", "availability_zones", "private_subnet_ids", "public_subnet_ids",
            LINEAGE_OUTPUT,
        ),
    ),
    Layer(
        "cluster",
        upstream=("network", "backend"),
        outputs=(
            "cluster_name", "cluster_endpoint", "cluster_arn", "oidc_provider_arn", "node_role_arn",
            "kubeconfig", LINEAGE_OUTPUT,
        ),
        secret_outputs=("kubeconfig",),
    ),
    Layer(
        "flux",
        upstream=("cluster",),
        outputs=("flux_namespace", "flux_version", "git_repository", "kustomization", LINEAGE_OUTPUT),
    ),
)

LAYER_NAMES: tuple[str, ...] = tuple(layer.name for layer in LAYERS)
_BY_NAME = {layer.name: layer for layer in LAYERS}


def layer(name: str) -> Layer:
    from bootstrap.kit.errors import BadInput

    try:
        return _BY_NAME[name]
    except KeyError:
        raise BadInput(
            f"'{name}' is not a layer. The layers are, in order: {', '.join(LAYER_NAMES)}."
        ) from None


def select(names: list[str] | None) -> list[Layer]:
    """The named layers (all when None) in dependency order, whatever order they were given in."""
    if not names:
        return list(LAYERS)
    wanted = {layer(n).name for n in names}
    return [lay for lay in LAYERS if lay.name in wanted]


def missing_outputs(lay: Layer, outputs: dict) -> list[str]:
    return [name for name in lay.outputs if name not in outputs]
