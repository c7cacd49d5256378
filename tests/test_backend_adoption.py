"""The backend stack adopts what the boto3 bootstrap made, instead of planning a second key and bucket.

Proved under Pulumi's mock runtime: the import document names exactly the resources the backend program
declares that the bootstrap creates (same type, same logical name, through the program's primary
provider), for dev and for prod (replica on, whose replica-side resources the bootstrap never makes).
`pytest -k backend_adoption` selects these tests.

Facts relied on: `pulumi import --file` resolves an entry's `provider` through `nameTable`
(pkg/cmd/pulumi/operations/import.go, parseImportFile); an explicit provider missing from state is
created from the file's provider inputs or else from nothing (pkg/resource/deploy/import.go), which is
why the engine creates it first from the program (`up --target <provider>`).
"""

from __future__ import annotations

import json

import pytest

from bootstrap.aws.backend import BackendReport, ensure_backend
from bootstrap.aws.backend_import import PROVIDER_NAME, backend_import_document, provider_urn
from bootstrap.engine.automation import missing_providers
from recovery.survivors.import_ids import import_id
from recovery.state.urns import expected_urn
from tests.stackutil import run, spec

KEY_ARN = "arn:aws:kms:eu-west-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab"
# What the bootstrap never makes: the replica side of prod's state (the program creates it on its up).
REPLICA_ONLY = {"replication-role", "replication-role-policy", "state-bucket-replication"}


def report_for(env_spec, *, tls_only: bool) -> BackendReport:
    """A report shaped as ensure_backend returns it (its settings keys are checked against a real run below)."""
    settings = {"versioning": "Enabled", "encryption": {}, "public_access_block": {}, "ownership": "BucketOwnerEnforced",
                "policy": {"tls_only": tls_only}, "lifecycle": {}, "bucket_tags": {}, "kms_key": {}}
    return BackendReport(env_spec.backend.bucket, KEY_ARN, env_spec.backend.kms_alias, (), settings)


def declared_by_provider(program_run):
    providers = {r.urn: r.name for r in program_run.resources if r.type.startswith("pulumi:providers:")}
    out = {}
    for r in program_run.resources:
        if r.type.startswith("pulumi:providers:") or not r.custom:
            continue
        out[(r.type, r.name)] = providers.get((r.provider or "").rsplit("::", 1)[0])
    return out


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_backend_adoption_document_names_exactly_what_the_program_declares_that_the_bootstrap_creates(env):
    env_spec = spec(env)
    program = run("backend", env_spec)
    declared = declared_by_provider(program)
    document = backend_import_document(env_spec.name, report_for(env_spec, tls_only=True))
    imported = {(e["type"], e["name"]) for e in document["resources"]}

    assert imported <= set(declared), imported - set(declared)
    assert all(declared[k] == PROVIDER_NAME for k in imported)  # the primary provider, never the replica's
    not_imported = {k for k in declared if k not in imported}
    on_replica = {k for k, prov in declared.items() if prov == "aws-replica"}
    assert {name for _, name in not_imported - on_replica} == (REPLICA_ONLY if env_spec.backend.replica_region else set())
    if env == "prod":
        assert on_replica and not (on_replica & imported)
    provider = next(r for r in program.resources if r.type == "pulumi:providers:aws" and r.name == PROVIDER_NAME)
    # The engine names a child of the root stack without the stack's type (the mock monitor keeps it).
    real_urn = expected_urn(env_spec.name, "backend", provider.type, provider.name, provider.parent)
    assert document["nameTable"] == {PROVIDER_NAME: provider_urn(env_spec.name)} == {PROVIDER_NAME: real_urn}
    assert all(e["provider"] == PROVIDER_NAME for e in document["resources"])


def test_backend_adoption_ids_are_the_documented_import_ids():
    env_spec = spec("dev")
    document = backend_import_document(env_spec.name, report_for(env_spec, tls_only=True))
    live = {"aws:kms/key:Key": ({}, "1234abcd-12ab-34cd-56ef-1234567890ab"),
            "aws:kms/alias:Alias": ({"name": env_spec.backend.kms_alias}, None)}
    for entry in document["resources"]:
        props, state_id = live.get(entry["type"], ({"bucket": env_spec.backend.bucket}, None))
        assert import_id(entry["type"], props, state_id).value == entry["id"], entry


def test_backend_adoption_on_the_emulator_follows_the_real_bootstrap_report(aws, local_spec):
    report = ensure_backend(local_spec, aws)
    assert set(report.settings) == set(report_for(local_spec, tls_only=False).settings)
    document = backend_import_document(local_spec.name, report)
    program = run("backend", local_spec, endpoint_url=aws.endpoint_url)
    imported = {(e["type"], e["name"]) for e in document["resources"]}
    # Plain HTTP: neither the bootstrap nor the program puts the TLS-only policy, so it is not imported.
    assert imported == set(declared_by_provider(program))
    assert report.kms_key_arn.endswith("key/" + next(e["id"] for e in document["resources"] if e["name"] == "state-key"))


def test_backend_adoption_creates_the_programs_provider_first_unless_the_document_gives_its_inputs():
    document = backend_import_document("dev", report_for(spec("dev"), tls_only=True))
    assert missing_providers(document, set()) == [provider_urn("dev")]
    assert missing_providers(document, {provider_urn("dev")}) == []
    assert missing_providers({**document, "providerInputs": {PROVIDER_NAME: {"region": "eu-west-1"}}}, set()) == []


# -- the first up, end to end with the in-memory engine declaring what the real program declares ----------


@pytest.fixture
def adopting_world(local_spec, aws):
    from bootstrap.aws.objectstore import ObjectStore
    from tests.fakes.engine import FakeResource, InMemoryEngine, TickingClock, declare_standard

    clock = TickingClock(0.25)
    engine = InMemoryEngine("local", store=ObjectStore(aws.client("s3"), local_spec.backend.bucket), clock=clock)
    declare_standard(engine)
    program = run("backend", local_spec, endpoint_url=aws.endpoint_url)
    resources = [FakeResource(t, n, {"name": n}) for (t, n) in declared_by_provider(program)]
    engine.declare("backend", resources, *[engine.declared_outputs["backend"][i] for i in (0, 1)])
    return engine, clock


def test_backend_adoption_first_up_imports_then_plans_no_creates(adopting_world, local_spec):
    from bootstrap.records.ledger import read_ledger
    from tests.test_orchestrator import up

    engine, clock = adopting_world
    from tests.fakes.engine import target_with

    outcome, stored, _ = up(lambda: target_with(engine, local_spec), clock, yes=True, layers=["backend"])
    assert outcome.error is None, outcome.error
    assert [c for c in engine.calls if c[1] == "backend" and c[0] in ("create_stack", "import", "preview", "up")] == [
        ("create_stack", "backend"), ("import", "backend"), ("preview", "backend"), ("up", "backend")]
    (plan,) = outcome.plans
    assert plan.counts.get("create", 0) == 0 and not plan.has_changes  # no second key, alias or bucket
    backend = next(lay for lay in stored["layers"] if lay["layer"] == "backend")
    # The adoption is approved (here by --yes) at the setup gate, which names what it imports, before it is done.
    assert [p["name"] for p in backend["phases"]][:5] == ["stack", "setup-gate", "create", "adopt", "ledger"]
    gate_detail = next(p["detail"] for p in backend["phases"] if p["name"] == "setup-gate")
    assert "adopt" in gate_detail and "by import" in gate_detail and local_spec.backend.bucket in gate_detail
    with target_with(engine, local_spec) as target:
        records = read_ledger(target.store, "backend", "local").records
    assert [r.operation for r in records] == ["import", "up"] and records[0].lineage == records[1].lineage

    engine.calls.clear()
    again, _, _ = up(lambda: target_with(engine, local_spec), clock, yes=True, layers=["backend"])
    assert again.error is None and ("import", "backend") not in engine.calls  # adopted once, owned since


# -- the product engine: providers first, then the whole document through a private file ---------------


def test_backend_adoption_runs_the_provider_up_then_imports_the_whole_document(monkeypatch):
    import bootstrap.engine.preflight as preflight
    from bootstrap.engine.automation import PulumiEngine

    calls = []

    class Stack:
        name = "dev"

        def export_stack(self):
            return type("D", (), {"version": 3, "deployment": {"resources": []}})()

        def up(self, **kwargs):
            calls.append(("up", kwargs["target"]))

        def _run_pulumi_cmd_sync(self, args):
            path = args[args.index("--file") + 1]
            with open(path) as fh:
                calls.append(("import", json.load(fh), args))

        def info(self):
            return None

        def outputs(self):
            return {}

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    engine = PulumiEngine(spec("dev"))
    engine._stacks["backend"] = Stack()
    document = backend_import_document("dev", report_for(spec("dev"), tls_only=True))
    document["providerInputs"] = {"other": {"region": "eu-central-1"}}  # kept: the SDK's own import drops it
    engine.import_resources("backend", document)
    assert calls[0] == ("up", [provider_urn("dev")])
    assert calls[1][0] == "import" and calls[1][1] == document and "--skip-preview" in calls[1][2]
