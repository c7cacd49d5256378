"""Cluster tier: `groundctl drill rebuild-cluster` on an environment whose flux layer is real (stacks/flux
through the real engine and Kubernetes provider) and whose backend, network and cluster layers are
stand-ins (tests/engine_programs: the cluster's kubeconfig is the tier's loopback API server).

No Flux controller runs (there are no nodes): the stand-in controller of tests/kube_standin.py marks the
recreated GitRepository and Kustomization Ready a few seconds after it sees them, through the status
subresource, as envtest-based tests do; or, in the second test, keeps the Kustomization Ready=False with
Flux's reason so the drill runs into its deadline.
"""

from __future__ import annotations

import json

import pytest

from tests.cluster_tier import flux_tier, requires_cluster_tier  # noqa: F401 - fixture
from tests.engine_programs.tier import PROGRAMS
from tests.kube_standin import Failure

# A real engine and provider at a load of 10: an up or a destroy of the flux layer takes up to minutes.
pytestmark = [pytest.mark.cluster, requires_cluster_tier, pytest.mark.timeout(900)]

KUSTOMIZATION = "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/flux-system"
PHASES = ["preflight", "baseline", "destroy-flux", "destroy-cluster", "recreate-cluster", "recreate-flux",
          "flux-ready", "verify-kustomizations"]


@pytest.fixture(scope="module")
def drill_env(flux_tier):
    """Every layer up, Flux Ready; the environment is destroyed again after the module."""
    import shutil

    from bootstrap.apply import layer_up

    shutil.copytree(PROGRAMS / "backend", flux_tier.stacks / "backend")
    # The real backend layer adopts the bootstrapped bucket and key with Pulumi's AWS provider, which is
    # not available here: the stand-in backend has nothing to adopt.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(layer_up, "_adopt_backend", lambda *args: False)
        record = flux_tier.cli_json("up", "SPEC", "--yes")
    assert record["outcome"] == "succeeded", record
    flux_tier.notes["standin"].delay = 3.0
    yield flux_tier
    flux_tier.cli("destroy", "SPEC", "--yes")


def _ready(kube) -> bool:
    doc = kube.get(KUSTOMIZATION) or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (doc.get("status") or {}).get("conditions") or [])


def test_rebuild_drill_destroys_and_recreates_flux_and_waits_for_it_ready(drill_env, tmp_path, monkeypatch):
    import threading

    from recovery.drills import rebuild_cluster
    from tests.engine_programs.tier import wait_for

    kube, standin = drill_env.notes["kube"], drill_env.notes["standin"]
    wait_for("Flux Ready before the drill", lambda: _ready(kube), 120)
    uid_before = kube.get(KUSTOMIZATION)["metadata"]["uid"]

    # The recreated objects get no status until the drill's Ready wait has begun: otherwise, at any load, the
    # stand-in may mark them Ready while the flux layer's `up` is still finishing, and the wait would prove
    # nothing. The stand-in resumes 1 s into the wait and marks them `delay` (3 s) after it first sees them.
    real_wait_ready = rebuild_cluster.wait_ready

    def wait_ready_then_resume(*args, **kwargs):
        threading.Timer(1.0, lambda: setattr(standin, "paused", False)).start()
        return real_wait_ready(*args, **kwargs)

    monkeypatch.setattr(rebuild_cluster, "wait_ready", wait_ready_then_resume)
    standin.paused = True
    try:
        code, out, err = drill_env.cli("drill", "rebuild-cluster", "SPEC", "--yes", "--json", "--out", str(tmp_path))
    finally:
        standin.paused = False
    report = json.loads(out)
    assert code == 0, err + json.dumps(report["verdict"])
    assert [p["name"] for p in report["phases"]] == PHASES
    assert all(p["status"] == "achieved" for p in report["phases"]), report["phases"]
    assert report["verdict"]["outcome"] == "passed" and report["verdict"]["rto_seconds"] == 600
    assert all(p["seconds"] is not None and p["seconds"] >= 0 for p in report["phases"])
    ready = next(p for p in report["phases"] if p["name"] == "flux-ready")
    assert ready["seconds"] >= 4  # the pause and the stand-in's delay: the drill waited for Flux to become Ready
    assert report["baseline"]["kustomizations"] == report["after"]["kustomizations"]
    assert kube.get(KUSTOMIZATION)["metadata"]["uid"] != uid_before  # really destroyed and recreated
    assert report["left_half_done"] == []
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".json", ".md", ".svg"]
    assert drill_env.notes["kube"].token not in out + err + "".join(p.read_text() for p in tmp_path.iterdir())


def test_a_kustomization_that_never_gets_ready_ends_the_drill_at_its_deadline_with_flux_reason(drill_env, tmp_path):
    from tests.engine_programs.tier import wait_for

    kube, standin = drill_env.notes["kube"], drill_env.notes["standin"]
    wait_for("Flux Ready before the drill", lambda: _ready(kube), 120)
    spare = frozenset({kube.get(KUSTOMIZATION)["metadata"]["uid"]})  # the baseline is Ready; the recreated one fails
    standin.failures["Kustomization flux-system/flux-system"] = Failure(
        "BuildFailed", "kustomize build failed: accumulating resources: './clusters/local' not found", spare)
    try:
        code, out, err = drill_env.cli("drill", "rebuild-cluster", "SPEC", "--yes", "--json", "--timeout", "1",
                                       "--out", str(tmp_path))
    finally:
        standin.failures.clear()
    report = json.loads(out)
    assert code == 1, err + out
    status = {p["name"]: p for p in report["phases"]}
    assert [status[n]["status"] for n in PHASES[:6]] == ["achieved"] * 6
    ready = status["flux-ready"]
    assert (ready["status"], ready["reason"]) == ("failed", "ReadyTimeout"), ready
    assert "BuildFailed" in ready["message"] and "not Ready after" in ready["message"]
    assert 60 <= ready["seconds"] < 180
    assert status["verify-kustomizations"]["status"] == "not-attempted"
    assert report["verdict"]["outcome"] == "failed"
    # Both layers are back (only Flux's reconciliation is not): nothing is reported half-destroyed, and nothing is.
    assert report["left_half_done"] == []
    assert kube.get(KUSTOMIZATION) is not None
