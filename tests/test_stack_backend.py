"""The backend program under the mock runtime: graph, posture, protection, tags, contract; and the
import rule every program obeys."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from stacks.common import naming
from tests.stackutil import (
    assert_contract, assert_tagged, counts, named, of_type, run, spec, stack_references, untaggable_names,
)

STACKS = Path(__file__).resolve().parent.parent / "stacks"
SETTINGS = ("versioning", "encryption", "public-access-block", "ownership", "policy", "lifecycle")


@pytest.fixture(scope="module")
def dev():
    return run("backend", spec("dev"))


@pytest.fixture(scope="module")
def prod():
    return run("backend", spec("prod"))


def test_graph_without_replica(dev):
    assert counts(dev) == {
        "pulumi:providers:aws": 1, "aws:kms/key:Key": 1, "aws:kms/alias:Alias": 1, "aws:s3/bucket:Bucket": 1,
        "aws:s3/bucketVersioning:BucketVersioning": 1,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": 1,
        "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": 1,
        "aws:s3/bucketOwnershipControls:BucketOwnershipControls": 1, "aws:s3/bucketPolicy:BucketPolicy": 1,
        "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": 1,
    }
    assert stack_references(dev) == set()


def test_graph_with_replica_in_second_region(prod):
    c = counts(prod)
    assert c["pulumi:providers:aws"] == 2
    assert c["aws:s3/bucket:Bucket"] == 2 and c["aws:kms/key:Key"] == 2
    assert c["aws:s3/bucketReplicationConfig:BucketReplicationConfig"] == 1
    assert c["aws:iam/role:Role"] == 1 and c["aws:iam/rolePolicy:RolePolicy"] == 1
    regions = {r.name: r.inputs["region"] for r in of_type(prod, "pulumi:providers:aws")}
    assert regions == {"aws": "eu-west-1", "aws-replica": "eu-central-1"}
    replica = named(prod, "replica-bucket")
    assert replica.provider.split("::")[-2] == "aws-replica"
    for setting in SETTINGS:
        assert named(prod, naming.bucket_setting("replica-bucket", setting)).provider == replica.provider


@pytest.mark.parametrize("which", ["dev", "prod"])
def test_security_posture(which, request):
    program_run = request.getfixturevalue(which)
    env_spec = spec(which)
    bucket = named(program_run, "state-bucket")
    assert bucket.inputs["bucket"] == env_spec.backend.bucket
    assert bucket.inputs["forceDestroy"] is False

    def setting(name):
        res = named(program_run, naming.bucket_setting("state-bucket", name))
        assert res.inputs["bucket"] == "(id of state-bucket)"
        return res.inputs

    assert setting("versioning")["versioningConfiguration"]["status"] == "Enabled"
    rule = setting("encryption")["rules"][0]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    assert "kmsMasterKeyId" in rule["applyServerSideEncryptionByDefault"]
    assert rule["bucketKeyEnabled"] is True
    block = setting("public-access-block")
    assert all(block[k] is True for k in (
        "blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets"))
    assert setting("ownership")["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    statement = json.loads(setting("policy")["policy"])["Statement"][0]
    arn = f"arn:aws:s3:::{env_spec.backend.bucket}"
    assert statement["Effect"] == "Deny" and statement["Action"] == "s3:*" and statement["Principal"] == "*"
    assert statement["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert sorted(statement["Resource"]) == [arn, f"{arn}/*"]
    lifecycle = setting("lifecycle")["rules"][0]
    assert lifecycle["status"] == "Enabled"
    assert lifecycle["noncurrentVersionExpiration"]["noncurrentDays"] == env_spec.backend.noncurrent_version_retention_days
    key = named(program_run, "state-key")
    assert key.inputs["enableKeyRotation"] is True
    alias = named(program_run, naming.child("state-key", "alias"))
    assert alias.inputs["name"] == env_spec.backend.kms_alias


def test_replication_posture(prod):
    replication = named(prod, naming.bucket_setting("state-bucket", "replication"))
    rule = replication.inputs["rules"][0]
    assert rule["status"] == "Enabled"
    assert rule["destination"]["bucket"] == "arn:aws:s3:::acme-groundctl-prod-state-replica"
    assert "replicaKmsKeyId" in rule["destination"]["encryptionConfiguration"]
    assert rule["sourceSelectionCriteria"]["sseKmsEncryptedObjects"]["status"] == "Enabled"
    assert named(prod, "replica-key").inputs["enableKeyRotation"] is True
    for setting in SETTINGS:
        named(prod, naming.bucket_setting("replica-bucket", setting))
    role = named(prod, "replication-role")
    assert replication.inputs["role"] == "(known after apply)"  # the role's ARN
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    assert trust["Principal"] == {"Service": "s3.amazonaws.com"}
    # The permissions name both keys' ARNs, which exist only after apply.
    assert named(prod, naming.child("replication-role", "policy")).inputs["role"] == "(id of replication-role)"


def test_protected_in_production_only(dev, prod):
    stateful = {"state-bucket", "state-key", "replica-bucket", "replica-key"}
    assert {r.name for r in prod.resources if r.protect} == stateful
    assert not any(r.protect for r in dev.resources)


@pytest.mark.parametrize("which", ["dev", "prod"])
def test_tags_and_names(which, request):
    program_run = request.getfixturevalue(which)
    assert_tagged(program_run, which, "backend")
    expected = {naming.bucket_setting("state-bucket", s) for s in SETTINGS} | {naming.child("state-key", "alias")}
    if which == "prod":
        expected |= {naming.bucket_setting("replica-bucket", s) for s in SETTINGS}
        expected |= {naming.bucket_setting("state-bucket", "replication"), naming.child("replication-role", "policy")}
    assert untaggable_names(program_run) == expected


def test_output_contract(dev, prod):
    assert_contract(dev, "backend")
    assert dev.outputs["bucket_name"] == "acme-groundctl-dev-state"
    assert dev.outputs["kms_alias"] == "alias/groundctl-dev-state"
    assert dev.outputs["secrets_provider"] == "awskms://alias/groundctl-dev-state?region=eu-west-1"
    assert prod.outputs["bucket_arn"] == "(known after apply)"
    assert_contract(run("backend", spec("dev"), lineage=None), "backend", lineage="")


def test_emulator_provider_settings():
    local = run("backend", spec("local"), endpoint_url="http://127.0.0.1:5123")
    prov = named(local, "aws").inputs
    endpoints = json.loads(prov["endpoints"])[0]
    assert endpoints["s3"] == endpoints["kms"] == endpoints["sts"] == "http://127.0.0.1:5123"
    for key in ("s3UsePathStyle", "skipCredentialsValidation", "skipRequestingAccountId", "skipMetadataApiCheck"):
        assert prov[key] == "true", key
    assert "allowedAccountIds" not in prov
    assert "endpoint=http://127.0.0.1:5123" in local.outputs["secrets_provider"]
    real = named(run("backend", spec("dev")), "aws").inputs
    assert json.loads(real["allowedAccountIds"]) == ["111111111111"]
    assert "endpoints" not in real


def test_no_tls_only_policy_on_a_plain_http_emulator(dev):
    # The emulator ignores policy conditions: the Deny would lock Pulumi out of its own bucket.
    local = run("backend", spec("local"), endpoint_url="http://127.0.0.1:5123")
    policy_type = "aws:s3/bucketPolicy:BucketPolicy"
    assert of_type(local, policy_type) == []
    assert len(of_type(dev, policy_type)) == 1


# --- every program: imports only pulumi, providers, the stdlib and stacks.common -------------

ALLOWED_ROOTS = {"pulumi", "pulumi_aws", "pulumi_kubernetes", "__future__"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            names.add(node.module or "")
    return names


PROGRAM_FILES = sorted(STACKS.glob("*/__main__.py")) + sorted((STACKS / "common").glob("*.py"))


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_programs_import_only_allowed_modules(path):
    for name in _imports(path):
        root = name.split(".")[0]
        allowed = (
            root in ALLOWED_ROOTS or root in sys.stdlib_module_names
            or name == "stacks.common" or name.startswith("stacks.common.")
        )
        assert allowed, f"{path} imports {name}; programs may import only pulumi*, the stdlib and stacks.common"


def test_four_programs_exist():
    assert {p.parent.name for p in STACKS.glob("*/__main__.py")} == {"backend", "network", "cluster", "flux"}


def test_key_policy_lets_cloudwatch_logs_use_the_state_key_in_this_account_only():
    from stacks.common import policies

    statements = json.loads(policies.state_key_policy("aws", "111111111111", "eu-west-1"))["Statement"]
    admin, logs = statements
    assert admin["Principal"] == {"AWS": "arn:aws:iam::111111111111:root"}
    assert logs["Principal"] == {"Service": "logs.eu-west-1.amazonaws.com"}
    assert logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"] == (
        "arn:aws:logs:eu-west-1:111111111111:log-group:*")
    assert "kms:*" not in logs["Action"]
    key = named(run("backend", spec("dev")), "state-key").inputs
    assert json.loads(key["policy"]) == {"Version": "2012-10-17", "Statement": statements}


def test_replication_policy_is_least_privilege():
    from stacks.common import policies

    doc = json.loads(policies.replication_policy("arn:aws:s3:::a", "arn:aws:s3:::b", "k1", "k2"))
    by_action = {a: s["Resource"] for s in doc["Statement"] for a in s["Action"]}
    assert by_action["s3:ReplicateObject"] == ["arn:aws:s3:::b/*"]
    assert by_action["s3:GetObjectVersionForReplication"] == ["arn:aws:s3:::a/*"]
    assert by_action["kms:Decrypt"] == ["k1"] and by_action["kms:Encrypt"] == ["k2"]
