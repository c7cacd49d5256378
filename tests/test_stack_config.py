"""The spec → Pulumi config mapping, and that every key it sets is documented by its program."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from bootstrap.kit.errors import BadInput
from bootstrap.layers import LAYER_NAMES
from bootstrap.spec import load_spec
from bootstrap.spec.stack_config import DEPLOY_KEY_ENV, KNOWN_HOSTS_ENV, ConfigValue, layer_config
from tests.stackutil import CANARY_KEY, FLUX_ENV

STACKS = Path(__file__).resolve().parent.parent / "stacks"
COMMON = {"aws:region", "groundctl:env", "groundctl:production", "groundctl:accountId", "groundctl:lineage"}


def values(config: dict[str, ConfigValue]) -> dict[str, str]:
    return {k: v.value for k, v in config.items()}


def test_dev_network_and_common_keys():
    config = layer_config(load_spec("dev"), "network", lineage="L-1")
    assert values(config) == {
        "aws:region": "eu-west-1", "groundctl:env": "dev", "groundctl:production": "false",
        "groundctl:accountId": "111111111111", "groundctl:lineage": "L-1",
        "network:cidr": "10.20.0.0/16", "network:azCount": "2", "network:natMode": "single",
        "network:flowLogsRetentionDays": "30",
    }
    assert not any(v.secret for v in config.values())


def test_prod_backend_has_replica_and_production_flag():
    config = values(layer_config(load_spec("prod"), "backend"))
    assert config["groundctl:production"] == "true"
    assert config["groundctl:lineage"] == ""
    assert config["backend:bucketName"] == "acme-groundctl-prod-state"
    assert config["backend:kmsAlias"] == "alias/groundctl-prod-state"
    assert config["backend:noncurrentVersionRetentionDays"] == "365"
    assert config["backend:replicaRegion"] == "eu-central-1"
    assert "backend:replicaRegion" not in layer_config(load_spec("dev"), "backend")


def test_prod_cluster_structured_values_are_json():
    config = values(layer_config(load_spec("prod"), "cluster"))
    assert config["cluster:endpointPublicAccess"] == "false"  # production default
    assert json.loads(config["cluster:adminPrincipalArns"]) == [
        "arn:aws:iam::222222222222:role/platform-admin", "arn:aws:iam::222222222222:role/break-glass"]
    groups = json.loads(config["cluster:nodeGroups"])
    assert [g["name"] for g in groups] == ["system", "workloads"]
    assert groups[1] == {
        "name": "workloads", "instanceTypes": ["m6i.xlarge"], "minSize": 3, "desiredSize": 6, "maxSize": 12,
        "diskSizeGib": 50, "capacityType": "ON_DEMAND"}
    assert json.loads(config["cluster:publicAccessCidrs"]) == []
    dev = values(layer_config(load_spec("dev"), "cluster"))
    assert dev["cluster:endpointPublicAccess"] == "true"
    assert json.loads(dev["cluster:publicAccessCidrs"]) == ["203.0.113.0/24"]


def test_local_endpoint_override_and_embedded_passthrough():
    spec = load_spec("local")
    assert values(layer_config(spec, "backend"))["groundctl:awsEndpoint"] == "embedded"
    config = values(layer_config(spec, "backend", endpoint_url="http://127.0.0.1:4566"))
    assert config["groundctl:awsEndpoint"] == "http://127.0.0.1:4566"
    assert "groundctl:awsEndpoint" not in layer_config(load_spec("dev"), "backend")


def test_flux_deploy_key_is_secret_config():
    config = layer_config(load_spec("prod"), "flux", environ=FLUX_ENV)
    assert config["flux:deployKey"] == ConfigValue(CANARY_KEY, secret=True)
    assert CANARY_KEY not in repr(config)
    assert [k for k, v in config.items() if v.secret] == ["flux:deployKey"]
    assert values(config)["flux:refKind"] == "tag" and values(config)["flux:ref"] == "v1.8.2"
    assert values(config)["flux:path"] == "clusters/prod"
    assert values(config)["flux:knownHosts"] == FLUX_ENV[KNOWN_HOSTS_ENV]


def test_missing_deploy_key_refused_only_for_the_flux_layer():
    spec = load_spec("prod")
    for layer in ("backend", "network", "cluster"):
        layer_config(spec, layer, environ={})
    with pytest.raises(BadInput, match=DEPLOY_KEY_ENV) as missing_key:
        layer_config(spec, "flux", environ={KNOWN_HOSTS_ENV: "h"})
    assert "export" in str(missing_key.value)
    with pytest.raises(BadInput, match=KNOWN_HOSTS_ENV):
        layer_config(spec, "flux", environ={DEPLOY_KEY_ENV: CANARY_KEY})
    # An HTTPS repository (local) is read anonymously: no key needed, none set.
    config = layer_config(load_spec("local"), "flux", environ={})
    assert "flux:deployKey" not in config and values(config)["flux:refKind"] == "branch"


def test_unknown_layer_is_bad_input():
    with pytest.raises(BadInput, match="not a layer"):
        layer_config(load_spec("dev"), "database")


# --- Pulumi.yaml: valid project files that document every key groundctl sets ----------------

SIMPLE_TYPES = {"string", "integer", "boolean", "array"}


def project(layer: str) -> dict:
    return yaml.safe_load((STACKS / layer / "Pulumi.yaml").read_text())


@pytest.mark.parametrize("layer", LAYER_NAMES)
def test_pulumi_yaml_is_a_valid_project(layer):
    proj = project(layer)
    # The toolchain is pinned: `auto` would run uv/poetry on a lock file found above the program (item 3
    # of issue 17; sdk/python/toolchain/toolchain.go ResolveToolchain), and by-hand `pulumi up` runs too.
    assert proj["name"] == layer and proj["runtime"] == {"name": "python", "options": {"toolchain": "pip"}}
    assert proj["description"].strip()
    for key, decl in proj["config"].items():
        # Pulumi's own rules: only project keys may carry a type/default; types are the simple ones.
        assert ":" not in key or key.startswith(f"{layer}:"), key
        assert decl["type"] in SIMPLE_TYPES and decl["description"].strip(), key
        assert not ("default" in decl and "value" in decl), key
        if decl["type"] == "array":
            assert "items" in decl, key


@pytest.mark.parametrize("layer", LAYER_NAMES)
@pytest.mark.parametrize("environment", ["local", "dev", "prod"])
def test_every_key_set_is_documented(layer, environment):
    proj = project(layer)
    text = (STACKS / layer / "Pulumi.yaml").read_text()
    declared = {f"{layer}:{k}" for k in proj["config"]}
    for key in layer_config(load_spec(environment), layer, environ=FLUX_ENV):
        assert key in declared or re.search(re.escape(key) + r"\b", text), f"{key} undocumented in {layer}"
    expected_common = COMMON if layer != "flux" else {k for k in COMMON if k.startswith("groundctl:")} - {
        "groundctl:accountId"}
    assert expected_common <= set(layer_config(load_spec(environment), layer, environ=FLUX_ENV))


@pytest.mark.parametrize("layer", LAYER_NAMES)
def test_every_key_the_program_reads_is_documented(layer):
    source = (STACKS / layer / "__main__.py").read_text()
    text = (STACKS / layer / "Pulumi.yaml").read_text()
    read = set(re.findall(r"cfg\.(?:get|require)\w*\(\s*\"(\w+)\"", source))
    read |= set(re.findall(r"json_value\(cfg, \"(\w+)\"", source))
    assert read
    declared = set(project(layer)["config"])
    for key in read:
        assert key in declared or f"{layer}:{key}" in text, f"{layer}:{key} is read but not documented"


def test_emulator_runs_assume_no_role():
    config = values(layer_config(load_spec("local"), "backend", endpoint_url="http://127.0.0.1:5999"))
    assert "groundctl:assumeRoleArn" not in config
    assert config["groundctl:awsEndpoint"] == "http://127.0.0.1:5999"


@pytest.mark.parametrize("environment", ["dev", "prod"])
@pytest.mark.parametrize("layer", ["backend", "network", "cluster", "flux"])
def test_no_run_configures_a_role_into_a_program(environment, layer):
    """Whatever the command (a pull request's preview, a drift check, an up), the programs get no role to
    assume: a preview holds only its caller's credentials, and the provider's inputs are the same for a plan
    and for the apply that must match it."""
    spec = load_spec(environment)
    assert spec.aws.apply_role_arn and spec.aws.plan_role_arn
    env = {"GROUNDCTL_FLUX_DEPLOY_KEY": "k", "GROUNDCTL_FLUX_KNOWN_HOSTS": "h"}
    config = values(layer_config(spec, layer, environ=env))
    roles = (spec.aws.apply_role_arn, spec.aws.plan_role_arn)
    assert not [k for k, v in config.items() if any(r in v for r in roles) or "assumeRole" in k]


def test_a_missing_flux_secret_is_named_before_any_work():
    from bootstrap.spec.stack_config import flux_secrets_missing

    dev = load_spec("dev")
    assert dev.flux.repository_url.startswith("ssh://")
    assert "GROUNDCTL_FLUX_DEPLOY_KEY" in flux_secrets_missing(dev, {})
    assert "GROUNDCTL_FLUX_KNOWN_HOSTS" in flux_secrets_missing(dev, {"GROUNDCTL_FLUX_DEPLOY_KEY": "k"})
    assert flux_secrets_missing(dev, {"GROUNDCTL_FLUX_DEPLOY_KEY": "k", "GROUNDCTL_FLUX_KNOWN_HOSTS": "h"}) is None
    https = dev.model_copy(update={"flux": dev.flux.model_copy(update={"repository_url": "https://x.example/f.git"})})
    assert flux_secrets_missing(https, {}) is None
