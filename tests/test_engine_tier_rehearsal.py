"""Engine tier, issue 28: `groundctl state rehearse` with the real Pulumi engine, the stand-in layers and their
state in the emulator's S3, every request through the test fault proxy, which logs it (and, for the KMS case,
answers Decrypt as AWS does for a disabled key, which the emulator never does).

In every case the real stacks' object versions, Pulumi's locks and the ledger (every version in the state
bucket but the rehearsal records) and the stand-in "cloud" (the records bucket) are identical before and
after, and the proxy's log shows no write outside `.groundctl/rehearsals/`.
"""

from __future__ import annotations

import json

import boto3
import pytest

from bootstrap.records.ledger import read_ledger
from recovery.evidence.rehearsal_record import load_rehearsal_record
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, make_tier, tier_environment
from tests.faultproxy import FaultProxy

pytestmark = [pytest.mark.engine, requires_pulumi]

REHEARSALS = ".groundctl/rehearsals/"
SUMMARY = "/~summary.json"  # .groundctl/drift/<env>/~summary.json
WRONG = "not-the-passphrase-Wq71"
READS = ("GET", "HEAD")


@pytest.fixture(scope="module")
def proxy(emulator_endpoint):
    with FaultProxy(emulator_endpoint, fraction=0.0, lifetime_seconds=3600, max_requests=500_000) as p:
        yield p


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, proxy):
    """network and cluster deployed through the proxy (so the state names its endpoint, as a rehearsal sees it)."""
    tier = make_tier(tmp_path_factory.mktemp("rehearse"), proxy.endpoint_url)
    with tier_environment(tier):
        assert tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")["outcome"] == "succeeded"
        yield tier


def _versions(s3, bucket: str) -> list[tuple]:
    out = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for kind in ("Versions", "DeleteMarkers"):
            out += [(kind, v["Key"], v["VersionId"], v.get("ETag"), v["IsLatest"]) for v in page.get(kind, [])
                    if not v["Key"].startswith(REHEARSALS) and not v["Key"].endswith(SUMMARY)]
    return sorted(out)


def _rehearse(tier, proxy, *args: str, env=None, ok=(0,)) -> tuple[dict, str]:
    """`state rehearse SPEC --json --record ARGS`, proving it wrote its record and nothing else."""
    before = (_versions(tier.s3, tier.state_bucket), _versions(tier.s3, tier.records_bucket))
    mark = len(proxy.log)
    code, out, err = tier.cli("state", "rehearse", "SPEC", "--json", "--record", *args, env=env)
    assert code in ok, f"exit {code}: {err}{out}"
    assert (_versions(tier.s3, tier.state_bucket), _versions(tier.s3, tier.records_bucket)) == before
    log = proxy.log[mark:]
    s3_writes = [(m, p) for m, p, target in log if m not in READS and p.startswith(("/" + tier.state_bucket,
                                                                                   "/" + tier.records_bucket))]
    # The record, and the environment's summary it adds itself to (recovery.evidence.summary), once.
    summaries = [w for w in s3_writes if w[1].split("?")[0].endswith(SUMMARY)]
    s3_writes = [w for w in s3_writes if w not in summaries]
    assert [m for m, _p in summaries] == ["PUT"], summaries
    assert len(s3_writes) == 1 and s3_writes[0][1].startswith(f"/{tier.state_bucket}/{REHEARSALS}"), s3_writes
    assert {t for _m, _p, t in log if t} <= {"TrentService.Decrypt", "TrentService.DescribeKey"}
    doc = json.loads(out)
    key = s3_writes[0][1].split("?")[0][len(tier.state_bucket) + 2:]
    stored = [k for k in tier.keys(REHEARSALS) if k.startswith(key.split("--")[0])]
    assert len(stored) == 1 and load_rehearsal_record(tier.store.get(stored[0]).body, stored[0])["rehearsal_id"] \
        == doc["rehearsal_id"]
    return doc, out + err


def _layer(doc: dict, name: str) -> dict:
    return next(lay for lay in doc["layers"] if lay["layer"] == name)


def _head(tier, layer: str):
    return read_ledger(tier.store, layer, tier.env_name).head


@pytest.mark.timeout(900)
def test_a_clean_rehearsal_proves_each_layers_ledger_head(deployed, proxy):
    doc, _ = _rehearse(deployed, proxy, "--layers", LAYERS)
    assert doc["outcome"] == "proven" and doc["pulumi_version"]
    for name in ("network", "cluster"):
        lay, head = _layer(doc, name), _head(deployed, name)
        assert lay["outcome"] == "proven", lay
        assert (lay["version"]["serial"], lay["version"]["version_id"]) == (head.serial, head.version_id)
        assert lay["decrypt"] == {**lay["decrypt"], "result": "ok", "provider": "passphrase"}
        assert lay["preview"]["result"] == "no-change" and lay["age_seconds"] >= 0
        assert set(lay["seconds"]) >= {"choose", "restore", "decrypt", "preview"}
        # The ledger head is the stack's newest state: a restore of it loses nothing, however old it is.
        assert lay["rpo_seconds"] == 0 and lay["newer"] == {"versions": 0, "oldest": None}
    cluster = _layer(doc, "cluster")
    assert cluster["decrypt"]["secrets"] >= 1  # its kubeconfig output is a secret of the state
    # The stand-ins have no backend layer: a reference never deployed is noted, not a failure.
    assert [(r["layer"], r["deployed"], r["restored"]) for r in cluster["references"]] == [
        ("backend", False, False), ("network", True, True)]


@pytest.mark.timeout(900)
def test_drift_since_the_version_is_restorable_and_names_the_resource_and_field(deployed, proxy):
    tier = deployed
    key = tier.record_key("network", "vpc")
    body = tier.record(key)
    tier.s3.put_object(Bucket=tier.records_bucket, Key=key, Body=json.dumps({"cidr": "10.99.0.0/16"}).encode())
    try:
        doc, _ = _rehearse(tier, proxy, "--layers", "network", ok=(1,))
    finally:
        tier.s3.put_object(Bucket=tier.records_bucket, Key=key, Body=json.dumps(body, sort_keys=True).encode())
    net = _layer(doc, "network")
    assert doc["outcome"] == "drift" and net["outcome"] == "drift" and net["failed_phase"] is None
    changed = {c["urn"].rsplit("::", 1)[1]: c for c in net["preview"]["changes"]}
    assert set(changed) == {"vpc"} and changed["vpc"]["operation"] == "update"
    assert "body" in changed["vpc"]["diff_keys"]


@pytest.mark.timeout(900)
def test_a_wrong_passphrase_fails_the_decryption_naming_the_provider(deployed, proxy):
    doc, text = _rehearse(deployed, proxy, "--layers", "network", env={"PULUMI_CONFIG_PASSPHRASE": WRONG}, ok=(1,))
    net = _layer(doc, "network")
    assert (net["outcome"], net["failed_phase"], net["decrypt"]["kind"]) == ("failed", "decrypt", "wrong-passphrase")
    assert "(passphrase)" in net["reason"] and net["preview"]["result"] == "not-attempted"
    assert WRONG not in text and all(WRONG not in json.dumps(load_rehearsal_record(deployed.store.get(k).body, k))
                                     for k in deployed.keys(REHEARSALS))


@pytest.mark.timeout(900)
def test_a_corrupt_newest_version_falls_back_as_recover_would_and_the_record_names_the_version(deployed, proxy):
    tier = deployed
    good = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["Body"].read()
    corrupt = tier.put_state("network", good[: len(good) // 2])
    try:
        doc, _ = _rehearse(tier, proxy, "--layers", "network", "--newest", "2")
    finally:
        tier.put_state("network", good)
    net, head = _layer(doc, "network"), _head(tier, "network")
    assert net["outcome"] == "proven" and net["version"]["version_id"] == head.version_id != corrupt
    assert [p["version_id"] for p in net["not_rehearsed"]] == [corrupt]
    assert net["not_rehearsed"][0]["reason"].startswith("unreadable")
    # What a restore of the head loses is the corrupt write: the measured RPO is its age, not the head's.
    assert net["newer"]["versions"] == 1 and net["newer"]["oldest"]["version_id"] == corrupt
    assert 0 <= net["rpo_seconds"] <= net["age_seconds"]


@pytest.mark.timeout(900)
def test_a_version_whose_urns_name_another_stack_is_never_rehearsed(deployed, proxy):
    tier = deployed
    good = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["Body"].read()
    foreign = good.replace(f"urn:pulumi:{tier.env_name}::".encode(), b"urn:pulumi:prod::")
    foreign_version = tier.put_state("network", foreign)
    try:
        doc, _ = _rehearse(tier, proxy, "--layers", "network", "--newest", "3")
    finally:
        tier.put_state("network", good)
    net, head = _layer(doc, "network"), _head(tier, "network")
    # The head's bytes: its own version, or the copy of it the test before put back (the same serial).
    assert net["outcome"] == "proven" and (net["version"]["serial"], net["version"]["sha256"]) == (
        head.serial, head.sha256) and net["version"]["version_id"] != foreign_version
    passed = {p["version_id"]: p["reason"] for p in net["not_rehearsed"]}
    assert "another stack (prod::network)" in passed[foreign_version]
    assert foreign_version not in [o["version"]["version_id"] for o in net["others"]]


DISABLED = (400, "application/x-amz-json-1.1",
            b'{"__type":"DisabledException","message":"The key is disabled."}')


@pytest.mark.timeout(900)
def test_a_disabled_kms_key_fails_the_decryption_naming_the_key_from_describe_key(tmp_path, proxy):
    from bootstrap.engine.workspace import kms_provider

    tier = make_tier(tmp_path, proxy.endpoint_url)
    kms = boto3.client("kms", endpoint_url=proxy.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    key = kms.create_key()["KeyMetadata"]
    kms.create_alias(AliasName=f"alias/{tier.state_bucket}", TargetKeyId=key["KeyId"])
    provider = kms_provider(f"alias/{tier.state_bucket}", "us-east-1")
    with tier_environment(tier) as mp:
        mp.delenv("PULUMI_CONFIG_PASSPHRASE")
        mp.setenv("ENGINE_TIER_SECRETS_PROVIDER", provider)
        assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
        doc, _ = _rehearse(tier, proxy, "--layers", "network")
        assert _layer(doc, "network")["decrypt"]["provider"] == provider

        kms.disable_key(KeyId=key["KeyId"])  # the emulator's Decrypt ignores it: the proxy answers as AWS does
        proxy.answer = lambda m, p, headers, b: DISABLED if headers.get("X-Amz-Target") == "TrentService.Decrypt" \
            else None
        try:
            doc, _ = _rehearse(tier, proxy, "--layers", "network", ok=(1,))
        finally:
            proxy.answer = None
    net = _layer(doc, "network")
    assert (net["failed_phase"], net["decrypt"]["kind"]) == ("decrypt", "key-disabled")
    assert net["decrypt"]["key"]["arn"] == key["Arn"] and net["decrypt"]["key"]["state"] == "Disabled"
    # The proxy's answer names no key, and the state records only the alias: said to be the alias's current key.
    assert provider in net["reason"] and \
        f"the KMS key alias/{tier.state_bucket} points to now ({key['Arn']}) is disabled" in net["reason"]
    assert "KMS's error names no key" in net["reason"]


def _kms_error(code: str, message: str):
    body = json.dumps({"__type": code, "message": message}).encode()
    return lambda m, p, headers, b: (400, "application/x-amz-json-1.1", body) \
        if headers.get("X-Amz-Target") == "TrentService.Decrypt" else None


@pytest.mark.timeout(900)
def test_after_the_alias_was_moved_the_key_that_failed_is_named_from_kmss_own_error(tmp_path, proxy):
    """Issue 37 §1: the state records `awskms://alias/…`, never a key. DescribeKey of the alias answers for its
    current key, which the rehearsal named as the one that failed. The emulator allows an alias to be moved and a
    key disabled; its Decrypt, like AWS's, uses the key the ciphertext names, whatever the alias points to (and
    ignores a key's state: the proxy answers as AWS does for the disabled key, naming it)."""
    from bootstrap.engine.workspace import kms_provider

    tier = make_tier(tmp_path, proxy.endpoint_url)
    kms = boto3.client("kms", endpoint_url=proxy.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    old = kms.create_key()["KeyMetadata"]
    alias = f"alias/{tier.state_bucket}"
    kms.create_alias(AliasName=alias, TargetKeyId=old["KeyId"])
    provider = kms_provider(alias, "us-east-1")
    with tier_environment(tier) as mp:
        mp.delenv("PULUMI_CONFIG_PASSPHRASE")
        mp.setenv("ENGINE_TIER_SECRETS_PROVIDER", provider)
        assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
        new = kms.create_key()["KeyMetadata"]
        kms.update_alias(AliasName=alias, TargetKeyId=new["KeyId"])
        doc, _ = _rehearse(tier, proxy, "--layers", "network")  # the old key still decrypts what it encrypted
        assert _layer(doc, "network")["outcome"] == "proven"

        kms.disable_key(KeyId=old["KeyId"])
        proxy.answer = _kms_error("DisabledException", f"{old['Arn']} is disabled.")
        try:
            moved, _ = _rehearse(tier, proxy, "--layers", "network", ok=(1,))
            proxy.answer = _kms_error("AccessDeniedException", "The ciphertext refers to a customer master key that "
                                      "does not exist, does not exist in this region, or you are not allowed to "
                                      "access.")
            unnamed, _ = _rehearse(tier, proxy, "--layers", "network", ok=(1,))
        finally:
            proxy.answer = None
    net = _layer(moved, "network")
    decrypt, reason = net["decrypt"], net["reason"]
    assert (net["failed_phase"], decrypt["kind"]) == ("decrypt", "key-disabled")
    assert (decrypt["key"]["arn"], decrypt["key"]["state"], decrypt["key"]["source"]) == (
        old["Arn"], "Disabled", "kms-error")  # its state as the emulator's DescribeKey of the key itself says
    assert (decrypt["alias_key"]["arn"], decrypt["alias_key"]["state"]) == (new["Arn"], "Enabled")
    assert f"the KMS key {old['Arn']} is disabled" in reason and f"now points to {new['Arn']}" in reason
    assert f"{new['Arn']} ({alias}) is disabled" not in reason  # what it said before: the wrong key
    net = _layer(unnamed, "network")
    assert (net["decrypt"]["kind"], net["decrypt"]["key"]["source"]) == ("access-denied", "alias-now")
    assert f"the KMS key {alias} points to now ({new['Arn']})" in net["reason"]
    assert "the key that failed is the one it pointed to then" in net["reason"]


@pytest.mark.timeout(900)
def test_a_plugin_version_the_chosen_state_records_and_this_machine_lacks_fails_the_layer_naming_it(deployed, proxy):
    """Issue 28 with the real CLI: the network state's newest version binds an aws provider to v7.40.0, which is
    neither on PATH nor in the tier's PULUMI_HOME, and its VPC record to that provider (the stand-in programs
    need no plugin, so the program's check passes). The real preview --refresh of it stops loading that plugin
    ("no resource plugin 'pulumi-resource-aws' found … at version v7.40.0"), which the rehearsal reported as a
    failed preview quoting the engine. Now it fails the layer at its preview, which never runs (no record of the
    stand-in "cloud" is read), naming the plugin, the version and its install command; the real `stack export
    --show-secrets` still decrypts the state."""
    tier = deployed
    state = tier.checkpoint("network")
    resources = state["checkpoint"]["latest"]["resources"]
    aws = {"urn": f"urn:pulumi:{tier.env_name}::network::pulumi:providers:aws::default_7_40_0",
           "type": "pulumi:providers:aws", "custom": True, "id": "3f1c8e2a-0d4b-4c6e-9a7f-5b2d1e0c9a8b",
           "inputs": {"version": "7.40.0"}, "outputs": {"version": "7.40.0"}}
    resources.insert(1, aws)
    # The VPC's record is read by that provider, as an SDK's resources are: its refresh would run v7.40.0.
    vpc = next(r for r in resources if r["urn"].endswith("::vpc"))
    vpc["provider"] = f"{aws['urn']}::{aws['id']}"
    bound = tier.put_state("network", json.dumps(state, indent=4).encode())
    mark = len(proxy.log)
    try:
        doc, _ = _rehearse(tier, proxy, "--layers", "network", ok=(1,))
    finally:
        # The version goes: the head is the stack's newest state again, as the other tests expect.
        tier.s3.delete_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"), VersionId=bound)
    net = _layer(doc, "network")
    reason = " ".join(net["reason"].split())
    assert (net["outcome"], net["failed_phase"], net["version"]["version_id"]) == ("failed", "preview", bound), net
    assert "the aws resource plugin v7.40.0 (the state of the network layer records it for its provider" in reason
    assert "`groundctl pins update --plugin aws@7.40.0` in the repository" in reason
    assert f"`PULUMI_HOME={tier.env['PULUMI_HOME']} groundctl pins install --plugins` there" in reason
    assert net["preview"]["result"] == "not-attempted" and net["decrypt"]["result"] == "ok"
    # No record was read (a refresh reads each): the test's own listings of the bucket are all it saw.
    assert [p for _m, p, _t in proxy.log[mark:] if p.startswith(f"/{tier.records_bucket}/")] == []
