"""The state backend bootstrap against the emulator: every setting read back, idempotence, refusals."""

from __future__ import annotations

import json
import uuid

import pytest

from bootstrap.aws.backend import BUCKET_NAME, KEY_NAME, LIFECYCLE_RULE_ID, check_account, ensure_backend, tls_policy_decision
from bootstrap.kit.errors import Refused
from bootstrap.layers import STACKS_DIR
from stacks.common import policies


def _tags(pairs, k="Key", v="Value"):
    return {p[k]: p[v] for p in pairs}


def test_bootstrap_creates_every_setting(local_spec, aws):
    report = ensure_backend(local_spec, aws)
    b = local_spec.backend.bucket
    assert report.bucket == b and report.kms_alias == local_spec.backend.kms_alias
    assert {c.split()[0] for c in report.created} >= {"bucket"}
    s3, kms = aws.client("s3"), aws.client("kms")

    assert s3.get_bucket_versioning(Bucket=b)["Status"] == "Enabled"
    rule = s3.get_bucket_encryption(Bucket=b)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms",
                                                          "KMSMasterKeyID": report.kms_key_arn}
    assert rule["BucketKeyEnabled"] is True
    pab = s3.get_public_access_block(Bucket=b)["PublicAccessBlockConfiguration"]
    assert pab == {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                   "RestrictPublicBuckets": True}
    own = s3.get_bucket_ownership_controls(Bucket=b)["OwnershipControls"]["Rules"]
    assert own == [{"ObjectOwnership": "BucketOwnerEnforced"}]
    # Plain-http emulator: the TLS-only policy is left off, and the report says why.
    assert report.settings["policy"]["tls_only"] is False
    assert "plain HTTP" in report.settings["policy"]["note"]
    with pytest.raises(Exception):
        s3.get_bucket_policy(Bucket=b)
    lc = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
    ours = [r for r in lc if r["ID"] == LIFECYCLE_RULE_ID]
    assert ours[0]["NoncurrentVersionExpiration"]["NoncurrentDays"] == \
        local_spec.backend.noncurrent_version_retention_days
    assert ours[0]["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] == 7
    assert _tags(s3.get_bucket_tagging(Bucket=b)["TagSet"]) == {
        "groundctl:env": local_spec.name, "groundctl:layer": "backend", "groundctl:name": BUCKET_NAME}

    meta = kms.describe_key(KeyId=local_spec.backend.kms_alias)["KeyMetadata"]
    assert meta["Arn"] == report.kms_key_arn
    assert kms.get_key_rotation_status(KeyId=meta["KeyId"])["KeyRotationEnabled"] is True
    key_tags = _tags(kms.list_resource_tags(KeyId=meta["KeyId"])["Tags"], "TagKey", "TagValue")
    key_policy = json.loads(kms.get_key_policy(KeyId=meta["KeyId"], PolicyName="default")["Policy"])
    assert key_policy == json.loads(policies.state_key_policy("aws", "123456789012", "us-east-1"))
    assert meta["Description"] == f"groundctl {local_spec.name}: state bucket and Pulumi secrets"
    assert key_tags["groundctl:name"] == KEY_NAME and key_tags["groundctl:layer"] == "backend"

    # An object written without naming a key is encrypted with ours.
    s3.put_object(Bucket=b, Key="probe", Body=b"x")
    head = s3.head_object(Bucket=b, Key="probe")
    assert head["ServerSideEncryption"] == "aws:kms"


def test_tls_only_policy_is_put_when_asked_and_read_back(local_spec, aws):
    report = ensure_backend(local_spec, aws, tls_policy=True)
    b = local_spec.backend.bucket
    s3 = aws.client("s3")
    assert report.settings["policy"]["tls_only"] is True
    policy = json.loads(s3.get_bucket_policy(Bucket=b)["Policy"])
    assert policy == json.loads(policies.tls_only_bucket_policy(f"arn:aws:s3:::{b}"))  # the program's document
    assert ensure_backend(local_spec, aws, tls_policy=True).updated == ()
    s3.delete_bucket_policy(Bucket=b)  # the emulator ignores the condition and would deny everything


def test_tls_policy_decision_is_by_endpoint():
    assert tls_policy_decision(None)[0] is True
    assert tls_policy_decision("https://s3.example.internal")[0] is True
    applied, why = tls_policy_decision("http://127.0.0.1:5000")
    assert applied is False and "127.0.0.1:5000" in why


def test_second_run_creates_and_changes_nothing(local_spec, aws):
    first = ensure_backend(local_spec, aws)
    second = ensure_backend(local_spec, aws)
    assert first.changed and first.created
    assert second.created == () and second.updated == ()
    assert second.kms_key_arn == first.kms_key_arn
    assert second.settings == first.settings


def test_drifted_setting_is_converged_and_reported(local_spec, aws):
    ensure_backend(local_spec, aws)
    s3 = aws.client("s3")
    b = local_spec.backend.bucket
    s3.delete_public_access_block(Bucket=b)
    s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": [{"Key": "team", "Value": "platform"}]})
    again = ensure_backend(local_spec, aws)
    assert again.created == ()
    assert set(again.updated) == {"bucket-public-access-block", "bucket-tags"}
    tags = _tags(s3.get_bucket_tagging(Bucket=b)["TagSet"])
    assert tags["team"] == "platform" and tags["groundctl:name"] == BUCKET_NAME  # foreign tags kept


def test_existing_key_found_by_tag_is_adopted_not_duplicated(local_spec, aws):
    # A CreateKey whose response was lost leaves a tagged key without an alias; the next run adopts it.
    kms = aws.client("kms")
    env = f"adopt-{uuid.uuid4().hex[:8]}"
    orphan = kms.create_key(Tags=[{"TagKey": "groundctl:env", "TagValue": env},
                                  {"TagKey": "groundctl:layer", "TagValue": "backend"},
                                  {"TagKey": "groundctl:name", "TagValue": KEY_NAME}])["KeyMetadata"]
    alias = f"alias/adopt-{local_spec.backend.bucket}"
    spec = local_spec.model_copy(update={
        "name": env, "backend": local_spec.backend.model_copy(update={"kms_alias": alias})})
    report = ensure_backend(spec, aws)
    assert report.kms_key_arn == orphan["Arn"]
    assert not any(c.startswith("kms-key") for c in report.created)
    assert f"kms-alias {alias}" in report.created


def test_wrong_account_refused_naming_both(local_spec, aws):
    spec = local_spec.model_copy(update={"aws": local_spec.aws.model_copy(update={"account_id": "999999999999"})})
    with pytest.raises(Refused) as err:
        ensure_backend(spec, aws)
    assert "999999999999" in str(err.value) and "123456789012" in str(err.value)
    assert "\n" not in str(err.value)
    # and nothing was created
    s3 = aws.client("s3")
    assert spec.backend.bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_check_account_returns_the_emulator_account(local_spec, aws):
    assert check_account(local_spec, aws) == "123456789012"


def test_bootstrap_mirrors_the_backend_program():
    # The import into the backend stack must show no change: same logical names and lifecycle rule.
    program = (STACKS_DIR / "backend" / "__main__.py").read_text()
    for literal in (f'"{BUCKET_NAME}"', f'"{KEY_NAME}"', f'id="{LIFECYCLE_RULE_ID}"', "days_after_initiation=7",
                    "policies.tls_only_bucket_policy", "policies.state_key_policy",
                    'f"groundctl {settings.environment}: state bucket and Pulumi secrets"'):
        assert literal in program, literal
