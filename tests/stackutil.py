"""Shared helpers for the layer-program tests: specs, upstream outputs, runs, and lookups."""

from __future__ import annotations

from collections import Counter

from bootstrap.planning.mockrun import DeclaredResource, ProgramRun, run_program
from bootstrap.spec import EnvironmentSpec, load_spec
from bootstrap.spec.stack_config import DEPLOY_KEY_ENV, KNOWN_HOSTS_ENV, layer_config

CANARY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARY-b9d1e0c4-do-not-leak\n-----END OPENSSH PRIVATE KEY-----"
FLUX_ENV = {DEPLOY_KEY_ENV: CANARY_KEY, KNOWN_HOSTS_ENV: "github.com ssh-ed25519 AAAAC3NzaTESTKEY"}

# What each upstream stack "exported": distinctive values, so a test can see them flow downstream.
UPSTREAM = {
    "backend": {
        "bucket_name": "acme-state", "bucket_arn": "arn:aws:s3:::acme-state",
        "kms_key_arn": "arn:aws:kms:eu-west-1:111111111111:key/upstream-state-key",
        "kms_alias": "alias/acme-state", "secrets_provider": "awskms://alias/acme-state?region=eu-west-1",
        "groundctl_lineage": "lin-backend",
    },
    "network": {
        "vpc_id": "vpc-upstream", "vpc_cidr": "10.20.0.0/16", "availability_zones": ["eu-west-1a", "eu-west-1b"],
        "private_subnet_ids": ["subnet-priv-a", "subnet-priv-b"],
        "public_subnet_ids": ["subnet-pub-a", "subnet-pub-b"],
        "groundctl_lineage": "lin-network",
    },
    "cluster": {
        "cluster_name": "dev-cluster", "cluster_endpoint": "https://ABC.gr7.eu-west-1.eks.amazonaws.com",
        "cluster_arn": "arn:aws:eks:eu-west-1:111111111111:cluster/dev-cluster",
        "oidc_provider_arn": "arn:aws:iam::111111111111:oidc-provider/x", "node_role_arn": "arn:aws:iam::1:role/n",
        "kubeconfig": '{"apiVersion": "v1", "kind": "Config", "users": [{"name": "KUBECONFIG-CANARY"}]}',
        "groundctl_lineage": "lin-cluster",
    },
}


def spec(name: str, **updates) -> EnvironmentSpec:
    """A shipped spec with dotted-path updates, e.g. spec("dev", **{"network.az_count": 3})."""
    base = load_spec(name)
    data = base.model_dump()
    for dotted, value in updates.items():
        target = data
        *parents, last = dotted.split(".")
        for part in parents:
            target = target[part]
        target[last] = value
    return EnvironmentSpec.model_validate(data)


def run(layer: str, env_spec: EnvironmentSpec, *, lineage: str | None = "lin-test", endpoint_url: str | None = None,
        upstream: dict | None = None) -> ProgramRun:
    config = layer_config(env_spec, layer, lineage=lineage, endpoint_url=endpoint_url, environ=FLUX_ENV)
    return run_program(layer, env_spec.name, config, UPSTREAM if upstream is None else upstream)


def counts(program_run: ProgramRun) -> Counter:
    return Counter(r.type for r in program_run.resources)


def named(program_run: ProgramRun, name: str) -> DeclaredResource:
    matches = [r for r in program_run.resources if r.name == name]
    assert len(matches) == 1, f"expected one resource named {name}, found {len(matches)}"
    return matches[0]


def of_type(program_run: ProgramRun, type_token: str) -> list[DeclaredResource]:
    return [r for r in program_run.resources if r.type == type_token]


def aws_resources(program_run: ProgramRun) -> list[DeclaredResource]:
    return [r for r in program_run.resources if r.type.startswith("aws:")]


def assert_tagged(program_run: ProgramRun, environment: str, layer: str) -> None:
    """Every AWS resource uses an explicit provider, and every taggable one ends up with all three
    groundctl tags: env and layer from the provider's default tags, the logical name of its own."""
    from bootstrap.planning.mockrun import effective_tags, is_taggable, provider_of

    resources = aws_resources(program_run)
    assert resources
    taggable = [r for r in resources if is_taggable(r.type)]
    assert taggable
    for resource in resources:
        prov = provider_of(program_run, resource)
        assert prov is not None and prov.type == "pulumi:providers:aws", resource.name
    for resource in taggable:
        assert resource.inputs.get("tags", {}).get("groundctl:name") == resource.name, resource.name
        tags = effective_tags(program_run, resource)
        assert tags["groundctl:env"] == environment, resource.name
        assert tags["groundctl:layer"] == layer, resource.name
        assert tags["groundctl:name"] == resource.name, resource.name


def assert_contract(program_run: ProgramRun, layer: str, lineage: str = "lin-test") -> None:
    from bootstrap.layers import layer as layer_named

    lay = layer_named(layer)
    assert set(program_run.outputs) == set(lay.outputs)
    assert program_run.outputs["groundctl_lineage"] == lineage
    assert program_run.secret_outputs == frozenset(lay.secret_outputs)


def untaggable_names(program_run: ProgramRun) -> set[str]:
    from bootstrap.planning.mockrun import is_taggable

    return {r.name for r in aws_resources(program_run) if not is_taggable(r.type)}


def stack_references(program_run: ProgramRun) -> set[str]:
    return {r.inputs["name"] for r in of_type(program_run, "pulumi:pulumi:StackReference")}
