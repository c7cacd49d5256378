"""Engine tier: `up --plan-dir` applies what the pull request's plan showed, on the real Pulumi CLI.

`groundctl plan --out` keeps each layer's Pulumi saved plan beside the plan files; `up --plan-dir` applies with
`pulumi up --plan`. A value that changes between the plan and the apply, in the very field the reviewer saw
changing (the fingerprint of URN, operation and field names stays the same), is refused by Pulumi's own check:
exit 3 naming the resource and the field, nothing applied. The plan folder is applied as CI applies it: from
another clone and another PULUMI_HOME than the one that wrote it. The tests run in file order on one environment.
"""

from __future__ import annotations

import json
import shutil

import pytest

from bootstrap.planning.knowledge import knowledge
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, PASSPHRASE, SECRET_TOKEN, tier  # noqa: F401 - fixture

pytestmark = [pytest.mark.engine, requires_pulumi]

TOKEN = {"ENGINE_TIER_ADMIN_TOKEN": SECRET_TOKEN}  # a secret config value of the cluster layer, in every run


def _set_cidr(tier, cidr: str) -> None:
    text = tier.spec_path.read_text()
    current = next(line for line in text.splitlines() if line.strip().startswith("cidr:"))
    tier.spec_path.write_text(text.replace(current, f"{current.split('cidr:')[0]}cidr: {cidr}"))


def _bucket(tier) -> dict:
    """Every object of the state bucket and its ETag: what a run wrote there, if anything."""
    pages = tier.s3.get_paginator("list_objects_v2").paginate(Bucket=tier.state_bucket)
    return {o["Key"]: o["ETag"] for page in pages for o in page.get("Contents", [])}


def test_the_plan_keeps_each_layers_saved_plan_without_a_secret_and_writes_nothing(tier, tmp_path_factory):
    assert tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes", env=TOKEN)["outcome"] == "succeeded"
    _set_cidr(tier, "10.20.0.0/16")  # the pull request
    before = _bucket(tier)
    plans = tmp_path_factory.mktemp("pr-runner") / "plans"
    code, out, err = tier.cli("plan", "SPEC", "--layers", LAYERS, "--out", str(plans),
                              env={**TOKEN, "PULUMI_HOME": str(tmp_path_factory.mktemp("pr-pulumi-home"))})
    assert code == 0, err
    # A preview takes no lock and writes no state: the read-only plan role can make the saved plans.
    assert _bucket(tier) == before
    network = json.loads((plans / "plan-local-network.json").read_text())
    # The config change updates the VPC record and the dynamic provider that gets the stack's config; a dynamic
    # provider's diff names no field, so the fingerprint holds (URN, operation) alone.
    assert sorted(c["name"] for c in network["changes"] if c["operation"] == "update") == ["default", "vpc"]
    assert network["saved_plan"]["file"] == "pulumi-plan-local-network.json"
    cluster_plan = (plans / "pulumi-plan-local-cluster.json").read_text()
    assert "resourcePlans" in cluster_plan and "ciphertext" in cluster_plan  # the secret config, encrypted
    for path in plans.iterdir():
        text = path.read_text()
        assert SECRET_TOKEN not in text and PASSPHRASE not in text, path.name
    # Pulumi's own saved plan, read for what the reviewer is shown: its planned values and the unknown ones.
    known = knowledge((plans / "pulumi-plan-local-network.json").read_text())
    assert known.values > 0 and all(p.startswith("urn:pulumi:local::network::") for p in known.unknown), known
    code, out, err = tier.cli("ci", "digests", "local", "--plan-dir", str(plans), "--json", endpoint=False)
    assert code == 0, err
    digests = json.loads(out)["layers"]
    assert digests["network"]["values"] == known.values and digests["network"]["unknown"] == known.unknown_count
    tier.notes["plans"] = plans


def test_a_value_changed_after_the_review_is_refused_naming_resource_and_field(tier):
    _set_cidr(tier, "10.30.0.0/16")  # after the review: the same field of the same resource, another value
    serials, vpc = tier.ledger_serials("network"), tier.record(tier.record_key("network", "vpc"))
    code, out, err = tier.cli("up", "SPEC", "--layers", LAYERS, "--plan-dir", str(tier.notes["plans"]), "--yes",
                              "--json", env=TOKEN)
    assert code == 3, err
    record = json.loads(out)
    assert record["stopped_at"] == "network/up"
    message = record["message"]
    # The first resource of the layer that deviates: the provider the program's config goes to, registered
    # before the records; the field is named from the fresh preview's own diff, the value never.
    assert "refused it at default (urn:pulumi:local::network::pulumi:providers:pulumi-python::default)" in message, \
        message
    assert "a value of network:cidr other than the approved plan's" in message, message
    assert "Nothing in network was changed" in message
    assert "10.30" not in message + err and "10.20" not in message + err
    assert tier.record(tier.record_key("network", "vpc")) == vpc == {"cidr": "10.10.0.0/16"}
    assert tier.ledger_serials("network") == serials


def test_the_unchanged_plan_applies_from_another_clone_and_pulumi_home(tier, tmp_path_factory):
    _set_cidr(tier, "10.20.0.0/16")  # back to what was reviewed
    clone = tmp_path_factory.mktemp("merge-runner")
    shutil.copytree(tier.stacks, clone / "stacks")
    plans = shutil.copytree(tier.notes["plans"], clone / "approved" / "live")  # the artifact, downloaded
    record = tier.cli_json("up", "SPEC", "--layers", LAYERS, "--plan-dir", str(plans), "--yes",
                           env={**TOKEN, "ENGINE_TIER_STACKS": str(clone / "stacks"),
                                "PULUMI_HOME": str(clone / "pulumi-home")})
    assert record["outcome"] == "succeeded", record
    layers = {lay["layer"]: lay for lay in record["layers"]}
    assert layers["network"]["achieved"] == "applied" and layers["network"]["applied_with"] == "reviewed-plan"
    assert layers["cluster"]["achieved"] == "unchanged"
    assert tier.record(tier.record_key("network", "vpc")) == {"cidr": "10.20.0.0/16"}
    assert tier.engine().outputs("network").values["vpc_cidr"] == "10.20.0.0/16"


def test_a_real_saved_plan_made_less_known_after_the_review_is_refused_against_the_posted_digests(
        tier, tmp_path_factory):
    """Pulumi's own saved plans, edited as a forger would: every planned value made unknown (which Pulumi accepts
    for any value) and the plan files made to agree. The chain inside the artifact holds; the digests the plan
    job posted do not."""
    import hashlib

    from bootstrap.planning.knowledge import UNKNOWN

    head = "a1" * 20
    pr = tmp_path_factory.mktemp("pr-artifact")
    shutil.copytree(tier.notes["plans"], pr / "live")
    code, _, err = tier.cli("ci", "comment", "local", "--plan-dir", str(pr), "--commit", head,
                            "--out", str(pr / "comment.md"), endpoint=False)
    assert code == 0, err
    verify = ("ci", "verify-plan", "local", "--plan-dir", str(pr / "live"), "--comment", str(pr / "comment.md"),
              "--commit", head)
    assert tier.cli(*verify, endpoint=False)[0] == 0

    saved = pr / "live" / "pulumi-plan-local-network.json"
    doc = json.loads(saved.read_text())
    plans = doc.get("plan", doc)["resourcePlans"]

    def unknown(value):
        if isinstance(value, dict) and "4dabf18193072939515e22adb298388d" not in value and value:
            return {k: unknown(v) for k, v in value.items()}
        if isinstance(value, list) and value:
            return [unknown(v) for v in value]
        return UNKNOWN

    for resource in plans.values():
        diff = (resource.get("goal") or {}).get("inputDiff") or {}
        for part in ("adds", "updates"):
            if diff.get(part):
                diff[part] = unknown(diff[part])
    saved.write_text(json.dumps(doc))
    digest = hashlib.sha256(saved.read_bytes()).hexdigest()
    for path in (pr / "live").glob("plan-local-*.json"):
        plan = json.loads(path.read_text())
        for item in plan.get("layers", [plan]):
            if item.get("layer") == "network":
                item["saved_plan"]["sha256"] = digest
        path.write_text(json.dumps(plan))
    code, _, err = tier.cli(*verify, endpoint=False)
    assert code == 3, err
    message = " ".join(err.split())
    assert "network: its saved plan leaves" in message and "less known than the one reviewed" in message, message
