"""Cluster tier: the real flux layer (stacks/flux, not a stand-in) through groundctl's commands, the real
Pulumi CLI and the real Kubernetes provider, against the session's loopback API server.

The cluster layer is a stand-in whose kubeconfig output is the tier's (tests/engine_programs/kubecluster);
the network layer is the engine tier's stand-in. No Flux controller runs (there are no nodes): the
stand-in controller of tests/kube_standin.py marks the controllers' Deployments available and the
GitRepository and Kustomization Ready through the status subresource, as envtest-based tests do, and
`up` waits for that (or, when the stand-in keeps the root Kustomization Ready=False, fails with its
reason at the spec's deadline). The tests share one environment and run in file order.
"""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
import yaml

from bootstrap.flux.owners import LABEL, RUNBOOK
from bootstrap.records.ledger import read_ledger
from recovery.evidence.rehearsal_record import load_rehearsal_record
from tests.cluster_tier import (DEPLOY_KEY, LAYERS, MANIFEST, MANIFEST_SHA256, TIER_MANIFEST,  # noqa: F401
                                flux_tier, requires_cluster_tier)
from tests.engine_programs.tier import PASSPHRASE, wait_for
from tests.kube_standin import HASH, Failure

# A real engine and provider at a load of 10: an up or a destroy of the flux layer takes up to minutes.
pytestmark = [pytest.mark.cluster, requires_cluster_tier, pytest.mark.timeout(900)]

NS = "flux-system"
GITREPO = f"/apis/source.toolkit.fluxcd.io/v1/namespaces/{NS}/gitrepositories/flux-system"
KUSTOMIZATION = f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{NS}/kustomizations/flux-system"
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NS}/deployments/source-controller"
SECRET = f"/api/v1/namespaces/{NS}/secrets/flux-system"
CRDS = ("gitrepositories.source.toolkit.fluxcd.io", "kustomizations.kustomize.toolkit.fluxcd.io")
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # sdk/go/common/resource/sig: how a state file marks a secret
KEY_LINES = [ln for ln in DEPLOY_KEY.splitlines() if len(ln) >= 16]
REHEARSALS = ".groundctl/rehearsals/"
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def _layers(record: dict) -> dict:
    return {lay["layer"]: lay for lay in record["layers"]}


def _everything_stored(tier) -> str:
    """Every object in the state and records buckets, every version, and the stack config files."""
    texts = []
    for bucket in (tier.state_bucket, tier.records_bucket):
        for page in tier.s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for v in page.get("Versions", []):
                body = tier.s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
                texts.append(body.decode("utf-8", "replace"))
    texts += [p.read_text() for p in tier.stacks.glob("*/Pulumi.*.yaml")]
    return "\n".join(texts)


def _assert_no_key(*texts: str) -> None:
    b64 = base64.b64encode(DEPLOY_KEY.encode()).decode()
    for text in texts:
        for needle in (DEPLOY_KEY, b64, *KEY_LINES):
            assert needle not in text, f"the deploy key (or a line of it) leaked: {needle[:24]}…"
        assert PASSPHRASE not in text


def _pulumi_writes(kube, since: int) -> list[tuple]:
    """What the Kubernetes provider (Pulumi's user agent) changed on the API server after audit event `since`. A
    preview's server-side apply is a dry run (`dryRun=All`, how the provider diffs in that mode): it changes nothing."""
    return [(e["verb"], e["objectRef"].get("resource"), e["objectRef"].get("name")) for e in kube.audit()[since:]
            if e["stage"] == "ResponseComplete" and e["verb"] in WRITES and "pulumi" in e.get("userAgent", "").lower()
            and "dryRun=All" not in e.get("requestURI", "")]


def _apply(kube, path: str, manager: str, obj: dict) -> None:
    """A server-side apply by `manager` (JSON is YAML), as the `flux` CLI or a self-managed Flux applies."""
    status, doc = kube.request("PATCH", f"{path}?fieldManager={manager}&force=true", obj,
                               content_type="application/apply-patch+yaml")
    assert status == 200, doc


def _managers(kube, path: str) -> set[str]:
    return {e["manager"] for e in kube.get(path)["metadata"].get("managedFields") or []}


def _stored(tier) -> dict:
    """Every version of every object in the state and records buckets (delete markers too) with its bytes'
    sha256, but the rehearsal records and the environment's summary each rehearsal updates beside them
    (recovery.evidence.summary)."""
    from recovery.evidence import summary

    ours = (REHEARSALS, summary.key(tier.env_name))
    out = {}
    for bucket in (tier.state_bucket, tier.records_bucket):
        for page in tier.s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            for v in page.get("Versions", []):
                if not v["Key"].startswith(ours):
                    body = tier.s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read()
                    out[(bucket, v["Key"], v["VersionId"])] = (hashlib.sha256(body).hexdigest(), v["IsLatest"])
            for m in page.get("DeleteMarkers", []):
                if not m["Key"].startswith(ours):
                    out[(bucket, m["Key"], m["VersionId"])] = ("delete-marker", m["IsLatest"])
    return out


def test_up_installs_flux_from_the_air_gapped_manifest_and_meets_the_output_contract(flux_tier):
    kube = flux_tier.notes["kube"]
    code, out, err = flux_tier.cli("up", "SPEC", "--layers", LAYERS, "--yes", "--json")
    assert code == 0, err + out
    record = json.loads(out)
    assert record["outcome"] == "succeeded", record
    flux = _layers(record)["flux"]
    assert flux["achieved"] == "applied", record
    # The run ended with Flux's own readiness, read through the cluster's API with the layer's kubeconfig.
    ready = flux["phases"][-1]
    assert (ready["name"], ready["outcome"]) == ("flux-ready", "ok"), flux["phases"]
    assert ready["detail"].startswith("2 controller(s) available; the root Kustomization flux-system/flux-system "
                                      f"Ready at fleet-v1.0.0@sha1:{HASH}"), ready
    flux_tier.notes["texts"] = [out, err]

    assert kube.get(f"/api/v1/namespaces/{NS}")["status"]["phase"] == "Active"
    for crd in CRDS:
        assert kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}") is not None
    for name in ("source-controller", "kustomize-controller"):
        deployment = kube.get(f"/apis/apps/v1/namespaces/{NS}/deployments/{name}")
        assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].startswith(f"ghcr.io/fluxcd/{name}:")
        # The provider does not await it; `up` waited for it to be available (as the stand-in made it: no node runs it).
        assert deployment["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
        assert deployment["status"]["availableReplicas"] == deployment["spec"]["replicas"] == 1
    # Awaited, so that its deletion is awaited too.
    assert "pulumi.com/skipAwait" not in (kube.get(f"/api/v1/namespaces/{NS}")["metadata"].get("annotations") or {})
    secret = kube.get(SECRET)
    assert base64.b64decode(secret["data"]["identity"]).decode() == DEPLOY_KEY
    assert base64.b64decode(secret["data"]["known_hosts"]).decode().startswith("git.example.invalid ")
    repo = kube.get(GITREPO)["spec"]
    assert repo["url"] == "ssh://git@git.example.invalid/acme/fleet.git"
    assert repo["ref"] == {"tag": "fleet-v1.0.0"} and repo["secretRef"] == {"name": "flux-system"}
    ks = kube.get(KUSTOMIZATION)["spec"]
    assert ks["prune"] is True and ks["path"] == "./clusters/local"
    assert ks["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}

    # The program was told the manifest relative to stacks/flux, where the real provider read it; the update's
    # recorded config says so, and no record of the layer names the folder this clone sits in (the provider
    # registers the controllers' component without its inputs, so the state never held the path).
    clone = str(flux_tier.stacks.parent)
    history = flux_tier.s3.list_objects_v2(Bucket=flux_tier.state_bucket, Prefix=".pulumi/history/flux/")
    (key,) = [o["Key"] for o in history.get("Contents", []) if o["Key"].endswith(".history.json")]
    recorded = flux_tier.s3.get_object(Bucket=flux_tier.state_bucket, Key=key)["Body"].read().decode()
    assert json.loads(recorded)["config"]["flux:manifestPath"] == f"../../{TIER_MANIFEST}", recorded
    assert clone not in recorded and clone not in json.dumps(flux_tier.engine().export_state("flux"))

    outputs = flux_tier.engine().outputs("flux")
    assert outputs.values["flux_namespace"] == NS and outputs.values["flux_version"] == "v2.7.0"
    assert outputs.values["git_repository"] == f"{NS}/flux-system"
    assert outputs.values["kustomization"] == f"{NS}/flux-system"
    assert outputs.values["groundctl_lineage"]
    assert not outputs.secret_keys  # the deploy key is never exported


def _ready(kube, path: str):
    doc = kube.get(path) or {}
    return next((c["status"] for c in (doc.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), None)


def test_the_stand_in_controller_marks_flux_ready_through_the_status_subresource(flux_tier):
    kube = flux_tier.notes["kube"]
    wait_for("the stand-in to mark the Kustomization Ready",
             lambda: _ready(kube, KUSTOMIZATION) == _ready(kube, GITREPO) == "True", 120)
    assert kube.get(GITREPO)["status"]["artifact"]["revision"] == f"fleet-v1.0.0@sha1:{HASH}"  # the spec's tag
    assert kube.get(KUSTOMIZATION)["status"]["lastAppliedRevision"] == f"fleet-v1.0.0@sha1:{HASH}"
    assert not flux_tier.notes["standin"].errors


def test_a_second_up_changes_nothing(flux_tier):
    record = flux_tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")
    assert {k: v["achieved"] for k, v in _layers(record).items()} == {
        "network": "unchanged", "cluster": "unchanged", "flux": "unchanged"}, record
    assert flux_tier.ledger_serials("flux") == [1]


def test_up_refuses_a_flux_another_tool_also_owns_and_names_each_object_as_the_api_lists_it(flux_tier):
    """The check before the flux layer reads the objects the real API server returns: what the layer's own `up`
    left (Pulumi's managers, the stand-in's status updates) passed above; a server-side apply by the `flux` CLI on
    a controller and by a self-managed Flux's kustomize-controller (with Flux's label) on the root Kustomization
    is another owner, named object by object, and nothing is applied (exit 3)."""
    kube = flux_tier.notes["kube"]
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "source-controller",
                                                                                "namespace": NS}}
    ks = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
          "metadata": {"name": "flux-system", "namespace": NS}}
    audit_from = len(kube.audit())
    try:
        _apply(kube, DEPLOYMENT, "flux", {**deployment, "metadata": {
            **deployment["metadata"], "annotations": {"example.invalid/installed-by": "flux install"}}})
        _apply(kube, KUSTOMIZATION, "kustomize-controller", {**ks, "metadata": {
            **ks["metadata"], "labels": {LABEL: "flux-system"}}})
        code, out, err = flux_tier.cli("up", "SPEC", "--layers", "flux", "--yes", "--json")
    finally:  # an apply of nothing gives up every field the manager owned, and the manager goes
        _apply(kube, DEPLOYMENT, "flux", deployment)
        _apply(kube, KUSTOMIZATION, "kustomize-controller", ks)
    assert code == 3, err + out
    said = " ".join(err.split())
    assert "Deployment flux-system/source-controller has field manager flux" in said, said
    assert (f"Kustomization flux-system/flux-system has the label {LABEL}=flux-system (Flux's own root Kustomization "
            "applies it) and field manager kustomize-controller") in said, said
    assert RUNBOOK in said and "nothing was applied" in said
    assert _layers(json.loads(out))["flux"]["achieved"] != "applied", out
    assert _pulumi_writes(kube, audit_from) == []
    assert flux_tier.ledger_serials("flux") == [1]
    assert "flux" not in _managers(kube, DEPLOYMENT) and "kustomize-controller" not in _managers(kube, KUSTOMIZATION)
    assert LABEL not in (kube.get(KUSTOMIZATION)["metadata"].get("labels") or {})


def test_a_manifest_whose_sha256_is_not_the_pinned_one_is_refused_before_anything_is_applied(flux_tier, tmp_path):
    kube = flux_tier.notes["kube"]
    assert hashlib.sha256(MANIFEST.read_bytes()).hexdigest() == MANIFEST_SHA256  # what every `up` here verified
    wrong = "ab" * 32  # a digest of other bytes (64 zeros are the example's placeholder: refused as one)
    data = yaml.safe_load(flux_tier.spec_path.read_text())
    data["flux"]["manifest_sha256"] = wrong
    spec = tmp_path / "local.yaml"
    spec.write_text(yaml.safe_dump(data))
    audit_from = len(kube.audit())
    code, out, err = flux_tier.cli("up", str(spec), "--layers", "flux", "--yes", "--json")
    assert code == 2, err + out
    said = " ".join(err.split())
    assert f"has sha256 {MANIFEST_SHA256}, but flux.manifest_sha256 pins {wrong}; nothing was applied" in said, said
    assert _pulumi_writes(kube, audit_from) == []
    assert flux_tier.ledger_serials("flux") == [1]


def test_up_fails_with_fluxs_reason_when_the_root_kustomization_never_gets_ready(flux_tier, tmp_path):
    """The stand-in keeps the root Kustomization Ready=False: `up` waits out the spec's deadline (one minute
    here) and fails (exit 4) with Flux's reason and message; nothing is applied again."""
    kube, standin = flux_tier.notes["kube"], flux_tier.notes["standin"]
    data = yaml.safe_load(flux_tier.spec_path.read_text())
    data["flux"]["ready_timeout_minutes"] = 1
    strict = tmp_path / "local.yaml"
    strict.write_text(yaml.safe_dump(data))
    standin.failures["Kustomization flux-system/flux-system"] = Failure(
        "BuildFailed", "kustomize build failed: accumulating resources: './clusters/local' not found")
    try:
        wait_for("the stand-in to mark the root Kustomization Ready=False", lambda: _ready(kube, KUSTOMIZATION) == "False",
                 120)
        code, out, err = flux_tier.cli("up", str(strict), "--layers", "flux", "--yes", "--json")
    finally:
        standin.failures.clear()
    assert code == 4, err + out
    record = json.loads(out)
    assert record["outcome"] == "failed" and record["stopped_at"] == "flux/flux-ready", record
    flux = _layers(record)["flux"]
    assert flux["achieved"] == "unchanged" and "Flux not ready (BuildFailed)" in flux["message"], flux
    phase = flux["phases"][-1]
    assert (phase["name"], phase["outcome"]) == ("flux-ready", "failed")
    assert 60 <= phase["seconds"] < 120, phase  # the deadline, and the last poll's requests at most
    said = " ".join(err.split())
    assert "within flux.ready_timeout_minutes (1 min; reason BuildFailed)" in said, said
    assert ("the root Kustomization flux-system/flux-system is Ready=False (BuildFailed: kustomize build failed: "
            "accumulating resources: './clusters/local' not found)") in said
    assert flux_tier.ledger_serials("flux") == [1]
    flux_tier.notes["texts"] += [out, err]
    wait_for("the root Kustomization Ready again", lambda: _ready(kube, KUSTOMIZATION) == "True", 120)


def test_drift_sees_changes_made_with_the_api_outside_pulumi(flux_tier):
    kube = flux_tier.notes["kube"]
    clean = flux_tier.cli_json("drift", "SPEC", "--layers", "flux")
    assert clean["drift"] is False, clean

    status, doc = kube.request("PATCH", KUSTOMIZATION + "?fieldManager=kubectl-edit", {"spec": {"prune": False}},
                               content_type="application/merge-patch+json")
    assert status == 200, doc
    secret = kube.get(SECRET)
    status, doc = kube.request("DELETE", SECRET)
    assert status == 200, doc
    code, out, err = flux_tier.cli("drift", "SPEC", "--layers", "flux", "--json")
    assert code == 1, err + out
    row = json.loads(out)["layers"][0]
    assert row["state"] == "drift", row
    changed = {c["urn"].rsplit("::", 1)[1]: c for c in row["changes"]}
    assert changed["root-kustomization"]["operation"] == "update", changed
    assert changed["flux-deploy-key"]["operation"] == "create", changed
    flux_tier.notes["texts"] += [out, err]

    # `up` would not repair this: it previews without a refresh, as Pulumi's update does, so against its
    # state nothing changed. Put things back as Pulumi left them, through the API, as an operator would.
    status, doc = kube.request("PATCH", KUSTOMIZATION + "?fieldManager=kubectl-edit", {"spec": {"prune": True}},
                               content_type="application/merge-patch+json")
    assert status == 200, doc
    meta = {k: v for k, v in secret["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    status, doc = kube.request("POST", f"/api/v1/namespaces/{NS}/secrets", {**secret, "metadata": meta})
    assert status == 201, doc
    assert flux_tier.cli_json("drift", "SPEC", "--layers", "flux")["drift"] is False
    # The fix by hand left kubectl-edit's update on the Kustomization: an edit, not another owner of Flux.
    code, out, err = flux_tier.cli("up", "SPEC", "--layers", "flux", "--yes", "--json")
    assert code == 0 and _layers(json.loads(out))["flux"]["achieved"] == "unchanged", err + out


def test_a_rehearsal_of_the_flux_layer_proves_it_then_names_drift_made_with_the_api(flux_tier):
    """Issue 28: `state rehearse` restores the flux layer's chosen version (and the layers it reads) into a
    scratch backend and previews it with a refresh against the real API server: no change; then, after a
    field the layer manages is changed through the API, drift naming that resource. The real stacks' objects
    are byte-identical before and after (but the rehearsal records), and the API server saw no write."""
    kube = flux_tier.notes["kube"]
    before, audit_from = _stored(flux_tier), len(kube.audit())
    head = read_ledger(flux_tier.store, "flux", flux_tier.env_name).head
    code, out, err = flux_tier.cli("state", "rehearse", "SPEC", "--layers", "flux", "--record", "--json")
    assert code == 0, err + out
    clean = json.loads(out)
    flux_tier.notes["texts"] += [out, err]
    flux = _layers(clean)["flux"]
    assert clean["outcome"] == "proven" and flux["outcome"] == "proven", flux
    assert (flux["version"]["serial"], flux["version"]["version_id"]) == (head.serial, head.version_id)
    assert flux["decrypt"]["result"] == "ok" and flux["decrypt"]["secrets"] >= 1  # the deploy key
    assert flux["preview"]["result"] == "no-change", flux["preview"]
    # What the program reads through StackReferences was restored first; this tier has no backend layer.
    assert [(r["layer"], r["deployed"], r["restored"]) for r in flux["references"]] == [
        ("backend", False, False), ("network", True, True), ("cluster", True, True)], flux["references"]

    status, doc = kube.request("PATCH", GITREPO + "?fieldManager=kubectl-edit", {"spec": {"interval": "7m"}},
                               content_type="application/merge-patch+json")
    assert status == 200, doc
    try:
        code, out, err = flux_tier.cli("state", "rehearse", "SPEC", "--layers", "flux", "--record", "--json")
    finally:
        status, doc = kube.request("PATCH", GITREPO + "?fieldManager=kubectl-edit", {"spec": {"interval": "1m"}},
                                   content_type="application/merge-patch+json")
    assert status == 200, doc
    assert code == 1, err + out
    drifted = json.loads(out)
    flux_tier.notes["texts"] += [out, err]
    flux = _layers(drifted)["flux"]
    assert drifted["outcome"] == "drift" and flux["outcome"] == "drift" and flux["failed_phase"] is None, flux
    assert flux["version"]["version_id"] == head.version_id
    changed = {c["urn"].rsplit("::", 1)[1]: c for c in flux["preview"]["changes"]}
    assert set(changed) == {"git-repository"} and changed["git-repository"]["operation"] == "update", changed
    assert any(k == "spec" or k.startswith("spec.") for k in changed["git-repository"]["diff_keys"]), changed

    assert _stored(flux_tier) == before
    assert _pulumi_writes(kube, audit_from) == []
    kept = {load_rehearsal_record(flux_tier.store.get(k).body, k)["rehearsal_id"]: k for k in flux_tier.keys(REHEARSALS)}
    assert set(kept) == {clean["rehearsal_id"], drifted["rehearsal_id"]}, kept


def test_the_deploy_key_is_never_stored_or_printed_in_plaintext(flux_tier):
    state = flux_tier.checkpoint("flux")
    secret = next(r for r in state["checkpoint"]["latest"]["resources"] if r["urn"].endswith("::flux-deploy-key"))
    # The provider folds stringData into base64 `data` (pulumi-kubernetes provider/pkg/clients/unstructured.go,
    # normalizeSecret) and marks a Secret's data secret (provider/pkg/provider/provider.go, annotateSecrets).
    for part in ("inputs", "outputs"):
        held = [k for k in ("data", "stringData") if k in secret[part]]
        assert held, secret[part].keys()
        for key in held:
            assert SECRET_SIG in json.dumps(secret[part][key]), (part, key)  # Pulumi's mark of an encrypted value
    # The stack settings (the deploy key as `secure` config) live in a folder of each run, removed after it
    # (bootstrap/engine/rundir.py): none is left beside the programs, and any that were would be read below.
    assert not list(flux_tier.stacks.glob("*/Pulumi.*.yaml"))
    status = flux_tier.cli("status", "SPEC", "--json")
    _assert_no_key(*flux_tier.notes["texts"], *status[1:], _everything_stored(flux_tier))


def test_destroy_removes_what_the_layer_made_in_order_and_nothing_else(flux_tier):
    kube = flux_tier.notes["kube"]
    bystander = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bystander"}}
    assert kube.request("POST", "/api/v1/namespaces", bystander)[0] in (201, 409)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep-me"}, "data": {"a": "b"}}
    assert kube.request("POST", "/api/v1/namespaces/bystander/configmaps", cm)[0] in (201, 409)
    audit_from = len(kube.audit())

    code, out, err = flux_tier.cli("destroy", "SPEC", "--layers", "flux", "--yes", "--json")
    assert code == 0, err + out
    assert _layers(json.loads(out))["flux"]["achieved"] == "destroyed", out
    _assert_no_key(out, err)

    wait_for("flux-system to be gone", lambda: kube.get(f"/api/v1/namespaces/{NS}") is None, 120)
    for crd in CRDS:
        assert kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}") is None
    assert kube.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/cluster-reconciler-flux-system") is None
    assert kube.get("/api/v1/namespaces/bystander/configmaps/keep-me")["data"] == {"a": "b"}
    assert kube.get("/api/v1/namespaces/default") is not None

    deletes = [e for e in kube.audit()[audit_from:] if e["verb"] == "delete" and e["stage"] == "ResponseComplete"
               and "pulumi" in e.get("userAgent", "").lower()]
    order = [(e["objectRef"]["resource"], e["objectRef"].get("name")) for e in deletes]
    names = [n for _, n in order]
    assert set(order) >= {("kustomizations", "flux-system"), ("gitrepositories", "flux-system"),
                          ("secrets", "flux-system"), ("namespaces", NS)}, order
    assert all(e["objectRef"].get("namespace") in (None, NS) for e in deletes), order
    assert "bystander" not in names and "default" not in names
    position = {o: i for i, o in enumerate(order)}
    # The dependents go before what they depend on: the Kustomization before its source, both before their CRDs.
    assert position[("kustomizations", "flux-system")] < position[("gitrepositories", "flux-system")]
    for crd in CRDS:
        assert position[("gitrepositories", "flux-system")] < position[("customresourcedefinitions", crd)]
    assert flux_tier.keys(flux_tier.stack_key("flux"))  # the stack stays, emptied, as after any destroy
    resources = flux_tier.checkpoint("flux")["checkpoint"]["latest"].get("resources") or []
    assert [r for r in resources if r["type"].startswith("kubernetes:") and "providers" not in r["type"]] == []
