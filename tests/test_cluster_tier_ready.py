"""Cluster tier: bootstrap/flux/ and bootstrap/kube/api.py against a real API server, not the in-test double.

The GitRepository and Kustomization CRDs come from tests/data/flux/install.yaml, the objects are created
through the API, and their status is written through the status subresource by the test itself, the way
a Flux controller (or an envtest-based test) would: there are no nodes, so no controller runs. The
client is the product's own (`api_from_kubeconfig`: TLS against the kubeconfig's CA, bearer token).
"""

from __future__ import annotations

import time
import uuid

import pytest
import yaml

from bootstrap.flux.wait import observe, wait_ready
from bootstrap.kube.api import api_from_kubeconfig
from tests.cluster_tier import MANIFEST
from tests.kubeapi import skip_reason

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(bool(skip_reason()), reason=skip_reason() or "")]

KS = "/apis/kustomize.toolkit.fluxcd.io/v1"
SRC = "/apis/source.toolkit.fluxcd.io/v1"


@pytest.fixture(scope="module")
def flux_crds(kube_cluster):
    """The two CRDs from the air-gapped manifest, created for this module and deleted after it."""
    crds = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d and d["kind"] == "CustomResourceDefinition"]
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in crds:
        status, doc = kube_cluster.request("POST", path, crd)
        assert status in (201, 409), doc

    def established():
        for crd in crds:
            doc = kube_cluster.get(f"{path}/{crd['metadata']['name']}") or {}
            if not any(c["type"] == "Established" and c["status"] == "True"
                       for c in (doc.get("status") or {}).get("conditions") or []):
                return False
        return kube_cluster.request("GET", f"{KS}/kustomizations")[0] == 200
    deadline = time.monotonic() + 60
    while not established():
        assert time.monotonic() < deadline, "the Flux CRDs were not established within 60 s"
        time.sleep(0.2)
    yield
    for crd in crds:
        kube_cluster.request("DELETE", f"{path}/{crd['metadata']['name']}")


@pytest.fixture
def namespace(kube_cluster, flux_crds):
    name = f"ready-{uuid.uuid4().hex[:8]}"
    assert kube_cluster.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})[0] == 201
    yield name
    kube_cluster.request("DELETE", f"/api/v1/namespaces/{name}")


def _create(kube, namespace: str, kind: str, name: str, spec: dict) -> dict:
    base, plural = (KS, "kustomizations") if kind == "Kustomization" else (SRC, "gitrepositories")
    body = {"apiVersion": base.removeprefix("/apis/"), "kind": kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}
    status, doc = kube.request("POST", f"{base}/namespaces/{namespace}/{plural}", body)
    assert status == 201, doc
    return doc


def _status(kube, doc: dict, ready: str, reason: str, message: str, observed: int, revision: str = "") -> None:
    """What a Flux controller writes: the Ready condition at an observed generation, through /status."""
    kind = doc["kind"]
    base, plural = (KS, "kustomizations") if kind == "Kustomization" else (SRC, "gitrepositories")
    meta = doc["metadata"]
    status = {"observedGeneration": observed, "conditions": [{
        "type": "Ready", "status": ready, "reason": reason, "message": message, "observedGeneration": observed,
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}
    if revision:
        status |= {"lastAppliedRevision": revision, "lastAttemptedRevision": revision}
    code, answer = kube.request("PATCH", f"{base}/namespaces/{meta['namespace']}/{plural}/{meta['name']}/status",
                                {"status": status}, content_type="application/merge-patch+json")
    assert code == 200, answer


def _ks_spec(source: str = "flux-system") -> dict:
    return {"interval": "1m", "path": "./apps", "prune": True, "sourceRef": {"kind": "GitRepository", "name": source}}


def _git_spec() -> dict:
    return {"interval": "1m", "url": "https://git.example.invalid/acme/fleet.git", "ref": {"tag": "v1"}}


def test_a_cluster_without_flux_crds_is_flux_not_installed(kube_cluster):
    """Before the flux layer (or after its destroy) the API serves no Flux kinds: said so, not an API failure."""
    api = api_from_kubeconfig(kube_cluster.kubeconfig)
    if kube_cluster.request("GET", f"{KS}/kustomizations")[0] != 404:
        pytest.skip("another test module of this session left the Flux CRDs installed")
    result = observe(api)
    assert (result.outcome, result.reason) == ("waiting", "FluxNotInstalled")


def test_ready_kustomizations_are_read_from_the_api_with_their_revisions(kube_cluster, namespace):
    api = api_from_kubeconfig(kube_cluster.kubeconfig)
    ks = _create(kube_cluster, namespace, "Kustomization", "apps", _ks_spec())
    _status(kube_cluster, ks, "True", "ReconciliationSucceeded", "Applied revision: v1@sha1:aa", 1, "v1@sha1:aa")
    key = f"{namespace}/apps"
    result = wait_ready(api, timeout_seconds=30, expected={key: None})
    assert (result.outcome, result.reason) == ("ready", "AllReady"), result
    assert result.revisions[key] == "v1@sha1:aa"


def test_not_ready_says_flux_reason_and_names_the_failing_source(kube_cluster, namespace):
    api = api_from_kubeconfig(kube_cluster.kubeconfig)
    src = _create(kube_cluster, namespace, "GitRepository", "fleet", _git_spec())
    _status(kube_cluster, src, "False", "GitOperationFailed", "failed to checkout and determine revision", 1)
    ks = _create(kube_cluster, namespace, "Kustomization", "apps", _ks_spec("fleet"))
    _status(kube_cluster, ks, "False", "ArtifactFailed", "Source artifact not found, retrying in 30s", 1)
    result = observe(api, {f"{namespace}/apps": None})
    assert (result.outcome, result.reason) == ("waiting", "NotReady")
    assert "Ready=False (ArtifactFailed: Source artifact not found" in result.message
    assert f"its GitRepository {namespace}/fleet is Ready=False (GitOperationFailed: failed to checkout" in result.message


def test_an_absent_kustomization_is_missing_and_the_wait_ends_at_its_deadline(kube_cluster, namespace):
    api = api_from_kubeconfig(kube_cluster.kubeconfig)
    started = time.monotonic()
    result = wait_ready(api, timeout_seconds=3, expected={f"{namespace}/never": None})
    assert (result.outcome, result.reason) == ("timeout", "Timeout"), result
    assert f"not there yet: {namespace}/never" in result.message and result.polls >= 1
    assert time.monotonic() - started < 30


def test_a_spec_change_not_yet_observed_is_not_ready_until_flux_catches_up(kube_cluster, namespace):
    api = api_from_kubeconfig(kube_cluster.kubeconfig)
    ks = _create(kube_cluster, namespace, "Kustomization", "apps", _ks_spec())
    _status(kube_cluster, ks, "True", "ReconciliationSucceeded", "Applied revision: v1@sha1:aa", 1, "v1@sha1:aa")
    path = f"{KS}/namespaces/{namespace}/kustomizations/apps"
    status, doc = kube_cluster.request("PATCH", path, {"spec": {"prune": False}},
                                       content_type="application/merge-patch+json")
    assert status == 200 and doc["metadata"]["generation"] == 2  # the API server moved the generation on
    result = observe(api, {f"{namespace}/apps": None})
    assert result.outcome == "waiting"
    assert "not yet observed at generation 2 (Flux last reconciled generation 1)" in result.message
    _status(kube_cluster, doc, "True", "ReconciliationSucceeded", "Applied revision: v1@sha1:aa", 2, "v1@sha1:aa")
    assert observe(api, {f"{namespace}/apps": None}).outcome == "ready"
