"""The cluster tier's harness: the real `stacks/flux` program through the real Pulumi CLI and Kubernetes
provider, against the session's loopback API server (tests/kubeapi.py), driven by groundctl's own commands.

The environment is the engine tier's (tests/engine_programs/tier.py: DIY backend in the emulator's S3,
passphrase secrets, a private PULUMI_HOME, the engine's `stacks_dir` seam) with a stacks folder whose
`flux` is a copy of the real program and whose `network` and `cluster` are stand-ins: the cluster
stand-in (tests/engine_programs/kubecluster) exports the tier's kubeconfig as a secret output, which the
real flux program reads through its StackReference as in production. AWS stays the emulator, so the
target is told that its Kubernetes half is real (`Target.emulated` is False here): the flux layer is not
skipped as it is on a plain emulator, and its API endpoint is probed as on a real cluster.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO, pulumi_binary
from tests.engine_programs.tier import PROGRAMS, Tier, make_tier, tier_environment
from tests.kube_standin import StandIn
from tests.kubeapi import missing_binaries

DEPLOY_KEY = ("-----BEGIN OPENSSH PRIVATE KEY-----\n"
              "canary-cluster-tier-deploy-key-Zq81mW0x3vPd\n"
              "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQy\n"
              "-----END OPENSSH PRIVATE KEY-----\n")
KNOWN_HOSTS = "git.example.invalid ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
MANIFEST = REPO / "tests" / "data" / "flux" / "install.yaml"
# Pinned as an operator records a release's digest (tests/data/flux/PROVENANCE.md): every `up` of the tier
# verifies it, groundctl before the run and the real program before it applies.
MANIFEST_SHA256 = "370ddf47e4d98e60c13daa585e595bbf0f4527df5294cebc83b4d2c0498e8967"
TIER_MANIFEST = "manifests/flux.yaml"  # the tier's folder is its repository (it holds stacks/): its copy is here
LAYERS = "network,cluster,flux"


def _missing() -> list[str]:
    missing = missing_binaries()
    if pulumi_binary() is None:
        missing.append("pulumi")
    if shutil.which("pulumi-resource-kubernetes") is None:
        missing.append("pulumi-resource-kubernetes")
    return missing


requires_cluster_tier = pytest.mark.skipif(
    bool(_missing()),
    reason=f"the cluster tier needs {', '.join(_missing())} on PATH (built by hand, as docs/testing.md "
           "says: etcd from Debian's etcd-server, kube-apiserver and kube-controller-manager from k8s.io/kubernetes, "
           "pulumi-resource-kubernetes from pulumi/pulumi-kubernetes, the Pulumi CLI)")


def _flux_spec(data: dict, manifest: Path) -> None:
    data["flux"] = {"version": "v2.7.0", "repository_url": "ssh://git@git.example.invalid/acme/fleet.git",
                    "ref": {"tag": "fleet-v1.0.0"}, "manifest_path": str(manifest),
                    "manifest_sha256": MANIFEST_SHA256, "interval": "1m"}
    data["recovery"]["rto_minutes"] = 10


def make_flux_tier(tmp: Path, endpoint: str, kube) -> Tier:
    # A file of the tier's repository: the program is told it relative to stacks/flux, as a fleet repository's own.
    (tmp / TIER_MANIFEST).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(MANIFEST, tmp / TIER_MANIFEST)
    tier = make_tier(tmp, endpoint, lambda data: _flux_spec(data, tmp / TIER_MANIFEST))
    shutil.rmtree(tier.stacks / "cluster")
    shutil.copytree(PROGRAMS / "kubecluster", tier.stacks / "cluster")
    shutil.copytree(REPO / "stacks" / "flux", tier.stacks / "flux",
                    ignore=shutil.ignore_patterns("Pulumi.*.yaml", "__pycache__"))
    tier.env.update({"CLUSTER_TIER_KUBECONFIG": str(kube.kubeconfig_path), "CLUSTER_TIER_SERVER": kube.server,
                     "GROUNDCTL_FLUX_DEPLOY_KEY": DEPLOY_KEY, "GROUNDCTL_FLUX_KNOWN_HOSTS": KNOWN_HOSTS})
    return tier


@pytest.fixture(scope="module")
def flux_tier(tmp_path_factory, emulator_endpoint, kube_cluster):
    """One environment per test module on the session's API server, with the Flux stand-in controller running."""
    tier = make_flux_tier(tmp_path_factory.mktemp("cluster-tier"), emulator_endpoint, kube_cluster)
    standin = StandIn(kube_cluster).start()
    tier.notes["standin"] = standin
    tier.notes["kube"] = kube_cluster
    with tier_environment(tier) as mp:
        from bootstrap import target as target_module

        # AWS is the emulator, Kubernetes is real: the one seam between the two.
        mp.setattr(target_module.Target, "emulated", property(lambda self: False))
        try:
            yield tier
        finally:
            standin.stop()
