"""A cluster whose Flux another tool owns (`flux bootstrap`, `flux install`, Helm, kubectl) is found before the
flux layer applies, and the run is refused with the adoption runbook instead of two owners fighting
(issue 27 §4). The decision is pure over what a read returns; the read goes through the Kubernetes API double."""

from __future__ import annotations

import pytest

from bootstrap.kit.errors import EngineError, Refused
from bootstrap.flux.owners import RUNBOOK, owner_evidence, read_flux_system
from bootstrap.kube.api import HttpKubeApi, KubeTarget
from tests.conftest import REPO
from tests.fakes.flux_system import (CONTROLLERS, DEPLOYMENTS, GIT_REPOSITORY, KUSTOMIZATION, NAMESPACE,
                                      FluxSystemApi, managed, obj)
from tests.fakes.k8s import serve_http
from tests.test_orchestrator import build_up, run, services, UpOptions, world  # noqa: F401 - the fixture

PULUMI = managed("pulumi-kubernetes-6f2a9c1e")
BOOTSTRAP_LABEL = {"kustomize.toolkit.fluxcd.io/name": "flux-system",
                   "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}


def _ours() -> FluxSystemApi:
    """What the flux layer leaves, with what running Flux adds: status, finalizers, a revision, a restart."""
    running = (managed("kube-controller-manager", "Update"), managed("kube-controller-manager", "Update", "status"),
               managed("kubectl-rollout", "Update"))
    return FluxSystemApi(
        [obj("Deployment", c, labels={"app.kubernetes.io/part-of": "flux"}, managers=(PULUMI, *running))
         for c in CONTROLLERS],
        source=obj("GitRepository", "flux-system", managers=(
            PULUMI, managed("source-controller", "Update"), managed("source-controller", "Update", "status"))),
        kustomization=obj("Kustomization", "flux-system", managers=(
            PULUMI, managed("kustomize-controller", "Update"), managed("kustomize-controller", "Update", "status"))))


def _bootstrapped() -> FluxSystemApi:
    """What `flux bootstrap` leaves: its CLI applied everything, and Flux's root Kustomization applies it back."""
    kc = (managed("flux"), managed("kustomize-controller"))
    return FluxSystemApi([obj("Deployment", c, labels=BOOTSTRAP_LABEL, managers=kc) for c in CONTROLLERS],
                         source=obj("GitRepository", "flux-system", labels=BOOTSTRAP_LABEL, managers=kc),
                         kustomization=obj("Kustomization", "flux-system", labels=BOOTSTRAP_LABEL, managers=kc))


def test_a_cluster_without_flux_and_one_the_layer_owns_have_no_other_owner():
    empty = FluxSystemApi()
    assert read_flux_system(empty) == [] and owner_evidence(read_flux_system(empty)) == []
    assert owner_evidence(read_flux_system(_ours())) == []


def test_a_bootstrapped_cluster_is_found_by_its_label_and_its_managers():
    evidence = owner_evidence(read_flux_system(_bootstrapped()))
    assert len(evidence) == len(CONTROLLERS) + 2
    assert any(e.startswith("Deployment flux-system/source-controller has the label "
                            "kustomize.toolkit.fluxcd.io/name=flux-system") for e in evidence), evidence
    assert all("field managers flux, kustomize-controller" in e for e in evidence)


@pytest.mark.parametrize("manager, operation", [("flux", "Apply"), ("helm", "Update"),
                                                ("kubectl-client-side-apply", "Update"), ("kubectl", "Apply"),
                                                ("kustomize-controller", "Apply")])
def test_an_installer_is_an_owner_even_without_the_label(manager, operation):
    api = _ours()
    api.docs[api_path := "/apis/apps/v1/namespaces/flux-system/deployments"]["items"][0]["metadata"][
        "managedFields"].append(managed(manager, operation))
    (line,) = owner_evidence(read_flux_system(api))
    assert api_path in api.paths and f"field manager {manager}" in line and "source-controller" in line


def _with_entries(api: FluxSystemApi, *entries: dict) -> FluxSystemApi:
    for doc in (api.docs[DEPLOYMENTS]["items"][0], api.docs[GIT_REPOSITORY], api.docs[KUSTOMIZATION]):
        doc["metadata"]["managedFields"] += [dict(e) for e in entries]
    return api


# What an operator's fix by hand leaves (`kubectl edit`, `kubectl patch`: drift put right through the API), what
# the flux CLI's `reconcile` and `suspend` leave, and what controllers write through the status subresource, by
# update or by server-side apply: none of them installs Flux, and Pulumi's next apply takes its fields back.
BY_HAND = (managed("kubectl-edit", "Update"), managed("kubectl-patch", "Update"), managed("kubectl", "Update"),
           managed("kubectl-annotate", "Update"), managed("flux-client-side-apply", "Update"))
STATUS = (managed("kube-controller-manager", "Update", "status"), managed("kustomize-controller", "Apply", "status"),
          managed("source-controller", "Update", "status"), managed("some-operator", "Apply", "status"))


@pytest.mark.parametrize("entry", BY_HAND + STATUS, ids=lambda e: f"{e['manager']}-{e['operation']}")
def test_an_edit_by_hand_or_a_status_writer_is_not_an_owner(entry):
    assert owner_evidence(read_flux_system(_with_entries(_ours(), entry))) == []


def test_the_label_on_the_namespace_alone_is_flux_bootstrap():
    api = _ours()
    api.docs[NAMESPACE] = obj("Namespace", "flux-system", labels=BOOTSTRAP_LABEL, managers=(PULUMI,))
    assert owner_evidence(read_flux_system(api)) == [
        "Namespace flux-system has the label kustomize.toolkit.fluxcd.io/name=flux-system (Flux's own root "
        "Kustomization applies it)"]


def test_an_api_that_does_not_answer_is_an_engine_error_not_a_pass():
    class Down:
        def get_json(self, path):
            raise OSError("connection refused")

    with pytest.raises(EngineError, match="could not be read"):
        read_flux_system(Down())


def test_the_read_over_a_real_socket_sees_the_bootstrap():
    with serve_http(_bootstrapped(), "t0ken") as url:
        api = HttpKubeApi(KubeTarget(url, None, "t0ken"))
        assert len(owner_evidence(read_flux_system(api))) == len(CONTROLLERS) + 2


def test_up_refuses_the_flux_layer_before_its_preview_and_names_the_runbook(world):
    engine, open_, clock = world
    assert (REPO / RUNBOOK).is_file()
    for api, refused in ((_bootstrapped(), True), (_ours(), False), (_with_entries(_ours(), *BY_HAND), False)):
        svc = services(clock, probe=lambda host, port: None, kube=api)
        engine.calls.clear()
        with open_() as target:
            outcome = run(target, build_up(target.spec, None, emulated=False), svc, UpOptions(yes=True))
        if refused:
            assert isinstance(outcome.error, Refused) and outcome.error.exit_code == 3
            assert RUNBOOK in outcome.error.message and "kustomize.toolkit.fluxcd.io/name" in outcome.error.message
            assert ("preview", "flux") not in engine.calls and ("up", "flux") not in engine.calls
        else:  # past the check (Flux's readiness, read through the same double, is another test's)
            assert not isinstance(outcome.error, Refused), outcome.error
            assert ("preview", "flux") in engine.calls
