"""The offline plan end to end, in process: the real layer programs under the mock runtime, in order,
then posture and rendering."""

from __future__ import annotations

import json

import pytest

from bootstrap.planning import offline_render
from bootstrap.apply.gate import approved_from_documents
from bootstrap.layers import LAYER_NAMES
from bootstrap.planning.offline import run_offline
from bootstrap.planning.posture import RULES
from bootstrap.spec import EnvironmentSpec, load_spec


@pytest.fixture(scope="module")
def dev_plan():
    return run_offline(load_spec("dev"))


@pytest.fixture(scope="module")
def prod_plan():
    return run_offline(load_spec("prod"))


def test_dev_and_prod_pass_every_rule(dev_plan, prod_plan):
    for plan in (dev_plan, prod_plan):
        assert plan.failed_rules == [] and plan.exit_code == 0
        assert [run.layer for run in plan.runs] == list(LAYER_NAMES)


def test_each_layer_gets_the_outputs_of_the_ones_before(prod_plan):
    runs = {run.layer: run for run in prod_plan.runs}
    groups = [r for r in runs["cluster"].resources if r.type == "aws:eks/nodeGroup:NodeGroup"]
    assert groups and all(g.inputs["subnetIds"] == runs["network"].outputs["private_subnet_ids"] for g in groups)
    # The kubeconfig crosses into flux as a secret, never as text.
    kube = next(r for r in runs["flux"].resources if r.type == "pulumi:providers:kubernetes")
    assert kube.inputs["kubeconfig"] == "[secret]"


def test_document_shape(prod_plan):
    doc = offline_render.document(prod_plan)
    assert doc["kind"] == "groundctl.offline-plan" and doc["environment"] == "prod" and doc["passed"] is True
    assert doc["layer_order"] == list(LAYER_NAMES) and set(doc["layers"]) == set(LAYER_NAMES)
    assert [r["id"] for r in doc["rules"]] == [r.id for r in RULES]
    cluster = doc["layers"]["cluster"]
    eks = next(r for r in cluster["resources"] if r["type"] == "aws:eks/cluster:Cluster")
    assert eks["key_properties"]["endpointPublicAccess"] == "false"
    assert cluster["outputs"]["kubeconfig"] == "[secret]" and cluster["secret_outputs"] == ["kubeconfig"]
    # Computed values are shown as such, not invented.
    assert cluster["outputs"]["cluster_endpoint"] == "(known after apply)"
    backend = doc["layers"]["backend"]["resources"]
    assert {r["name"] for r in backend if r["protect"]} == {"state-bucket", "state-key", "replica-bucket", "replica-key"}
    json.loads(offline_render.json_text(doc))  # serialisable as written


def test_markdown_lists_every_layer_and_rule(dev_plan):
    doc = offline_render.document(dev_plan)
    text = offline_render.markdown(doc)
    assert text.startswith("# Offline plan: dev\n")
    for name in LAYER_NAMES:
        assert f"## {name} ({doc['layers'][name]['resource_count']} resources)" in text
    for rule in RULES:
        assert f"| `{rule.id}` |" in text
    assert "(known after apply)" in text
    assert set(offline_render.files(doc)) == {"plan-dev.md", "plan-dev.json"}


def test_plan_files_are_deterministic(dev_plan):
    again = run_offline(load_spec("dev"))
    assert offline_render.files(offline_render.document(again)) == offline_render.files(offline_render.document(dev_plan))


def test_the_approved_plan_reader_ignores_the_offline_plan(dev_plan):
    # Both plans share the --out directory; the offline one must not pass for an approved live plan.
    doc = json.loads(offline_render.json_text(offline_render.document(dev_plan)))
    assert approved_from_documents({"plan-dev.json": doc}, "dev") == {}


def test_public_endpoint_in_production_fails_its_rule():
    data = load_spec("prod").model_dump()
    data["cluster"]["endpoint_public_access"] = True
    plan = run_offline(EnvironmentSpec.model_validate(data))
    assert plan.failed_rules == ["cluster-endpoint-private-in-production"] and plan.exit_code == 1
    doc = offline_render.document(plan)
    assert doc["passed"] is False and doc["failed_rules"] == ["cluster-endpoint-private-in-production"]
    assert "## Failing posture rules" in offline_render.markdown(doc)


def test_the_placeholder_deploy_key_reaches_no_output(dev_plan, monkeypatch):
    from bootstrap.planning import offline

    seen = []
    real = offline.offline_environ

    def recording():
        environ = real()
        seen.append(environ)
        return environ

    monkeypatch.setattr(offline, "offline_environ", recording)
    plan = run_offline(load_spec("dev"))
    key = next(v for k, v in seen[0].items() if k.endswith("DEPLOY_KEY"))
    rendered = "".join(offline_render.files(offline_render.document(plan)).values())
    assert key not in rendered and plan.passed
    assert "flux-deploy-key-secret" not in plan.failed_rules
