"""The spec's rules across fields: each reads a model whose fields are already valid and says what is
wrong, in words with the fix, or None. Pure.

The models (`bootstrap.spec.models`) run them after their fields; a rule on the whole spec names its
field as "a.b: message", which the problem list shows as the field path (`bootstrap.spec.parse`).
"""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Optional

from stacks.common.subnets import SubnetLayoutError, subnet_layout

if TYPE_CHECKING:
    from bootstrap.spec.models import ClusterSpec, EnvironmentSpec, FluxRef, NetworkSpec, NodeGroupSpec

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def network_problem(network: NetworkSpec) -> Optional[str]:
    """The VPC's CIDR must hold the subnets of its availability zones."""
    try:
        subnet_layout(network.cidr, network.az_count)
    except SubnetLayoutError as exc:
        return str(exc)
    return None


def node_group_problem(group: NodeGroupSpec) -> Optional[str]:
    if group.min_size > group.max_size:
        return f"min_size {group.min_size} is above max_size {group.max_size}; make min_size <= max_size"
    if not group.min_size <= group.desired_size <= group.max_size:
        return (
            f"desired_size {group.desired_size} is outside min_size..max_size "
            f"({group.min_size}..{group.max_size}); set desired_size within those bounds"
        )
    return None


def cluster_problem(cluster: ClusterSpec) -> Optional[str]:
    names = [g.name for g in cluster.node_groups]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        return f"node group names must be unique; {', '.join(dupes)} appears twice"
    if cluster.endpoint_public_access is False and cluster.public_access_cidrs:
        return (
            "public_access_cidrs is set but endpoint_public_access is false; remove the CIDRs or "
            "turn public access on"
        )
    return None


def flux_ref_problem(ref: FluxRef) -> Optional[str]:
    given = [k for k in ("tag", "commit", "branch") if getattr(ref, k)]
    if len(given) != 1:
        return "give exactly one of tag, commit or branch, e.g. `ref: {tag: v1.4.0}`"
    if ref.commit and not _COMMIT.fullmatch(ref.commit):
        return f"commit '{ref.commit}' is not a full 40-character lowercase SHA"
    return None


def manifest_path_problem(path: str) -> Optional[str]:
    """The shape of flux.manifest_path: a URL, an absolute path, or a relative one (the repository's: it must
    stay inside it, which `bootstrap.flux.manifest` checks on the real folders)."""
    if not path.strip() or _CONTROL.search(path) or len(path) > 4096:
        return "give the path of the Flux install manifest file (or an http(s) URL), in one line"
    if path.startswith(("http://", "https://")) or path.startswith("/"):
        return None
    if re.match(r"^[a-z][a-z0-9+.-]*://", path):
        return f"'{path}' is a URL groundctl cannot fetch; give an https:// URL or a file's path"
    if ".." in path.replace("\\", "/").split("/"):
        return (f"'{path}' leaves the repository; a relative path is read inside the repository (the folder that "
                "holds environments/), so name the file there or give an absolute path")
    return None


def environment_problem(spec: EnvironmentSpec, flux_lock: str = "") -> Optional[str]:
    """What production demands, and a service range outside the VPC. `flux_lock`: what the repository's pins
    lock lacks for this spec's Flux manifest (bootstrap.flux.locked), said with the fix."""
    fx = spec.flux
    url = (fx.manifest_path or "").startswith(("http://", "https://"))
    if fx.manifest_sha256 is None and url:
        return (f"flux.manifest_sha256: a manifest fetched from a URL must be pinned by its sha256; record the "
                f"digest Flux publishes for {fx.version}'s install.yaml (flux_{fx.version.lstrip('v')}_checksums.txt"
                "), or drop flux.manifest_path and run `groundctl pins update`, which records it in the "
                "repository's groundctl-pins.json (groundctl's docs/flux-manifest.md)")
    if fx.manifest_sha256 is None and spec.production:
        lacking = f", and {flux_lock}" if flux_lock else ""
        return (f"flux.manifest_sha256: a production environment must pin the Flux install manifest by its sha256"
                f"{lacking}: run `groundctl pins update` in the repository (it reads flux_{fx.version.lstrip('v')}"
                "_checksums.txt, checks its signature and records install.yaml's digest in groundctl-pins.json, "
                "which `spec check` and `up` read), review and commit the lock; or set flux.manifest_sha256 by "
                "hand (groundctl's docs/flux-manifest.md)")
    if spec.production and not spec.flux.ref.pinned:
        return (
            f"flux.ref: this is the branch '{spec.flux.ref.branch}', but a production environment must "
            "deploy a pinned tag or commit; use `ref: {tag: vX.Y.Z}` or `ref: {commit: <sha>}`"
        )
    if spec.production and spec.aws.endpoint_url:
        return (
            "aws.endpoint_url: set on a production environment; emulator endpoints are for "
            "non-production environments only"
        )
    svc = ipaddress.IPv4Network(spec.cluster.service_cidr)
    if svc.overlaps(ipaddress.IPv4Network(spec.network.cidr)):
        return (
            f"cluster.service_cidr: {svc} overlaps network.cidr {spec.network.cidr}; Kubernetes "
            "service addresses must lie outside the VPC, e.g. 172.20.0.0/16"
        )
    return None
