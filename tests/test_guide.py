"""The guided flow with the in-memory engine: phases and conditions, interactive/--yes/--dry-run, the
verification plan deciding completeness, and the transcript and report never holding a secret."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tests.test_recovery_scenarios as sc
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import ledger as led
from recovery.guide.flow import PHASES, plan_phases, run_guide
from recovery.guide.model import GuideOptions
from recovery.restoring.report import render_markdown, transcript_json
from tests.fakes.engine import FakeResource

REPO = Path(__file__).resolve().parent.parent
CANARY = "canary-Zx81-secret-value-do-not-print"


@pytest.fixture
def store(aws, bucket):
    return ObjectStore(aws.client("s3"), bucket)


@pytest.fixture(autouse=True)
def env(monkeypatch):
    import uuid

    name = f"g{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sc, "ENV", name)
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, name))
    return name


def test_plan_phases_is_pure_and_dry_run_skips_every_write():
    full = plan_phases(GuideOptions("dev", "network"))
    assert [p for p, _ in full] == list(PHASES) and all(skip is None for _, skip in full)
    dry = dict(plan_phases(GuideOptions("dev", "network", dry_run=True)))
    assert {p for p, s in dry.items() if s} == {"restore", "import", "verify"}


def test_dry_run_writes_nothing(store, aws):
    engine = sc.history(store)
    store.delete(sc.KEY)
    before = sc.all_versions(store)
    t = sc.guide(store, aws, engine, dry_run=True)
    assert sc.all_versions(store) == before
    assert t.outcome == "dry-run" and t.exit_code == 0
    assert sc.phase(t, "choose").status == "achieved"
    assert sc.phase(t, "restore").attempted is False and sc.phase(t, "restore").reason == "DryRun"
    assert sc.phase(t, "reconcile").status == "achieved"  # read-only, against the chosen state
    assert ("import", "network") not in engine.calls and ("preview", "network") not in engine.calls


def test_interactive_decline_writes_nothing(store, aws):
    engine = sc.history(store)
    store.delete(sc.KEY)
    before = sc.all_versions(store)
    asked = []
    t = sc.guide(store, aws, engine, yes=False, confirm=lambda q: asked.append(q) or False)
    assert asked and "Restore" in asked[0]
    assert t.outcome == "declined" and t.exit_code == 3
    assert sc.all_versions(store) == before


def test_complete_only_when_the_verification_plan_shows_no_changes(store, aws):
    engine = sc.history(store)
    store.delete(sc.KEY)
    # The program now declares a resource that is neither in state nor live: the refresh preview
    # shows a create, so the restore is achieved but the recovery is not complete.
    engine.declare(sc.LAYER, sc.resources(3) + [FakeResource("aws:ec2/subnet:Subnet", "extra", {})])
    t = sc.guide(store, aws, engine)
    assert sc.phase(t, "restore").status == "achieved"
    v = sc.phase(t, "verify")
    assert v.status == "failed" and v.attempted and v.reason == "ChangesRemain"
    assert t.outcome == "incomplete" and t.exit_code == 1
    assert ("preview", sc.LAYER) in engine.calls


def test_a_verification_preview_that_fails_is_a_failure_with_the_engines_error_not_drift(store, aws):
    from bootstrap.kit.errors import EngineError

    engine = sc.history(store)
    store.delete(sc.KEY)
    engine.fail[("preview", sc.LAYER)] = EngineError(
        "Pulumi preview of layer 'network' in environment 'dev' failed: reading vpc: AccessDenied.")
    t = sc.guide(store, aws, engine)
    assert sc.phase(t, "restore").status == "achieved"
    v = sc.phase(t, "verify")
    assert (v.status, v.reason, v.exit_code) == ("failed", "VerificationFailed", 4)
    assert "AccessDenied" in v.message and "not verified" in v.message and "plan" not in v.details
    assert f"groundctl recover {sc.ENV} {sc.LAYER}" in v.next_step
    assert t.outcome == "incomplete" and t.exit_code == 4


def test_a_clean_verification_of_the_flux_layer_needs_flux_ready_too(store, aws):
    """The CLI hands the guide Flux's readiness check for the flux layer (`bootstrap.flux.check`); the check's
    outcome decides the verification once the plan is clean, as it decides the end of `up`."""
    from bootstrap.kit.errors import CloudError
    from bootstrap.flux.wait import WaitResult

    engine = sc.history(store)
    store.delete(sc.KEY)
    never = WaitResult("timeout", "Timeout", "not Ready after 600 s: the root Kustomization flux-system/flux-system "
                       "is Ready=False (BuildFailed: kustomize build failed)", 600.0, 12, last_reason="BuildFailed")
    t = sc.guide(store, aws, engine, flux_ready=lambda: never)
    v = sc.phase(t, "verify")
    assert (v.status, v.reason, v.exit_code) == ("failed", "BuildFailed", 4)
    assert v.message.startswith("The refresh preview shows no changes, but Flux is not ready (BuildFailed): not Ready")
    assert f"groundctl up {sc.ENV} --layers flux" in v.next_step and v.details["flux"]["last_reason"] == "BuildFailed"
    assert t.outcome == "incomplete" and t.exit_code == 4

    ready = WaitResult("ready", "Ready", "4 controller(s) available; the root Kustomization flux-system/flux-system "
                       "Ready at v1.2.3@sha1:aa", 3.0, 1, last_reason="Ready")
    t = sc.guide(store, aws, engine, flux_ready=lambda: ready)
    v = sc.phase(t, "verify")
    assert (v.status, v.reason) == ("achieved", "NoChanges") and "and Flux is Ready (4 controller(s)" in v.message
    assert t.outcome == "complete" and t.exit_code == 0

    def unreachable():
        raise CloudError("The cluster layer exports no kubeconfig, so Flux's readiness cannot be checked.")
    v = sc.phase(sc.guide(store, aws, engine, flux_ready=unreachable), "verify")
    assert (v.status, v.reason, v.exit_code) == ("failed", "FluxNotChecked", 4) and "no kubeconfig" in v.message


def _bucket_bytes(store) -> dict:
    """Every version (and delete marker) in the bucket with its bytes: the state, its history and the ledger."""
    return {(v.key, v.version_id): None if v.delete_marker else store.get(v.key, v.version_id).body
            for v in store.versions("")}


def test_a_chosen_version_under_another_secrets_provider_is_refused_before_anything_is_written(store, aws):
    """Before, it was restored and made current, and only the verification afterwards (the engine's own check,
    bootstrap/engine/layer_stacks.py) refused it: exit 3 while the state had changed."""
    engine = sc.history(store)
    kms = "awskms://alias/another-key?region=eu-west-1"
    engine.secrets_providers = {"type": "cloud", "state": {"url": kms, "encryptedkey": "AQID"}}
    engine.up(sc.LAYER)  # the newest state is encrypted with another key than the environment's passphrase
    led.append_record(store, sc.LAYER, sc.ENV, operation="up", run_id="run-kms", lineage=sc.LINEAGE,
                      settle_seconds=0)
    store.delete(sc.KEY)
    before = _bucket_bytes(store)
    t = sc.guide(store, aws, engine, secrets_provider=lambda: "passphrase")
    restore = sc.phase(t, "restore")
    assert (restore.status, t.outcome, t.exit_code) == ("refused", "refused", 3), restore.message
    assert "was not restored, and nothing was written" in restore.message and kms in restore.message
    assert "'passphrase'" in restore.message and "change-secrets-provider" in restore.message
    assert _bucket_bytes(store) == before  # the stack's versions, its history and the ledger, byte for byte
    assert [c.status for c in t.conditions[t.conditions.index(restore) + 1:]] == ["not-attempted"] * 4
    # Where that key is the environment's, the same version is restored.
    again = sc.guide(store, aws, engine, secrets_provider=lambda: kms)
    assert sc.phase(again, "restore").status == "achieved", sc.phase(again, "restore").message


def test_resources_in_state_but_not_live_are_said_to_stay_in_the_state(store, aws):
    """The verification is `preview --refresh`, and a DIY preview saves no snapshot (pkg/backend/diy/backend.go,
    Preview): it drops nothing from the state, so the reconcile must not say it does."""
    engine = sc.history(store)
    t = sc.guide(store, aws, engine, dry_run=True)  # nothing the fake program declares is live in the emulator
    rec = sc.phase(t, "reconcile")
    assert rec.details["in_state_not_live"]
    assert "drops them" not in rec.next_step
    assert "stay in the state" in rec.next_step and "writes no state" in rec.next_step
    assert f"groundctl up {sc.ENV} --layers {sc.LAYER}" in rec.next_step


def test_a_pending_delete_beside_a_pending_create_is_never_dropped(store, aws):
    """Every Pulumi update keeps only the base snapshot's pending creates (pkg/backend/snapshot.go): clearing
    the creates, or importing, would silently drop the pending delete. The recovery refuses first, dry run
    or not, and the engine is never asked to clear."""
    engine = sc.history(store, ups=2)
    subnet = f"urn:pulumi:{sc.ENV}::{sc.LAYER}::aws:ec2/subnet:Subnet"
    engine.pending[sc.LAYER] = [
        {"type": "creating", "resource": {"urn": f"{subnet}::subnet-new", "type": "aws:ec2/subnet:Subnet",
                                          "custom": True}},
        {"type": "deleting", "resource": {"urn": f"{subnet}::subnet-0", "type": "aws:ec2/subnet:Subnet",
                                          "custom": True, "id": "subnet-0"}}]
    engine._write_checkpoint(sc.LAYER)
    before = store.get(sc.KEY).body
    for dry_run in (True, False):
        t = run_guide(GuideOptions(sc.ENV, sc.LAYER, yes=True, dry_run=dry_run, clear_unchecked_creates=True),
                      sc.services(store, aws, engine))
        stop = next(c for c in t.conditions if c.status == "refused")
        assert stop.phase in ("import", "pending") and stop.reason == "OtherPendingOperations"
        assert f"deleting {subnet}::subnet-0" in stop.message and "nothing was changed" in stop.message
        assert "pulumi refresh" in stop.next_step and t.exit_code == 3
    assert store.get(sc.KEY).body == before
    assert ("clear_pending_creates", sc.LAYER) not in engine.calls and ("import", sc.LAYER) not in engine.calls


def test_healthy_stack_has_nothing_to_restore(store, aws):
    engine = sc.history(store)
    before = sc.all_versions(store)
    t = sc.guide(store, aws, engine)
    assert sc.phase(t, "choose").reason == "CurrentIsNewest"
    assert sc.phase(t, "restore").status == "skipped" and t.outcome == "complete"
    assert {x for x in sc.all_versions(store) if not x[0].startswith(".groundctl/locks/")} == \
        {x for x in before if not x[0].startswith(".groundctl/locks/")}
    assert t.downloads == 1  # the current state, matched to the ledger head by version id


def test_canary_secret_never_reaches_the_transcript_or_the_report(store, aws):
    engine = sc.history(store, outputs={"kubeconfig": CANARY, "deploy_key": CANARY}, secret={"kubeconfig"})
    good = store.get(sc.KEY).body
    assert CANARY.encode() in good  # the state itself holds it, as Pulumi states do
    store.put(sc.KEY, good[:100])
    t = sc.guide(store, aws, engine)
    assert t.outcome == "complete"
    text = json.dumps(t.to_dict(), default=str) + transcript_json(t.to_dict()) + render_markdown(t.to_dict())
    assert CANARY not in text
    # And a value the run knows to be secret is masked even if a message were to carry it.
    leaky = t.to_dict() | {"environment": f"x{CANARY}"}
    assert CANARY not in render_markdown(leaky, [CANARY]) + transcript_json(leaky, [CANARY])


def test_markdown_report_tells_the_story(store, aws):
    engine = sc.history(store)
    store.put(sc.KEY, b"{")
    t = sc.guide(store, aws, engine)
    md = render_markdown(t.to_dict())
    assert md.startswith(f"# State recovery: {sc.LAYER} / {sc.ENV}")
    assert "**Complete**" in md and "| restore | achieved | Restored |" in md
    assert "### Recovery point" in md and "passed over" in md
    head = led.read_ledger(store, sc.LAYER, sc.ENV).head
    assert head.operation == "restore"


# -- the commands ------------------------------------------------------------------------------------


@pytest.fixture
def spec_file(tmp_path, bucket, monkeypatch):
    import yaml

    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["backend"]["bucket"] = bucket
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(spec))
    monkeypatch.setattr(sc, "ENV", "local")
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, "local"))
    return path


def test_recover_command_dry_run_json_and_reports(store, aws, spec_file, emulator_endpoint, tmp_path):
    from tests.test_cli_state_inspect import groundctl

    sc.history(store)
    store.delete(sc.KEY)
    before = sc.all_versions(store)
    out = tmp_path / "reports"
    r = groundctl("recover", str(spec_file), "network", "--dry-run", "--json", "--out", str(out),
                  "--endpoint-url", emulator_endpoint)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["outcome"] == "dry-run" and [p["phase"] for p in data["phases"]] == list(PHASES)
    assert sc.all_versions(store) == before
    (md,) = out.glob("*.md")
    assert "**Dry run**" in md.read_text() and len(list(out.glob("*.json"))) == 1


def test_recover_command_without_the_engine_restores_nothing_and_says_why(store, aws, spec_file, emulator_endpoint):
    from tests.test_cli_state_inspect import groundctl

    sc.history(store)
    store.delete(sc.KEY)
    before = sc.all_versions(store)
    r = groundctl("recover", str(spec_file), "network", "--yes", "--json", "--endpoint-url", emulator_endpoint,
                  env={"PATH": "/usr/bin:/bin", "PULUMI_CONFIG_PASSPHRASE": "guide-test"})
    data = json.loads(r.stdout)
    phases = {p["phase"]: p for p in data["phases"]}
    # The phases after the restore need the engine: checked before the restore, which then writes nothing.
    assert not phases["restore"]["achieved"] and phases["restore"]["status"] == "failed"
    assert "Pulumi CLI is not installed" in phases["restore"]["message"]
    assert not phases["verify"]["attempted"] and data["outcome"] == "incomplete" and r.returncode == 4
    assert sc.all_versions(store) == before and store.get(sc.KEY) is None


def test_recover_refusal_exit_code_and_flag_named(store, aws, spec_file, emulator_endpoint):
    from tests.test_cli_state_inspect import groundctl

    sc.history(store, lineage="33333333-3333-4333-8333-333333333333", ledger_lineage=sc.LINEAGE)
    store.delete(sc.KEY)
    r = groundctl("recover", str(spec_file), "network", "--yes", "--endpoint-url", emulator_endpoint)
    assert r.returncode == 3 and "--allow-foreign-lineage" in r.stderr


def test_state_verify_command(store, aws, spec_file, emulator_endpoint):
    from tests.test_cli_state_inspect import groundctl

    sc.history(store)
    r = groundctl("state", "verify", str(spec_file), "network", "--json", "--endpoint-url", emulator_endpoint)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["ok"] is True
    store.put(sc.KEY, store.get(sc.KEY).body[:50])
    r = groundctl("state", "verify", str(spec_file), "network", "--json", "--endpoint-url", emulator_endpoint)
    codes = [p["code"] for p in json.loads(r.stdout)["problems"]]
    assert r.returncode == 1 and codes == ["state-unreadable", "unrecorded"]
    store.delete(sc.KEY)
    r = groundctl("state", "verify", str(spec_file), "network", "--endpoint-url", emulator_endpoint)
    assert r.returncode == 1 and "state-missing" in r.stdout


def test_state_verify_names_each_pending_operation(store, aws, spec_file, emulator_endpoint):
    from tests.test_cli_state_inspect import groundctl

    engine = sc.history(store, ups=1)
    urn = f"urn:pulumi:{sc.ENV}::{sc.LAYER}::aws:ec2/subnet:Subnet::subnet-new"
    engine.pending[sc.LAYER] = [{"type": "creating", "resource": {"urn": urn, "type": "aws:ec2/subnet:Subnet",
                                                                   "custom": True}}]
    engine._write_checkpoint(sc.LAYER)
    r = groundctl("state", "verify", str(spec_file), "network", "--json", "--endpoint-url", emulator_endpoint)
    problem = next(p for p in json.loads(r.stdout)["problems"] if p["code"] == "pending-operations")
    assert r.returncode == 1 and "(creating subnet-new)" in problem["message"]
    assert [(o["type"], o["urn"]) for o in problem["operations"]] == [("creating", urn)]


# -- pending creates an interrupted update left ------------------------------------------------------

TOPIC = "aws:sns/topic:Topic"  # a type inventory does not look for


def interrupted(store, *extra: FakeResource):
    """Two recorded updates, then one killed while creating `extra`: its checkpoint holds them as pending
    creates (as Pulumi writes it before the provider answers) and the program still declares them."""
    engine = sc.history(store, ups=2)
    engine.declare(sc.LAYER, sc.resources(2) + list(extra))
    engine.pending[sc.LAYER] = [{"type": "creating", "resource": {
        "urn": engine.urn(sc.LAYER, r), "type": r.type, "custom": True, "inputs": r.inputs}} for r in extra]
    engine._write_checkpoint(sc.LAYER)
    return engine


def pending_in_state(store) -> list[str]:
    latest = json.loads(store.get(sc.KEY).body)["checkpoint"]["latest"]
    return [op["resource"]["urn"].rsplit("::", 1)[1] for op in latest.get("pending_operations") or []]


def test_a_pending_create_that_made_nothing_is_cleared_before_the_verification(store, aws):
    engine = interrupted(store, FakeResource("aws:ec2/subnet:Subnet", "subnet-9", {"cidrBlock": "10.0.9.0/24"}))
    t = sc.guide(store, aws, engine)
    p = sc.phase(t, "pending")
    assert p.status == "achieved" and p.reason == "PendingCreatesResolved"
    assert [(d["urn"].rsplit("::", 1)[1], d["action"]) for d in p.details["decisions"]] == [("subnet-9", "clear")]
    ops = [op for op, layer in engine.calls if layer == sc.LAYER]
    assert ops[ops.index("export_state"):] == ["export_state", "clear_pending_creates", "preview"]
    assert pending_in_state(store) == []
    assert led.read_ledger(store, sc.LAYER, sc.ENV).head.operation == "clear-pending-creates"
    # The program still declares subnet-9, which was never made: the next `up` makes it.
    v = sc.phase(t, "verify")
    assert v.status == "achieved" and v.reason == "OnlyUnfinishedCreates" and "subnet-9" in v.message
    assert t.outcome == "complete" and t.exit_code == 0
    md = render_markdown(t.to_dict())
    assert "## Pending creates" in md and "- cleared `" in md and "subnet-9" in md


def test_an_uncovered_pending_create_is_refused_then_cleared_on_the_operators_word(store, aws):
    engine = interrupted(store, FakeResource(TOPIC, "alerts", {"name": "alerts"}))
    t = sc.guide(store, aws, engine)
    p = sc.phase(t, "pending")
    assert p.status == "refused" and p.reason == "PendingCreateUnchecked"
    assert f"urn:pulumi:{sc.ENV}::{sc.LAYER}::{TOPIC}::alerts" in p.message and "check by hand" in p.message
    assert "--allow-clear-unchecked-creates" in p.next_step
    assert sc.phase(t, "verify").attempted is False and t.outcome == "refused" and t.exit_code == 3
    assert ("clear_pending_creates", sc.LAYER) not in engine.calls and pending_in_state(store) == ["alerts"]
    assert "**Refused** after restore" in render_markdown(t.to_dict())

    again = run_guide(GuideOptions(sc.ENV, sc.LAYER, yes=True, clear_unchecked_creates=True),
                      sc.services(store, aws, engine))
    p = sc.phase(again, "pending")
    assert p.status == "achieved" and p.details["decisions"][0]["flag"] == "--allow-clear-unchecked-creates"
    assert sc.phase(again, "restore").status == "skipped"  # the first run's restore is the current state
    assert again.outcome == "complete" and pending_in_state(store) == []
    assert again.to_dict()["options"]["allow_clear_unchecked_creates"] is True


def test_dry_run_says_what_it_would_do_with_pending_creates_and_touches_nothing(store, aws):
    engine = interrupted(store, FakeResource("aws:ec2/subnet:Subnet", "subnet-9", {}))
    before = sc.all_versions(store)
    t = sc.guide(store, aws, engine, dry_run=True)
    p = sc.phase(t, "pending")
    assert p.status == "skipped" and p.reason == "DryRun" and "Would drop 1 pending creates" in p.message
    assert p.details["cleared"] == [f"urn:pulumi:{sc.ENV}::{sc.LAYER}::aws:ec2/subnet:Subnet::subnet-9"]
    assert t.outcome == "dry-run" and sc.all_versions(store) == before
    assert not [c for c in engine.calls if c[0] in ("export_state", "clear_pending_creates", "import", "preview")]

    uncovered = interrupted(store, FakeResource(TOPIC, "alerts", {}))
    t = sc.guide(store, aws, uncovered, dry_run=True)
    assert sc.phase(t, "pending").status == "refused" and t.exit_code == 3  # as the real run would


def test_declining_the_clear_keeps_the_pending_creates(store, aws):
    engine = interrupted(store, FakeResource("aws:ec2/subnet:Subnet", "subnet-9", {}))
    asked = []
    t = sc.guide(store, aws, engine, yes=False, confirm=lambda q: asked.append(q) or not q.startswith("Drop"))
    assert any(q.startswith("Drop 1 pending creates") and "clear: subnet-9" in q for q in asked)
    assert t.outcome == "declined" and t.exit_code == 3 and pending_in_state(store) == ["subnet-9"]


def test_a_live_pending_create_imported_under_another_urn_is_never_dropped(store, aws):
    """The survivor is adopted as a child of the stack, but the pending create names a component parent:
    its URN is not tracked, so clearing it could lose the live subnet. Not even the flag lifts that."""
    from stacks.common import naming

    engine = sc.history(store, ups=2)
    ec2 = aws.client("ec2")
    tags = [{"Key": naming.TAG_ENV, "Value": sc.ENV}, {"Key": naming.TAG_LAYER, "Value": sc.LAYER},
            {"Key": naming.TAG_NAME, "Value": "subnet-new"}]
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    sub = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.9.0/24",
                            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}])["Subnet"]["SubnetId"]
    urn = f"urn:pulumi:{sc.ENV}::{sc.LAYER}::my:net:Zone$aws:ec2/subnet:Subnet::subnet-new"
    engine.pending[sc.LAYER] = [{"type": "creating", "resource": {"urn": urn, "type": "aws:ec2/subnet:Subnet",
                                                                   "custom": True}}]
    engine._write_checkpoint(sc.LAYER)
    t = run_guide(GuideOptions(sc.ENV, sc.LAYER, yes=True, clear_unchecked_creates=True),
                  sc.services(store, aws, engine))
    assert sc.phase(t, "import").status == "achieved"
    p = sc.phase(t, "pending")
    assert p.status == "refused" and p.reason == "PendingCreateNotAdopted" and sub in p.message
    assert "import the live ones by hand" in p.next_step
    assert pending_in_state(store) == ["subnet-new"] and ("clear_pending_creates", sc.LAYER) not in engine.calls


def test_the_engine_refuses_to_clear_a_pending_create_nobody_decided_on(store):
    from bootstrap.kit.errors import Refused

    engine = interrupted(store, FakeResource("aws:ec2/subnet:Subnet", "a", {}), FakeResource(TOPIC, "b", {}))
    with pytest.raises(Refused):
        engine.clear_pending_creates(sc.LAYER, [engine.urn(sc.LAYER, FakeResource("aws:ec2/subnet:Subnet", "a"))])
    assert pending_in_state(store) == ["a", "b"]
