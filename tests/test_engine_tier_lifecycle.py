"""Engine tier: the life of an environment through groundctl's commands and the real Pulumi CLI.

The layers are the dynamic-provider programs in tests/engine_programs (records in the emulator's S3);
the state lives in the product's own DIY backend, the spec's state bucket in the same emulator, with
passphrase secrets. The tests share one environment and run in file order, each one starting from
where the one before left it (a fresh environment per test would multiply the engine's start-up cost).
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, PASSPHRASE, SECRET_TOKEN, tier  # noqa: F401 - fixture

pytestmark = [pytest.mark.engine, requires_pulumi]


def _layers(record: dict) -> dict:
    return {lay["layer"]: lay for lay in record["layers"]}


def _stored_text(tier) -> str:
    """Every object groundctl and Pulumi keep in the state bucket, concatenated (for leak checks)."""
    return "\n".join(tier.s3.get_object(Bucket=tier.state_bucket, Key=k)["Body"].read().decode("utf-8", "replace")
                     for k in tier.keys(""))


def test_plan_on_a_fresh_environment_creates_no_stack_and_no_config(tier, tmp_path):
    code, out, err = tier.cli("plan", "SPEC", "--layers", LAYERS, "--out", str(tmp_path / "plans"))
    # No state bucket yet: the plan says how the environment is born and writes nothing, not even the bucket.
    assert code == 0 and "not deployed yet" in out + err, err
    buckets = {b["Name"] for b in tier.s3.list_buckets()["Buckets"]}
    assert tier.state_bucket not in buckets
    assert not list(tier.stacks.glob("*/Pulumi.*.yaml")), "plan wrote a stack config file"


def test_up_creates_the_layers_and_a_second_up_applies_nothing(tier):
    record = tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")
    assert record["outcome"] == "succeeded", record
    layers = _layers(record)
    assert layers["network"]["achieved"] == "applied" and layers["cluster"]["achieved"] == "applied"
    assert tier.record(tier.record_key("network", "vpc")) == {"cidr": "10.10.0.0/16"}
    assert tier.record(tier.record_key("network", "public-1"))["zone"] == "us-east-1b"
    cluster = tier.record(tier.record_key("cluster", "cluster"))
    assert cluster["vpc"] == tier.record_key("network", "vpc")  # through the StackReference
    assert tier.ledger_serials("network") == [1] and tier.ledger_serials("cluster") == [1]
    resources = tier.checkpoint("network")["checkpoint"]["latest"]["resources"]
    assert sum(r["type"] == "pulumi-python:dynamic:Resource" for r in resources) == 5

    again = tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")
    assert again["outcome"] == "succeeded"
    assert {k: v["achieved"] for k, v in _layers(again).items()} == {"network": "unchanged", "cluster": "unchanged"}
    assert tier.ledger_serials("network") == [1] and tier.ledger_serials("cluster") == [1]


def test_outputs_and_a_secret_config_value_and_output_come_back_right(tier):
    code, out, err = tier.cli("up", "SPEC", "--layers", LAYERS, "--yes", "--json",
                              env={"ENGINE_TIER_ADMIN_TOKEN": SECRET_TOKEN})
    assert code == 0, err
    assert _layers(json.loads(out))["cluster"]["achieved"] == "applied"
    engine = tier.engine()
    outputs = engine.outputs("cluster")
    assert outputs.secret_keys == frozenset({"kubeconfig"})
    assert json.loads(outputs.values["kubeconfig"])["token"] == SECRET_TOKEN
    assert outputs.values["cluster_name"] == "local-cluster-cluster"
    assert engine.outputs("network").values["private_subnet_ids"] == [
        tier.record_key("network", "private-0"), tier.record_key("network", "private-1")]
    # Pulumi keeps the secret encrypted with the passphrase; groundctl never prints or stores it.
    root = next(r for r in tier.checkpoint("cluster")["checkpoint"]["latest"]["resources"]
                if r["type"] == "pulumi:pulumi:Stack")
    kubeconfig = root["outputs"]["kubeconfig"]
    assert set(kubeconfig) == {"4dabf18193072939515e22adb298388d", "ciphertext"}
    status = tier.cli("status", "SPEC", "--json")
    for text in (out, err, *status[1:], _stored_text(tier)):
        assert SECRET_TOKEN not in text and PASSPHRASE not in text


def test_a_failed_up_mid_layer_resumes_where_it_stopped(tier):
    spec = tier.spec_path.read_text()
    tier.spec_path.write_text(spec.replace("az_count: 2", "az_count: 3"))
    before = tier.ledger_serials("network")
    code, out, err = tier.cli("up", "SPEC", "--layers", LAYERS, "--yes", "--json",
                              env={"ENGINE_TIER_FAULTS": json.dumps({"public-2": "fail"})})
    assert code == 4, err
    failed = json.loads(out)
    assert failed["stopped_at"] == "network/up" and failed["outcome"] == "failed"
    tier.notes["failed up"] = err + failed["message"]
    assert tier.record(tier.record_key("network", "private-2")) is not None  # created before the failure
    assert tier.record(tier.record_key("network", "public-2")) is None

    resumed = tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")
    assert resumed["outcome"] == "succeeded"
    assert {k: v["achieved"] for k, v in _layers(resumed).items()} == {"network": "applied", "cluster": "applied"}
    assert tier.record(tier.record_key("network", "public-2"))["zone"] == "us-east-1c"
    assert tier.ledger_serials("network") == [*before, before[-1] + 1]
    assert len(tier.record(tier.record_key("cluster", "cluster"))["subnets"]) == 3


def test_the_failed_run_says_which_resource_failed_and_why(tier):
    assert "injected failure creating record public-2" in tier.notes["failed up"]


def test_drift_made_outside_pulumi_is_reported_through_refresh(tier):
    vpc_key, gone_key = tier.record_key("network", "vpc"), tier.record_key("network", "public-1")
    vpc, gone = tier.record(vpc_key), tier.record(gone_key)
    tier.s3.put_object(Bucket=tier.records_bucket, Key=vpc_key, Body=json.dumps({"cidr": "10.99.0.0/16"}).encode())
    tier.s3.delete_object(Bucket=tier.records_bucket, Key=gone_key)

    report = tier.cli_json("drift", "SPEC", "--layers", LAYERS, ok=(1,))
    rows = {r["layer"]: r for r in report["layers"]}
    assert report["drift"] is True and rows["network"]["state"] == "drift" and rows["cluster"]["state"] == "clean"
    changed = {c["urn"].rsplit("::", 1)[1]: (c["operation"], c["diff_keys"]) for c in rows["network"]["changes"]}
    # The refresh found the record changed and the other gone; the program's own step follows (an update,
    # and a create that would bring the deleted one back), marked with what the refresh saw.
    assert changed["vpc"][0] == "update" and "body" in changed["vpc"][1]
    assert changed["public-1"] == ("create", ["<deleted>"])
    assert set(changed) == {"vpc", "public-1"}

    for key, body in ((vpc_key, vpc), (gone_key, gone)):  # put things back as Pulumi left them
        tier.s3.put_object(Bucket=tier.records_bucket, Key=key, Body=json.dumps(body, sort_keys=True).encode())
    assert tier.cli_json("drift", "SPEC", "--layers", "network")["drift"] is False


def test_no_run_left_a_file_beside_the_programs(tier):
    # Every command above ran here; the stack settings of each run lived and died in its own folder.
    assert tier.program_files() == ["cluster", "cluster/Pulumi.yaml", "cluster/__main__.py",
                                    "network", "network/Pulumi.yaml", "network/__main__.py"]
