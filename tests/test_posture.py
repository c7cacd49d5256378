"""Posture rules on hand-built declarations: each rule passes on a sound set and fails on a broken one.

The declarations mimic what the mock runtime captures (camelCase inputs, `(id of <name>)` ids,
`[secret]` and `(known after apply)` markers), so no Pulumi program runs here.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bootstrap.planning.mockrun import DeclaredResource, ProgramRun
from bootstrap.planning.posture import RULES, evaluate, failed_rules, rule_status
from bootstrap.spec import EnvironmentSpec
from tests.stackutil import spec as _spec

SECRET = "[secret]"
UNKNOWN = "(known after apply)"


def _provider(env: str, layer: str, name: str = "aws", region: str = "eu-west-1") -> DeclaredResource:
    tags = json.dumps({"tags": {"groundctl:env": env, "groundctl:layer": layer}})
    return DeclaredResource(f"urn:pulumi:{env}::{layer}::pulumi:providers:aws::{name}", "pulumi:providers:aws", name,
                            {"region": region, "defaultTags": tags}, True, False, None, None)


def _res(env: str, layer: str, type_: str, name: str, inputs: dict, *, protect: bool = False,
         provider: str = "aws") -> DeclaredResource:
    if type_.startswith("aws:") and name != "untagged":
        inputs = {"tags": {"groundctl:name": name}, **inputs}
    prov = f"urn:pulumi:{env}::{layer}::pulumi:providers:aws::{provider}::(id of {provider})"
    return DeclaredResource(f"urn:pulumi:{env}::{layer}::{type_}::{name}", type_, name, inputs, True, protect, None,
                            prov)


def _bucket_set(env: str, bucket: str, physical: str, key: str, days: int, protect: bool, provider: str = "aws"):
    ref = f"(id of {bucket})"
    policy = json.dumps({"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "s3:*",
                                        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})
    r = lambda t, n, i, **kw: _res(env, "backend", t, n, i, provider=provider, **kw)  # noqa: E731
    return [
        r("aws:s3/bucket:Bucket", bucket, {"bucket": physical}, protect=protect),
        r("aws:kms/key:Key", key, {"enableKeyRotation": True}, protect=protect),
        r("aws:s3/bucketVersioning:BucketVersioning", f"{bucket}-versioning",
          {"bucket": ref, "versioningConfiguration": {"status": "Enabled"}}),
        r("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
          f"{bucket}-encryption", {"bucket": ref, "rules": [{"bucketKeyEnabled": True, "applyServerSideEncryptionByDefault": {
              "sseAlgorithm": "aws:kms", "kmsMasterKeyId": UNKNOWN}}]}),
        r("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", f"{bucket}-public-access-block",
          {"bucket": ref, "blockPublicAcls": True, "blockPublicPolicy": True, "ignorePublicAcls": True,
           "restrictPublicBuckets": True}),
        r("aws:s3/bucketOwnershipControls:BucketOwnershipControls", f"{bucket}-ownership",
          {"bucket": ref, "rule": {"objectOwnership": "BucketOwnerEnforced"}}),
        r("aws:s3/bucketPolicy:BucketPolicy", f"{bucket}-policy", {"bucket": ref, "policy": policy}),
        r("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", f"{bucket}-lifecycle",
          {"bucket": ref, "rules": [{"status": "Enabled", "noncurrentVersionExpiration": {"noncurrentDays": float(days)}}]}),
    ]


def sound_runs(spec: EnvironmentSpec) -> dict[str, ProgramRun]:
    """Declarations that satisfy every rule for `spec`."""
    env = spec.name
    days = spec.backend.noncurrent_version_retention_days
    backend = [_provider(env, "backend"), *_bucket_set(env, "state-bucket", spec.backend.bucket, "state-key", days,
                                                       spec.production)]
    if spec.backend.replica_region:
        backend += [_provider(env, "backend", "aws-replica", spec.backend.replica_region),
                    *_bucket_set(env, "replica-bucket", "replica", "replica-key", days, spec.production, "aws-replica"),
                    _res(env, "backend", "aws:s3/bucketReplicationConfig:BucketReplicationConfig",
                         "state-bucket-replication", {"bucket": "(id of state-bucket)", "rules": [{"status": "Enabled"}]})]

    net = lambda t, n, i: _res(env, "network", t, n, i)  # noqa: E731
    n_az = spec.network.az_count
    network = [_provider(env, "network"), net("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": spec.network.cidr})]
    for i in range(n_az):
        network.append(net("aws:ec2/subnet:Subnet", f"private-subnet-{i}", {"mapPublicIpOnLaunch": False}))
        network[-1].inputs["tags"]["kubernetes.io/role/internal-elb"] = "1"
        network.append(net("aws:ec2/subnet:Subnet", f"public-subnet-{i}", {"mapPublicIpOnLaunch": False}))
        network[-1].inputs["tags"]["kubernetes.io/role/elb"] = "1"
    for i in range(1 if spec.network.nat == "single" else n_az):
        network.append(net("aws:ec2/natGateway:NatGateway", f"nat-{i}", {"subnetId": f"(id of public-subnet-{i})"}))
    network += [
        net("aws:ec2/flowLog:FlowLog", "flow-log", {"vpcId": "(id of vpc)", "trafficType": "ALL"}),
        net("aws:ec2/vpcEndpoint:VpcEndpoint", "s3-endpoint", {
            "serviceName": f"com.amazonaws.{spec.aws.region}.s3", "vpcEndpointType": "Gateway",
            "routeTableIds": ["(id of private-rt-0)"]}),
    ]
    private_ids = [f"(id of private-subnet-{i})" for i in range(n_az)]
    public_ids = [f"(id of public-subnet-{i})" for i in range(n_az)]

    cl = lambda t, n, i: _res(env, "cluster", t, n, i)  # noqa: E731
    cluster = [
        _provider(env, "cluster"),
        cl("aws:eks/cluster:Cluster", "cluster", {
            "encryptionConfig": {"provider": {"keyArn": UNKNOWN}, "resources": ["secrets"]},
            "enabledClusterLogTypes": ["api", "audit", "authenticator", "controllerManager", "scheduler"],
            "vpcConfig": {"endpointPrivateAccess": True, "endpointPublicAccess": spec.endpoint_public_access,
                          "subnetIds": private_ids + public_ids}}),
        cl("aws:eks/nodeGroup:NodeGroup", "node-group-system", {"subnetIds": private_ids}),
    ]
    for arn in spec.cluster.admin_principal_arns:
        short = arn.rsplit("/", 1)[-1]
        cluster.append(cl("aws:eks/accessEntry:AccessEntry", f"admin-{short}", {"principalArn": arn}))
        cluster.append(cl("aws:eks/accessPolicyAssociation:AccessPolicyAssociation", f"admin-{short}-policy", {
            "principalArn": arn, "policyArn": "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"}))

    ref = {k: v for k, v in spec.flux.ref.model_dump().items() if v}
    k8s = lambda t, n, i: DeclaredResource(f"urn:pulumi:{env}::flux::{t}::{n}", t, n, i, True, False, None,  # noqa: E731
                                           f"urn:pulumi:{env}::flux::pulumi:providers:kubernetes::cluster::(id of cluster)")
    flux = [
        k8s("kubernetes:yaml/v2:ConfigFile", "flux-controllers",
            {"file": f"https://github.com/fluxcd/flux2/releases/download/{spec.flux.version}/install.yaml"}),
        k8s("kubernetes:core/v1:Secret", "flux-deploy-key", {"metadata": {"name": "flux-system"}, "stringData": SECRET}),
        k8s("kubernetes:source.toolkit.fluxcd.io/v1:GitRepository", "git-repository", {"spec": {
            "url": spec.flux.repository_url, "ref": ref, "secretRef": {"name": "flux-system"}}}),
        k8s("kubernetes:kustomize.toolkit.fluxcd.io/v1:Kustomization", "root-kustomization",
            {"spec": {"path": f"./{spec.flux_path}", "prune": True}}),
    ]
    return {
        "backend": ProgramRun("backend", tuple(backend), {"bucket_name": spec.backend.bucket}, frozenset()),
        "network": ProgramRun("network", tuple(network), {"private_subnet_ids": private_ids,
                                                          "public_subnet_ids": public_ids}, frozenset()),
        "cluster": ProgramRun("cluster", tuple(cluster), {"kubeconfig": SECRET}, frozenset({"kubeconfig"})),
        "flux": ProgramRun("flux", tuple(flux), {"flux_version": spec.flux.version}, frozenset()),
    }


def edit(runs: dict, layer: str, name: str, **inputs) -> dict:
    """A copy of `runs` with resource `name` of `layer` given new top-level inputs."""
    run = runs[layer]
    changed = tuple(replace(r, inputs={**r.inputs, **inputs}) if r.name == name else r for r in run.resources)
    return {**runs, layer: replace(run, resources=changed)}


def drop(runs: dict, layer: str, *names: str) -> dict:
    run = runs[layer]
    return {**runs, layer: replace(run, resources=tuple(r for r in run.resources if r.name not in names))}


DEV = _spec("dev")
PROD = _spec("prod")


@pytest.mark.parametrize("spec", [DEV, PROD], ids=["dev", "prod"])
def test_sound_declarations_pass_every_rule(spec):
    findings = evaluate(spec, sound_runs(spec))
    assert failed_rules(findings) == []
    statuses = rule_status(findings)
    assert set(statuses) == {r.id for r in RULES}
    assert statuses["backend-bucket-versioning"] == "pass"


def test_rules_are_named_with_layer_types_and_reason():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids)) == 25
    for rule in RULES:
        assert rule.layer in ("backend", "network", "cluster", "flux", "all")
        assert rule.types and rule.reason


def _broken_policy() -> str:
    return json.dumps({"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "s3:*"}]})


# (rule that must fail, spec, how the declarations are broken)
BREAKAGES = [
    ("backend-bucket-versioning", DEV, lambda r: edit(r, "backend", "state-bucket-versioning",
                                                      versioningConfiguration={"status": "Suspended"})),
    ("backend-bucket-versioning", DEV, lambda r: drop(r, "backend", "state-bucket-versioning")),
    ("backend-bucket-sse-kms", DEV, lambda r: edit(r, "backend", "state-bucket-encryption", rules=[{
        "bucketKeyEnabled": False, "applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": "k"}}])),
    ("backend-bucket-sse-kms", DEV, lambda r: edit(r, "backend", "state-bucket-encryption", rules=[{
        "bucketKeyEnabled": True, "applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}])),
    ("backend-public-access-blocked", DEV, lambda r: edit(r, "backend", "state-bucket-public-access-block",
                                                          restrictPublicBuckets=False)),
    ("backend-ownership-enforced", DEV, lambda r: edit(r, "backend", "state-bucket-ownership",
                                                       rule={"objectOwnership": "ObjectWriter"})),
    ("backend-tls-only", DEV, lambda r: edit(r, "backend", "state-bucket-policy", policy=_broken_policy())),
    ("backend-noncurrent-retention", DEV, lambda r: edit(r, "backend", "state-bucket-lifecycle", rules=[
        {"status": "Enabled", "noncurrentVersionExpiration": {"noncurrentDays": 7.0}}])),
    ("backend-kms-rotation", DEV, lambda r: edit(r, "backend", "state-key", enableKeyRotation=False)),
    ("backend-protected-in-production", PROD, lambda r: {**r, "backend": replace(r["backend"], resources=tuple(
        replace(x, protect=False) if x.name == "state-bucket" else x for x in r["backend"].resources))}),
    ("backend-replica", PROD, lambda r: drop(r, "backend", "state-bucket-replication")),
    ("backend-replica", PROD, lambda r: edit(r, "backend", "state-bucket-replication", rules=[{"status": "Disabled"}])),
    ("network-private-subnets-no-public-ip", DEV, lambda r: edit(r, "network", "private-subnet-1",
                                                                 mapPublicIpOnLaunch=True)),
    ("network-private-subnets-no-public-ip", DEV, lambda r: drop(r, "network", "private-subnet-1")),
    ("network-subnet-role-tags", DEV, lambda r: edit(r, "network", "public-subnet-0",
                                                     tags={"groundctl:name": "public-subnet-0"})),
    ("network-nat-count", PROD, lambda r: drop(r, "network", "nat-2")),
    ("network-flow-logs", DEV, lambda r: edit(r, "network", "flow-log", trafficType="REJECT")),
    ("network-flow-logs", DEV, lambda r: drop(r, "network", "flow-log")),
    ("network-s3-gateway-endpoint", DEV, lambda r: edit(r, "network", "s3-endpoint", vpcEndpointType="Interface")),
    ("network-s3-gateway-endpoint", DEV, lambda r: drop(r, "network", "s3-endpoint")),
    ("cluster-secrets-encryption", DEV, lambda r: edit(r, "cluster", "cluster", encryptionConfig=None)),
    ("cluster-control-plane-logs", DEV, lambda r: edit(r, "cluster", "cluster", enabledClusterLogTypes=["api"])),
    ("cluster-endpoint-private-access", DEV, lambda r: edit(r, "cluster", "cluster", vpcConfig={
        "endpointPrivateAccess": False, "endpointPublicAccess": True})),
    ("cluster-endpoint-private-in-production", PROD, lambda r: edit(r, "cluster", "cluster", vpcConfig={
        "endpointPrivateAccess": True, "endpointPublicAccess": True})),
    ("cluster-nodes-private-subnets", DEV, lambda r: edit(r, "cluster", "node-group-system",
                                                          subnetIds=["(id of private-subnet-0)", "(id of public-subnet-0)"])),
    ("cluster-nodes-private-subnets", DEV, lambda r: drop(r, "cluster", "node-group-system")),
    ("cluster-admin-access", PROD, lambda r: drop(r, "cluster", "admin-break-glass")),
    ("cluster-admin-access", PROD, lambda r: drop(r, "cluster", "admin-platform-admin-policy")),
    ("flux-pinned-version", DEV, lambda r: edit(r, "flux", "flux-controllers",
                                                file="https://github.com/fluxcd/flux2/releases/latest/download/install.yaml")),
    ("flux-git-ref", PROD, lambda r: edit(r, "flux", "git-repository", spec={
        "url": PROD.flux.repository_url, "ref": {"branch": "main"}, "secretRef": {"name": "flux-system"}})),
    ("flux-kustomization-prune", DEV, lambda r: edit(r, "flux", "root-kustomization",
                                                     spec={"path": "./clusters/dev", "prune": False})),
    ("flux-kustomization-prune", DEV, lambda r: edit(r, "flux", "root-kustomization",
                                                     spec={"path": "./clusters/other", "prune": True})),
    ("flux-deploy-key-secret", DEV, lambda r: edit(r, "flux", "flux-deploy-key", stringData={"identity": "plain"})),
    ("aws-groundctl-tags", DEV, lambda r: edit(r, "network", "vpc", tags={})),
    ("aws-groundctl-tags", DEV, lambda r: edit(r, "backend", "state-key", tags={"groundctl:name": "other"})),
]


@pytest.mark.parametrize("rule,spec,breaks", BREAKAGES, ids=[f"{b[0]}-{i}" for i, b in enumerate(BREAKAGES)])
def test_each_rule_fails_on_its_broken_property(rule, spec, breaks):
    findings = evaluate(spec, breaks(sound_runs(spec)))
    assert failed_rules(findings) == [rule]
    failing = [f for f in findings if f.status == "fail"]
    assert failing and all(f.rule == rule and f.message for f in failing)


def test_every_rule_has_a_failing_case():
    assert {b[0] for b in BREAKAGES} == {r.id for r in RULES}


def test_not_applicable_outside_production():
    statuses = rule_status(evaluate(DEV, sound_runs(DEV)))
    assert statuses["backend-protected-in-production"] == "not-applicable"
    assert statuses["backend-replica"] == "not-applicable"
    assert statuses["cluster-endpoint-private-in-production"] == "not-applicable"



@pytest.mark.parametrize("endpoint,status", [("http://127.0.0.1:4566", "not-applicable"),
                                             ("https://s3.emulator.example", "fail"), ("embedded", "fail")])
def test_tls_only_is_not_judged_where_the_program_declares_no_policy_an_emulator_over_plain_http(endpoint, status):
    """stacks/backend declares no TLS-only policy for an http:// emulator (it cannot carry TLS): a spec naming
    one planned with the rule failed, the journey's first plan (tests/test_journey_workflows.py)."""
    spec = DEV.model_copy(update={"aws": DEV.aws.model_copy(update={"endpoint_url": endpoint})})
    runs = drop(sound_runs(spec), "backend", "state-bucket-policy")
    assert rule_status(evaluate(spec, runs))["backend-tls-only"] == status

def test_tags_come_from_provider_defaults():
    runs = sound_runs(DEV)
    # The provider's default tags name another environment: every resource on it is mis-tagged.
    wrong = json.dumps({"tags": {"groundctl:env": "prod", "groundctl:layer": "backend"}})
    backend = replace(runs["backend"], resources=tuple(
        replace(r, inputs={**r.inputs, "defaultTags": wrong}) if r.type == "pulumi:providers:aws" else r
        for r in runs["backend"].resources))
    findings = evaluate(DEV, {**runs, "backend": backend})
    assert failed_rules(findings) == ["aws-groundctl-tags"]
    assert any("groundctl:env='prod'" in f.message for f in findings if f.status == "fail")


def test_untaggable_types_are_not_required_to_carry_tags():
    runs = sound_runs(DEV)
    alias = _res("dev", "backend", "aws:kms/alias:Alias", "untagged", {"name": "alias/x"})
    runs = {**runs, "backend": replace(runs["backend"], resources=runs["backend"].resources + (alias,))}
    assert failed_rules(evaluate(DEV, runs)) == []


def test_deploy_key_leak_into_a_plain_output_fails():
    canary = "CANARY-deploy-key-7f3a"
    runs = sound_runs(DEV)
    leaky = {**runs, "flux": replace(runs["flux"], outputs={**runs["flux"].outputs, "debug": f"key={canary}"})}
    assert failed_rules(evaluate(DEV, runs, secret_values=[canary])) == []
    findings = evaluate(DEV, leaky, secret_values=[canary])
    assert failed_rules(findings) == ["flux-deploy-key-secret"]
    assert all(canary not in f.message for f in findings)


def test_a_layer_that_did_not_run_fails_its_rules():
    runs = sound_runs(DEV)
    del runs["flux"]
    failed = failed_rules(evaluate(DEV, runs))
    assert failed == ["flux-pinned-version", "flux-git-ref", "flux-kustomization-prune", "flux-deploy-key-secret"]
