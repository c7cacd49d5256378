"""The Pulumi config groundctl sets on a layer's stack, derived from the environment spec.

Pure: spec in, config out. Keys are fully qualified (`aws:region`, `network:cidr`,
`groundctl:env`); structured values are JSON strings, which is what the programs read back
(stacks/common/config.py). The only secret, the Flux deploy key, comes from the environment
variable named below and is marked secret so Pulumi encrypts it in state.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bootstrap.kit.errors import BadInput
from bootstrap.flux.manifest import program_manifest_path
from bootstrap.layers import layer as layer_named
from bootstrap.spec import EnvironmentSpec

DEPLOY_KEY_ENV = "GROUNDCTL_FLUX_DEPLOY_KEY"
KNOWN_HOSTS_ENV = "GROUNDCTL_FLUX_KNOWN_HOSTS"


@dataclass(frozen=True)
class ConfigValue:
    value: str
    secret: bool = False

    def __repr__(self) -> str:
        # A secret never reaches a log or a traceback through its repr.
        return f"ConfigValue({'[secret]' if self.secret else repr(self.value)}, secret={self.secret})"


def _plain(value: object) -> ConfigValue:
    if isinstance(value, bool):
        return ConfigValue("true" if value else "false")
    if isinstance(value, (list, dict)):
        return ConfigValue(json.dumps(value, separators=(",", ":")))
    return ConfigValue(str(value))


def _common(spec: EnvironmentSpec, layer: str, lineage: str | None, endpoint: str | None) -> dict[str, object]:
    out: dict[str, object] = {
        "aws:region": spec.aws.region,
        "groundctl:env": spec.name,
        "groundctl:production": spec.production,
        "groundctl:accountId": spec.aws.account_id,
        "groundctl:lineage": lineage or "",
    }
    # No role ARN is ever configured into a program: the provider runs with the credentials the run was given
    # (the plan role for plan and drift, the apply role for up, recover and drills). A role in the provider's
    # inputs would let any run that can preview assume it, and, being an input, would make the provider itself
    # differ between a plan and an apply, so no approved plan could match and every drift check would fail.
    if endpoint:
        out["groundctl:awsEndpoint"] = endpoint
    return out


def _backend(spec: EnvironmentSpec) -> dict[str, object]:
    out: dict[str, object] = {
        "backend:bucketName": spec.backend.bucket,
        "backend:kmsAlias": spec.backend.kms_alias,
        "backend:noncurrentVersionRetentionDays": spec.backend.noncurrent_version_retention_days,
    }
    if spec.backend.replica_region:
        out["backend:replicaRegion"] = spec.backend.replica_region
    return out


def _network(spec: EnvironmentSpec) -> dict[str, object]:
    net = spec.network
    return {
        "network:cidr": net.cidr,
        "network:azCount": net.az_count,
        "network:natMode": net.nat,
        "network:flowLogsRetentionDays": net.flow_logs_retention_days,
    }


def _cluster(spec: EnvironmentSpec) -> dict[str, object]:
    cl = spec.cluster
    groups = [
        {
            "name": g.name, "instanceTypes": list(g.instance_types), "minSize": g.min_size,
            "desiredSize": g.desired_size, "maxSize": g.max_size, "diskSizeGib": g.disk_size_gib,
            "capacityType": g.capacity_type,
        }
        for g in cl.node_groups
    ]
    return {
        "cluster:kubernetesVersion": cl.kubernetes_version,
        "cluster:endpointPublicAccess": spec.endpoint_public_access,
        "cluster:publicAccessCidrs": list(cl.public_access_cidrs),
        "cluster:serviceCidr": cl.service_cidr,
        "cluster:adminPrincipalArns": list(cl.admin_principal_arns),
        "cluster:nodeGroups": groups,
    }


def _flux(spec: EnvironmentSpec, env: Mapping[str, str], program_dir: Path) -> dict[str, object | ConfigValue]:
    fx = spec.flux
    kind, ref = next((k, getattr(fx.ref, k)) for k in ("tag", "commit", "branch") if getattr(fx.ref, k))
    out: dict[str, object | ConfigValue] = {
        "flux:version": fx.version,
        "flux:repositoryUrl": fx.repository_url,
        "flux:refKind": kind,
        "flux:ref": ref,
        "flux:path": spec.flux_path,
        "flux:interval": fx.interval,
    }
    if fx.manifest_path:
        out["flux:manifestPath"] = program_manifest_path(fx.manifest_path, program_dir)
    if fx.manifest_sha256:
        out["flux:manifestSha256"] = fx.manifest_sha256
    if fx.repository_url.startswith("ssh://"):
        # SSH needs a deploy key and the host's known keys; HTTPS repositories are read anonymously.
        missing = flux_secrets_missing(spec, env)
        if missing:
            raise BadInput(missing)
        key, hosts = env[DEPLOY_KEY_ENV], env[KNOWN_HOSTS_ENV]
        out["flux:deployKey"] = ConfigValue(key, secret=True)
        out["flux:knownHosts"] = hosts
    return out


def flux_secrets_missing(spec: EnvironmentSpec, env: Mapping[str, str]) -> str | None:
    """Why the flux layer of `spec` cannot be configured from `env` (its SSH deploy key or the host's known keys
    are not set), or None. Pure: commands that will reach the flux layer ask before they change anything."""
    url = spec.flux.repository_url
    if not url.startswith("ssh://"):
        return None
    if not env.get(DEPLOY_KEY_ENV, "").strip():
        return (f"The flux layer of '{spec.name}' reads {url} over SSH and needs its deploy key, but the "
                f"environment variable {DEPLOY_KEY_ENV} is empty or unset. Export the private key the repository "
                f"trusts, e.g. `export {DEPLOY_KEY_ENV}=\"$(cat ~/.ssh/fleet_deploy_key)\"` (in CI: the repository "
                f"secret {DEPLOY_KEY_ENV}; in the fleet: the Secret {spec.name}-flux-deploy-key), and run the command "
                "again; groundctl stores it only as Pulumi secret config.")
    if not env.get(KNOWN_HOSTS_ENV, "").strip():
        return (f"The flux layer of '{spec.name}' reads {url} over SSH, and Flux refuses SSH without the host's "
                f"known keys, but {KNOWN_HOSTS_ENV} is empty or unset. Export them, e.g. `export {KNOWN_HOSTS_ENV}="
                "\"$(ssh-keyscan <git host>)\"` (check the keys against the host's published fingerprints; in CI: the "
                f"repository secret {KNOWN_HOSTS_ENV}; in the fleet: the Secret {spec.name}-flux-deploy-key), and "
                "run the command again.")
    return None


def layer_config(
    spec: EnvironmentSpec,
    layer: str,
    *,
    lineage: str | None = None,
    endpoint_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    program_dir: Path | None = None,
) -> dict[str, ConfigValue]:
    """The full Pulumi config of `layer` for this environment.

    `endpoint_url` (the running emulator) overrides `spec.aws.endpoint_url`, which may only say
    `embedded`. `environ` defaults to the process environment (for the Flux secrets). `program_dir` is the
    folder Pulumi runs the layer's program in (its own, stacks/<layer>, unless an engine runs others).
    """
    layer_named(layer)  # a BadInput naming the layers when unknown
    # `embedded` passes through unchanged when no URL is given: the offline plan (mock runtime) needs
    # no endpoint, and a real run always starts the emulator first and passes its URL here.
    endpoint = endpoint_url or spec.aws.endpoint_url
    raw: dict[str, object] = _common(spec, layer, lineage, endpoint)
    if layer == "flux":
        # Flux talks only to Kubernetes (through the cluster layer's kubeconfig); no AWS provider.
        for key in ("aws:region", "groundctl:accountId", "groundctl:awsEndpoint"):
            raw.pop(key, None)
    if layer == "backend":
        raw.update(_backend(spec))
    elif layer == "network":
        raw.update(_network(spec))
    elif layer == "cluster":
        raw.update(_cluster(spec))
    elif layer == "flux":
        raw.update(_flux(spec, os.environ if environ is None else environ,
                         program_dir or layer_named(layer).directory))
    return {k: v if isinstance(v, ConfigValue) else _plain(v) for k, v in raw.items()}

