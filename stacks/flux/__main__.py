"""flux: the Flux controllers on the cluster, pointed at the fleet repository.

The controllers come at a pinned version, from a local manifest file for air-gapped installs or else
from that version's release manifest, pinned by its sha256 (required in production; the provider reads the
file or URL again itself, so the digest proves what it applies only for a local file or an unchanging URL).
A GitRepository pinned to a tag or commit (a branch only outside production) and a root Kustomization
with prune on hand the cluster to GitOps. The SSH deploy key arrives as Pulumi secret config and is never
exported.

Seen through the real Kubernetes provider (tests/test_cluster_tier_flux.py), not the mock runtime:
- The install manifest declares the flux-system Namespace itself; a second Namespace resource of the same
  name fails the create (server-side apply creates only with upsertExistingObjects, pulumi-kubernetes
  provider/pkg/await/await.go), so the manifest's Namespace is the layer's and the rest depends on it.
- The provider awaits a Deployment until its ReplicaSet is available and a Service until its endpoints
  target ready pods, for up to 10 minutes each. The Flux controllers' Deployments and Services are not
  awaited (skipAwait, set by a transform on the manifest's objects): Flux's readiness is judged by Flux's
  own conditions, after the update (`groundctl up` ends by waiting, up to the spec's
  `flux.ready_timeout_minutes`, for the controllers available and the root Kustomization Ready at the ref,
  and fails with Flux's reason; the rebuild drill waits the same way with the RTO as its deadline), and a
  recreated cluster whose nodes are still joining must not fail the layer half-applied after 10 opaque
  minutes. Everything else is awaited: skipAwait on the Namespace
  would also skip waiting for its deletion, and a `destroy` followed by an `up` would then create the
  Secret in a Namespace still terminating.
- The Secret, GitRepository and Kustomization are this layer's: a field changed on them outside Pulumi is
  drift (`groundctl drift` refreshes; `up` does not, so it proposes nothing for it), and the next `up` that
  applies them takes the field back (patchForce) instead of stopping at a field-manager conflict.
- The custom resources depend on the manifest's component; Pulumi counts a component's children as
  dependencies too (pkg/resource/graph/dependency_graph.go, DependenciesOf), so `destroy` deletes them
  before their CRDs and the Namespace, as the audit log in the cluster tier shows.
"""

from __future__ import annotations

import os

import pulumi
import pulumi_kubernetes as k8s

from stacks.common.config import common, export_lineage, stack_reference
from stacks.common.manifest import RELEASE_URL, program_source, verify

LAYER = "flux"
NAMESPACE = "flux-system"
SOURCE_NAME = "flux-system"

settings = common(LAYER)
cfg = pulumi.Config()
version = cfg.require("version")
repository_url = cfg.require("repositoryUrl")
ref_kind = cfg.require("refKind")
ref = cfg.require("ref")
if ref_kind not in ("tag", "commit", "branch"):
    raise ValueError(f"config flux:refKind must be tag, commit or branch, not {ref_kind!r}")
if ref_kind == "branch" and settings.production:
    raise ValueError("a production environment must deploy a pinned tag or commit, not a branch")
path = cfg.get("path") or f"clusters/{settings.environment}"
interval = cfg.get("interval") or "5m"
manifest_path = cfg.get("manifestPath") or None
manifest_sha256 = (cfg.get("manifestSha256") or "").lower() or None
if settings.production and not manifest_sha256:
    raise ValueError("a production environment must pin the Flux install manifest by its sha256 "
                     "(config flux:manifestSha256)")
# A relative path stays relative in the controllers' `file` input (the offline plan shows it and the update's
# history records the config: the same words in every clone); the provider reads it from this folder, as the
# check below does.
manifest = manifest_path or RELEASE_URL.format(version=version)
# Checked here, before any resource is registered, so an `up` never applies other bytes than the pinned ones,
# whether groundctl or an operator runs it. A preview applies nothing and the offline plan must stay offline:
# groundctl checks a local file before every run, and the program checks every source before an update.
if manifest_sha256 and not pulumi.runtime.is_dry_run():
    verify(program_source(manifest, os.path.dirname(os.path.abspath(__file__))), manifest_sha256)
uses_ssh = repository_url.startswith("ssh://")

cluster = stack_reference("cluster")
kube = k8s.Provider(
    "cluster",
    kubeconfig=cluster.get_output("kubeconfig"),
    enable_server_side_apply=True,
)
NOT_AWAITED = ("kubernetes:apps/v1:Deployment", "kubernetes:core/v1:Service")  # they need nodes to be ready


def skip_await_on_workloads(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    if args.type_ not in NOT_AWAITED:
        return None
    metadata = dict(args.props.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), "pulumi.com/skipAwait": "true"}
    return pulumi.ResourceTransformResult({**args.props, "metadata": metadata}, args.opts)


# The manifest holds the flux-system Namespace and the CRDs; everything below depends on it. The engine
# applies the transform to the component's children, which the provider registers.
controllers = k8s.yaml.v2.ConfigFile(
    "flux-controllers",
    file=manifest,
    opts=pulumi.ResourceOptions(provider=kube, transforms=[skip_await_on_workloads]),
)
OWNED = {"pulumi.com/patchForce": "true"}

source_spec: dict = {"interval": interval, "url": repository_url, "ref": {ref_kind: ref}}
depends = [controllers]
if uses_ssh:
    deploy_key = k8s.core.v1.Secret(
        "flux-deploy-key",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=SOURCE_NAME, namespace=NAMESPACE, annotations=OWNED),
        type="Opaque",
        string_data={
            "identity": cfg.require_secret("deployKey"),
            "known_hosts": cfg.require("knownHosts"),
        },
        opts=pulumi.ResourceOptions(provider=kube, depends_on=[controllers]),
    )
    source_spec["secretRef"] = {"name": SOURCE_NAME}
    depends.append(deploy_key)

git_repository = k8s.apiextensions.CustomResource(
    "git-repository",
    api_version="source.toolkit.fluxcd.io/v1",
    kind="GitRepository",
    metadata=k8s.meta.v1.ObjectMetaArgs(name=SOURCE_NAME, namespace=NAMESPACE, annotations=OWNED),
    spec=source_spec,
    opts=pulumi.ResourceOptions(provider=kube, depends_on=depends),  # the CRDs come with the controllers
)
kustomization = k8s.apiextensions.CustomResource(
    "root-kustomization",
    api_version="kustomize.toolkit.fluxcd.io/v1",
    kind="Kustomization",
    metadata=k8s.meta.v1.ObjectMetaArgs(name=SOURCE_NAME, namespace=NAMESPACE, annotations=OWNED),
    spec={
        "interval": interval,
        "path": path if path.startswith("./") else f"./{path}",
        "prune": True,
        "sourceRef": {"kind": "GitRepository", "name": SOURCE_NAME},
    },
    opts=pulumi.ResourceOptions(provider=kube, depends_on=[git_repository]),
)

pulumi.export("flux_namespace", NAMESPACE)
pulumi.export("flux_version", version)
pulumi.export("git_repository", f"{NAMESPACE}/{SOURCE_NAME}")
pulumi.export("kustomization", f"{NAMESPACE}/{SOURCE_NAME}")
export_lineage(settings)
