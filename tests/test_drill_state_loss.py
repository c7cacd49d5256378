"""The state-loss drill end to end on the emulator, up to the engine boundary.

Real versioned bucket, real ledger, real lock, the real guided recovery with inventory against the
emulator's APIs; only the engine is in memory, reading its state back from the bucket the way Pulumi
reads the stack object (so what the drill deletes and the guide restores is what the engine sees).
"""

from __future__ import annotations

import hashlib
import uuid

import pytest

from bootstrap.records import layout
from bootstrap.kit.errors import EngineError
from bootstrap.records.lock_status import lock_status
from bootstrap.records.locks import EnvironmentLock
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import ledger as led
from recovery.drills.state_loss import StateLossOptions, run_state_loss
from recovery.drills.rebuild_cluster import DrillContext
from recovery.survivors.inventory import collect
from tests.fakes.clock import FakeClock
from tests.fakes.engine import LINEAGE_CONFIG, BucketEngine, FakeResource
from tests.fakes.engine import quick_append as append

LAYER = "network"


@pytest.fixture
def world(local_spec, aws):
    spec = local_spec.model_copy(update={"name": f"s{uuid.uuid4().hex[:8]}"})
    s3 = aws.client("s3")
    s3.create_bucket(Bucket=spec.backend.bucket)
    s3.put_bucket_versioning(Bucket=spec.backend.bucket, VersioningConfiguration={"Status": "Enabled"})
    store = ObjectStore(s3, spec.backend.bucket)
    clock = FakeClock()
    engine = BucketEngine(spec.name, store=store, clock=clock)
    lineage = str(uuid.uuid4())
    engine.set_config(LAYER, LINEAGE_CONFIG, lineage)
    for i in range(3):  # three updates, each recorded, as the orchestrator leaves them
        engine.declare(LAYER, [FakeResource("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.0.0.0/16"})] + [
            FakeResource("aws:ec2/subnet:Subnet", f"subnet-{n}", {"cidrBlock": f"10.0.{n}.0/24"}) for n in range(i + 1)])
        engine.up(LAYER)
        clock.advance(60)
        append(store, LAYER, spec.name, operation="up", run_id=f"run-{i}", lineage=lineage)
    engine.calls.clear()
    engine.on_call = lambda op, layer: clock.advance(30 if op == "preview" else 0)

    def make(spec_=spec):
        def missing_bucket():
            s3.head_bucket(Bucket=spec_.backend.bucket)
        return DrillContext(
            spec=spec_, store=store, engine=lambda: engine, emulated=True, run_layers=None,
            lock_factory=lambda s, env, run_id: EnvironmentLock(s, env, run_id, settle_seconds=0),
            require_bucket=missing_bucket, lock_status=lock_status, clock=clock, sleep=clock.sleep,
            inventory=lambda env, layer: collect(aws, env, layer))
    return type("World", (), {"spec": spec, "store": store, "engine": engine, "clock": clock,
                              "make": staticmethod(make)})


def versions(store):
    return sorted((v.key, v.version_id) for v in store.versions("") if not v.delete_marker)


def test_state_loss_drill_recovers_the_deleted_state_with_nothing_lost(world):
    env = world.spec.name
    head = led.read_ledger(world.store, LAYER, env).head
    before = versions(world.store)
    report = run_state_loss(world.make(), StateLossOptions(LAYER, yes=True))
    assert report.verdict.outcome == "passed", report.verdict.message
    assert [p.status for p in report.phases] == ["achieved"] * 5
    rp = report.recovery_point
    assert rp["serials_lost"] == [] and rp["resources_lost"] == [] and rp["identical_to_baseline"] is True
    assert (rp["serial_before"], rp["serial_after"]) == (head.serial, head.serial + 1)
    current = led.current_state(world.store, LAYER, env)
    assert hashlib.sha256(current.body).hexdigest() == head.sha256
    assert led.read_ledger(world.store, LAYER, env).head.operation == "restore"
    key = layout.stack_key(LAYER, env)
    assert any(v.key == key and v.delete_marker for v in world.store.versions(key))  # deleted the real way
    assert set(before) <= set(versions(world.store))  # no version was lost
    # The time is measured from the recovery's start; the guide's verification preview "took" 30 s.
    assert report.verdict.recovery_seconds == report.phase("recover").seconds + report.phase("verify").seconds
    assert report.phase("recover").seconds == 30 and report.verdict.within_rto
    guide = [g["phase"] for g in report.phase("recover").details["guide_phases"]]
    assert guide == ["assess", "candidates", "lineage", "choose", "restore", "reconcile", "import", "pending", "verify"]
    assert lock_status(world.store, env).holder is None


def test_production_is_refused_whatever_the_flags(world):
    prod = world.spec.model_copy(update={"production": True})
    report = run_state_loss(world.make(prod), StateLossOptions(LAYER, yes=True))
    assert report.phase("preflight").reason == "ProductionRefused" and report.verdict.outcome == "refused"
    assert led.current_state(world.store, LAYER, world.spec.name) is not None


def test_a_drifted_baseline_is_refused_before_anything_is_deleted(world):
    world.engine.desired[LAYER][0].inputs = {"cidrBlock": "10.9.0.0/16"}
    report = run_state_loss(world.make(), StateLossOptions(LAYER, yes=True))
    assert report.phase("baseline").reason == "BaselineDrift" and report.verdict.failed_phase == "baseline"
    assert led.current_state(world.store, LAYER, world.spec.name) is not None
    assert report.left_half_done == () and lock_status(world.store, world.spec.name).holder is None


def test_a_failed_recovery_names_the_phase_and_says_the_state_is_restored_but_unverified(world):
    calls = {"n": 0}

    def fail_verification(op, layer):
        if op == "preview":
            calls["n"] += 1
            if calls["n"] == 2:  # the first preview is the baseline; the second is the guide's verification
                world.engine.fail[("preview", layer)] = EngineError("injected: the verification preview failed")
    world.engine.on_call = fail_verification
    report = run_state_loss(world.make(), StateLossOptions(LAYER, yes=True))
    recover = report.phase("recover")
    assert report.verdict.failed_phase == "recover" and recover.reason == "RecoveryIncomplete"
    assert "verify" in recover.message and "runbooks/recover-state.md" in recover.next_step
    assert report.phase("verify").status == "not-attempted"
    assert any("restored but not verified" in item for item in report.left_half_done)
    assert lock_status(world.store, world.spec.name).holder is None


def test_dry_run_deletes_nothing_and_shows_what_would_happen(world):
    before = sorted((v.key, v.version_id) for v in world.store.versions(""))
    report = run_state_loss(world.make(), StateLossOptions(LAYER, dry_run=True))
    assert report.verdict.outcome == "dry-run" and report.exit_code == 0
    assert [p.status for p in report.phases[:2]] == ["achieved", "achieved"]
    plans = {p["phase"]: p["summary"] for p in report.plans}
    assert plans["delete-state"] == f"would delete {layout.stack_key(LAYER, world.spec.name)}, leaving a delete marker"
    assert "assess → candidates" in plans["recover"]
    assert sorted((v.key, v.version_id) for v in world.store.versions("")) == before
