"""The flux program under the mock runtime: controllers, the pinned source, the root Kustomization,
the deploy key kept secret (a canary), the cluster reference; and all four layers chained."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from bootstrap.kit.errors import BadInput
from bootstrap.layers import LAYERS
from bootstrap.planning.mockrun import run_program
from bootstrap.spec.stack_config import ConfigValue, layer_config
from tests.stackutil import CANARY_KEY, FLUX_ENV, UPSTREAM, assert_contract, counts, named, run, spec, stack_references

GIT_REPOSITORY = "kubernetes:source.toolkit.fluxcd.io/v1:GitRepository"
KUSTOMIZATION = "kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization"


@pytest.fixture(scope="module")
def prod():
    return run("flux", spec("prod"))


def test_graph(prod):
    assert counts(prod) == {
        "pulumi:pulumi:StackReference": 1, "pulumi:providers:kubernetes": 1,
        "kubernetes:yaml/v2:ConfigFile": 1, "kubernetes:core/v1:Secret": 1, GIT_REPOSITORY: 1, KUSTOMIZATION: 1,
    }
    assert not any(r.type.startswith("aws:") for r in prod.resources)


def test_provider_from_the_cluster_kubeconfig(prod):
    assert stack_references(prod) == {"organization/cluster/prod"}
    kube = named(prod, "cluster")
    assert kube.type == "pulumi:providers:kubernetes"
    assert kube.inputs["kubeconfig"] == "[secret]"  # the upstream secret output stays secret
    for resource in prod.resources:
        if resource.type.startswith("kubernetes:"):
            assert resource.provider.rsplit("::", 1)[0] == kube.urn, resource.name


def test_controllers_from_release_url_or_local_manifest(prod):
    assert named(prod, "flux-controllers").inputs["file"] == (
        "https://github.com/fluxcd/flux2/releases/download/v2.4.0/install.yaml")
    airgapped = run("flux", spec("prod", **{"flux.manifest_path": "/opt/flux/install-v2.4.0.yaml"}))
    assert named(airgapped, "flux-controllers").inputs["file"] == "/opt/flux/install-v2.4.0.yaml"
    # The manifest's own flux-system Namespace is the layer's (a second one fails the real provider's create);
    # only its Deployments and Services skip the await, by a transform the mock runtime does not run (the
    # cluster tier checks it: tests/test_cluster_tier_flux.py), never the whole manifest.
    assert "skipAwait" not in named(prod, "flux-controllers").inputs
    for name in ("flux-deploy-key", "git-repository", "root-kustomization"):
        assert named(prod, name).inputs["metadata"]["annotations"] == {"pulumi.com/patchForce": "true"}


def test_source_pinned_and_root_kustomization_pruned(prod):
    source = named(prod, "git-repository").inputs
    assert source["apiVersion"] == "source.toolkit.fluxcd.io/v1"
    assert source["spec"]["url"] == "ssh://git@github.com/acme/fleet.git"
    assert source["spec"]["ref"] == {"tag": "v1.8.2"}
    assert source["spec"]["secretRef"] == {"name": "flux-system"}
    root = named(prod, "root-kustomization").inputs
    assert root["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert root["spec"]["prune"] is True
    assert root["spec"]["path"] == "./clusters/prod"
    assert root["spec"]["sourceRef"] == {"kind": "GitRepository", "name": "flux-system"}


@pytest.mark.parametrize("ref", [{"commit": "a" * 40}, {"branch": "main"}])
def test_other_ref_kinds(ref):
    program_run = run("flux", spec("dev", **{"flux.ref": ref}))
    assert named(program_run, "git-repository").inputs["spec"]["ref"] == ref


def test_branch_refused_in_production_even_by_hand():
    prod = spec("dev", **{"production": True, "flux.ref": {"tag": "v1"}, "flux.manifest_sha256": "0" * 64})
    config = layer_config(prod, "flux", environ=FLUX_ENV)
    config["flux:refKind"] = ConfigValue("branch")
    with pytest.raises(BadInput, match="pinned tag or commit"):
        run_program("flux", "dev", config, UPSTREAM)


def test_deploy_key_is_secret_everywhere(prod):
    secret = named(prod, "flux-deploy-key")
    assert secret.inputs["stringData"] == "[secret]"
    assert CANARY_KEY not in repr(prod)
    assert "CANARY" not in repr(asdict(prod))
    assert all("CANARY" not in repr(v) for k, v in prod.outputs.items())
    assert prod.secret_outputs == frozenset()
    assert_contract(prod, "flux")
    assert prod.outputs["flux_version"] == "v2.4.0"
    assert prod.outputs["git_repository"] == prod.outputs["kustomization"] == "flux-system/flux-system"


def test_https_repository_needs_no_deploy_key():
    program_run = run("flux", spec("local"))
    assert counts(program_run)["kubernetes:core/v1:Secret"] == 0
    assert "secretRef" not in named(program_run, "git-repository").inputs["spec"]


@pytest.mark.parametrize("environment", ["dev", "prod"])
def test_all_layers_chained_in_one_process(environment):
    """Each layer fed the previous layers' outputs, as the offline plan does."""
    env_spec = spec(environment)
    outputs: dict[str, dict] = {}
    for lay in LAYERS:
        config = layer_config(env_spec, lay.name, lineage=f"lin-{lay.name}", environ=FLUX_ENV)
        program_run = run_program(lay.name, environment, config, {u: outputs[u] for u in lay.upstream})
        assert set(program_run.outputs) == set(lay.outputs)
        outputs[lay.name] = program_run.outputs
        if lay.name == "cluster":
            groups = [r for r in program_run.resources if r.type == "aws:eks/nodeGroup:NodeGroup"]
            assert all(g.inputs["subnetIds"] == outputs["network"]["private_subnet_ids"] for g in groups)
    assert outputs["network"]["private_subnet_ids"][0] == "(id of private-subnet-0)"
