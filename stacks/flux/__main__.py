"""flux: the Flux controllers on the cluster, pointed at the fleet repository.

The controllers come at a pinned version, from a local manifest file for air-gapped installs or else
from that version's release manifest. A GitRepository pinned to a tag or commit (a branch only
outside production) and a root Kustomization with prune on hand the cluster to GitOps. The SSH
deploy key arrives as Pulumi secret config and is never exported.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from stacks.common.config import common, export_lineage, stack_reference

LAYER = "flux"
NAMESPACE = "flux-system"
SOURCE_NAME = "flux-system"
RELEASE_URL = "https://github.com/fluxcd/flux2/releases/download/{version}/install.yaml"

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
uses_ssh = repository_url.startswith("ssh://")

cluster = stack_reference("cluster")
kube = k8s.Provider(
    "cluster",
    kubeconfig=cluster.get_output("kubeconfig"),
    # Server-side apply lets the release manifest's own flux-system Namespace meet ours without a clash.
    enable_server_side_apply=True,
)
on_cluster = pulumi.ResourceOptions(provider=kube)

namespace = k8s.core.v1.Namespace(
    "flux-namespace",
    metadata=k8s.meta.v1.ObjectMetaArgs(name=NAMESPACE),
    opts=on_cluster,
)
controllers = k8s.yaml.v2.ConfigFile(
    "flux-controllers",
    file=manifest_path or RELEASE_URL.format(version=version),
    opts=pulumi.ResourceOptions(provider=kube, depends_on=[namespace]),
)

source_spec: dict = {"interval": interval, "url": repository_url, "ref": {ref_kind: ref}}
depends = [controllers]
if uses_ssh:
    deploy_key = k8s.core.v1.Secret(
        "flux-deploy-key",
        metadata=k8s.meta.v1.ObjectMetaArgs(name=SOURCE_NAME, namespace=NAMESPACE),
        type="Opaque",
        string_data={
            "identity": cfg.require_secret("deployKey"),
            "known_hosts": cfg.require("knownHosts"),
        },
        opts=pulumi.ResourceOptions(provider=kube, depends_on=[namespace]),
    )
    source_spec["secretRef"] = {"name": SOURCE_NAME}
    depends.append(deploy_key)

git_repository = k8s.apiextensions.CustomResource(
    "git-repository",
    api_version="source.toolkit.fluxcd.io/v1",
    kind="GitRepository",
    metadata=k8s.meta.v1.ObjectMetaArgs(name=SOURCE_NAME, namespace=NAMESPACE),
    spec=source_spec,
    opts=pulumi.ResourceOptions(provider=kube, depends_on=depends),  # the CRDs come with the controllers
)
kustomization = k8s.apiextensions.CustomResource(
    "root-kustomization",
    api_version="kustomize.toolkit.fluxcd.io/v1",
    kind="Kustomization",
    metadata=k8s.meta.v1.ObjectMetaArgs(name=SOURCE_NAME, namespace=NAMESPACE),
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
