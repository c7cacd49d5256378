"""Import documents carry their explicit providers' inputs.

`pulumi import --file` creates an explicit provider that is not in the stack from the file's
`providerInputs` (pkg/cmd/pulumi/operations/import.go: importFile.ProviderInputs, read in parseImportFile;
pkg/resource/deploy/import.go: "If the provider is not in state, it will be created below using its
ProviderInputs"); with none it is created with no configuration at all, i.e. ambient region and
credentials, no assumed role and no allowed account. The SDK's own Stack.import_resources writes only
`resources` and `nameTable`, so the engine hands Pulumi the whole document.
"""

from __future__ import annotations

from recovery.survivors.import_plan import plan_for_survivors, plan_from_state
from recovery.survivors.state_vs_live import LiveItem

REPLICA_INPUTS = {"region": "eu-central-1", "allowedAccountIds": '["111111111111"]',
                  "assumeRoles": '[{"roleArn":"arn:aws:iam::111111111111:role/apply"}]', "version": "7.51.1"}
PRIMARY_INPUTS = {"region": "eu-west-1", "allowedAccountIds": '["111111111111"]', "version": "7.51.1"}
SECRET_INPUT = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                "ciphertext": "v1:abc:def"}

STATE = [
    {"urn": "urn:pulumi:prod::backend::pulumi:pulumi:Stack::backend-prod", "type": "pulumi:pulumi:Stack",
     "custom": False},
    {"urn": "urn:pulumi:prod::backend::pulumi:providers:aws::aws", "type": "pulumi:providers:aws", "custom": True,
     "id": "p1", "inputs": dict(PRIMARY_INPUTS, secretKey=SECRET_INPUT)},
    {"urn": "urn:pulumi:prod::backend::pulumi:providers:aws::aws-replica", "type": "pulumi:providers:aws",
     "custom": True, "id": "p2", "inputs": REPLICA_INPUTS},
    {"urn": "urn:pulumi:prod::backend::aws:s3/bucket:Bucket::replica-bucket", "type": "aws:s3/bucket:Bucket",
     "custom": True, "id": "acme-state-replica", "provider": "urn:pulumi:prod::backend::pulumi:providers:aws::aws-replica::p2",
     "outputs": {"bucket": "acme-state-replica"}},
    {"urn": "urn:pulumi:prod::backend::aws:s3/bucket:Bucket::state-bucket", "type": "aws:s3/bucket:Bucket",
     "custom": True, "id": "acme-state", "provider": "urn:pulumi:prod::backend::pulumi:providers:aws::aws::p1",
     "outputs": {"bucket": "acme-state"}},
]


def test_a_plan_from_state_gives_each_explicit_provider_its_state_inputs():
    data = plan_from_state(STATE).to_pulumi_json()
    by_name = {r["name"]: r for r in data["resources"]}
    replica_ref = by_name["replica-bucket"]["provider"]
    assert data["nameTable"][replica_ref].endswith("::aws-replica")
    assert data["providerInputs"][replica_ref] == REPLICA_INPUTS  # its region, role and account, not ambient
    primary_ref = by_name["state-bucket"]["provider"]
    assert data["providerInputs"][primary_ref]["secretKey"] == SECRET_INPUT  # ciphertext, as Pulumi serializes it
    plan = plan_from_state(STATE)
    assert not any("create it in the target stack first" in n for n in plan.notes)


def test_survivors_adopted_into_a_stack_get_the_inputs_of_the_provider_chosen_for_them():
    survivor = LiveItem("aws:s3/bucket:Bucket", "replica-bucket", "acme-state-replica",
                        "arn:aws:s3:::acme-state-replica", region="eu-central-1")
    data = plan_for_survivors([survivor], STATE).to_pulumi_json()
    (entry,) = data["resources"]
    assert data["nameTable"][entry["provider"]].endswith("::aws-replica")
    assert data["providerInputs"] == {entry["provider"]: REPLICA_INPUTS}


def test_a_provider_without_inputs_in_state_is_still_noted():
    bare = [dict(r) for r in STATE]
    bare[2].pop("inputs")
    plan = plan_from_state(bare)
    assert any("aws-replica" in n and "up --target" in n for n in plan.notes)
    assert all(not k.startswith("aws-replica") for k in plan.provider_inputs)
