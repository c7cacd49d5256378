"""Recovery scenarios built in the emulator: real S3 versions written by the in-memory engine, a real
ledger, the real lock, inventory against the emulator's APIs, and the guided flow end to end."""

from __future__ import annotations

import hashlib
import json

import pytest

from bootstrap.records import layout
from bootstrap.records.locks import EnvironmentLock
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import ledger as led
from recovery.choice.choose import Flags
from recovery.guide.flow import run_guide
from recovery.guide.model import GuideOptions, GuideServices
from recovery.survivors.inventory import collect
from stacks.common import naming
from tests.fakes.engine import LINEAGE_CONFIG, BucketEngine, FakeResource
from tests.fakes.engine import quick_append as append

ENV, LAYER = "dev", "network"
KEY = layout.stack_key(LAYER, ENV)
LINEAGE = "11111111-1111-4111-8111-111111111111"


def resources(n: int) -> list[FakeResource]:
    return [FakeResource("aws:ec2/vpc:Vpc", "vpc", {"cidrBlock": "10.0.0.0/16"})] + [
        FakeResource("aws:ec2/subnet:Subnet", f"subnet-{i}", {"cidrBlock": f"10.0.{i}.0/24"}) for i in range(n)]


def history(store, ups: int = 3, lineage: str = LINEAGE, ledger_lineage: str | None = None,
            outputs: dict | None = None, secret: set | None = None) -> BucketEngine:
    """`ups` successful updates, each with its ledger record, as the orchestrator leaves them."""
    engine = BucketEngine(ENV, store=store)
    engine.set_config(LAYER, LINEAGE_CONFIG, lineage)
    for i in range(ups):
        engine.declare(LAYER, resources(i + 1), outputs or {}, secret or set())
        engine.up(LAYER)
        append(store, LAYER, ENV, operation="up", run_id=f"run-{i}", lineage=ledger_lineage or lineage)
    return engine


def services(store, aws, engine, confirm=lambda q: True, **kw) -> GuideServices:
    return GuideServices(
        store=store, engine=lambda: engine, inventory=lambda env, layer: collect(aws, env, layer),
        lock_factory=lambda s, env, run_id: EnvironmentLock(s, env, run_id, settle_seconds=0),
        confirm=confirm, append_record=append, **kw)


def guide(store, aws, engine, *, flags=Flags(), dry_run=False, yes=True, **kw):
    opts = GuideOptions(ENV, LAYER, yes=yes, dry_run=dry_run, flags=flags)
    return run_guide(opts, services(store, aws, engine, **kw))


def phase(transcript, name):
    return next(c for c in transcript.conditions if c.phase == name)


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def all_versions(store) -> list[tuple]:
    """Every version and delete marker in the bucket, as comparable tuples."""
    return sorted((v.key, v.version_id, v.delete_marker) for v in store.versions(""))


@pytest.fixture
def store(aws, bucket):
    return ObjectStore(aws.client("s3"), bucket)


@pytest.fixture(autouse=True)
def fresh_environment(monkeypatch):
    """The emulator is shared by the session: a unique environment name keeps one test's live,
    tagged resources out of another's inventory."""
    import uuid

    env = f"e{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(__import__(__name__, fromlist=["ENV"]), "ENV", env)
    monkeypatch.setattr(__import__(__name__, fromlist=["KEY"]), "KEY", layout.stack_key(LAYER, env))
    return env


# -- scenarios ---------------------------------------------------------------------------------------


def test_deleted_state_object_is_restored_and_verified(store, aws):
    engine = history(store)
    head = led.read_ledger(store, LAYER, ENV).head
    before = {(v.key, v.version_id) for v in store.versions("") if not v.delete_marker}
    store.delete(KEY)
    t = guide(store, aws, engine)
    assert phase(t, "assess").reason == "StateDeleted"
    assert phase(t, "choose").details["chosen"]["serial"] == head.serial
    r = phase(t, "restore")
    assert r.status == "achieved" and r.details["delete_marker_displaced"]
    assert sha(store.get(KEY).body) == head.sha256
    new_head = led.read_ledger(store, LAYER, ENV).head
    assert new_head.operation == "restore" and new_head.serial == head.serial + 1
    assert phase(t, "verify").reason == "NoChanges" and t.outcome == "complete" and t.exit_code == 0
    after = {(v.key, v.version_id) for v in store.versions("") if not v.delete_marker}
    assert before <= after  # no version lost


def test_corrupt_current_falls_back_to_the_previous_integral_version(store, aws):
    engine = history(store)
    head = led.read_ledger(store, LAYER, ENV).head
    good = store.get(KEY).body
    store.put(KEY, good[: len(good) // 2])  # truncated write
    t = guide(store, aws, engine)
    assert phase(t, "assess").reason == "StateUnreadable"
    chosen = phase(t, "choose").details["chosen"]
    assert chosen["serial"] == head.serial and chosen["source"] == "version"
    q = phase(t, "restore").details["quarantined"]
    assert len(q) == 1 and store.get(q[0]).body == good[: len(good) // 2]
    assert store.get(KEY).body == good and t.outcome == "complete"


def test_mid_update_crash_pending_create_that_exists_is_imported(store, aws):
    engine = history(store, ups=2)
    ec2 = aws.client("ec2")
    tags = lambda name: [{"Key": naming.TAG_ENV, "Value": ENV}, {"Key": naming.TAG_LAYER, "Value": LAYER},  # noqa: E731
                         {"Key": naming.TAG_NAME, "Value": name}]
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": tags("vpc")}])
    vpc_id = vpc["Vpc"]["VpcId"]
    sub = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.0.9.0/24",
                            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags("subnet-new")}])
    subnet_id = sub["Subnet"]["SubnetId"]
    # The update crashed after Pulumi created the subnet and before it recorded the result.
    engine.declare(LAYER, resources(2) + [FakeResource("aws:ec2/subnet:Subnet", "subnet-new", {"cidrBlock": "10.0.9.0/24"})])
    engine.pending[LAYER] = [{"type": "creating", "resource": {
        "urn": f"urn:pulumi:{ENV}::{LAYER}::aws:ec2/subnet:Subnet::subnet-new", "type": "aws:ec2/subnet:Subnet",
        "custom": True, "inputs": {"vpcId": vpc_id, "cidrBlock": "10.0.9.0/24"}}}]
    engine._write_checkpoint(LAYER)
    engine.pending[LAYER] = []
    t = guide(store, aws, engine)
    chosen = phase(t, "choose").details["chosen"]
    assert chosen["source"] == "current" and chosen["pending"] == ["creating"] and chosen["serial"] is None
    rec = phase(t, "reconcile").details
    entries = rec["import_plan"]["resources"]
    assert {"type": "aws:ec2/subnet:Subnet", "name": "subnet-new", "id": subnet_id} in [
        {k: e[k] for k in ("type", "name", "id")} for e in entries]
    assert rec["pending_creates"][0]["live"] is True
    assert phase(t, "import").status == "achieved" and phase(t, "verify").reason == "NoChanges"
    pending = phase(t, "pending")
    assert pending.status == "achieved" and pending.details["imported"] == [
        f"urn:pulumi:{ENV}::{LAYER}::aws:ec2/subnet:Subnet::subnet-new"] and pending.details["cleared"] == []
    assert t.outcome == "complete"
    assert [r.operation for r in led.read_ledger(store, LAYER, ENV).records][-3:] == [
        "restore", "import", "clear-pending-creates"]
    current = json.loads(store.get(KEY).body)["checkpoint"]["latest"]
    assert current["pending_operations"] == []
    assert subnet_id in [r.get("id") for r in current["resources"]]  # adopted first, then its pending create went


def test_forked_history_is_refused_with_the_fork_shown(store, aws):
    engine = history(store, ups=3)
    recs = led.read_ledger(store, LAYER, ENV).records
    # A second writer started from serial 2's state and recorded its own update on top.
    other = BucketEngine(ENV, store=store)
    other.set_config(LAYER, LINEAGE_CONFIG, LINEAGE)
    other.declare(LAYER, resources(2) + [FakeResource("aws:ec2/vpc:Vpc", "vpc-b", {})])
    other.up(LAYER)
    append(store, LAYER, ENV, operation="up", run_id="writer-b", parent_sha256=recs[1].sha256)
    before = all_versions(store)
    t = guide(store, aws, engine)
    c = phase(t, "choose")
    assert c.status == "refused" and c.reason == "ForkRefused"
    assert "forked at serial 4" in c.message and "derived from serial 2" in c.message
    assert phase(t, "lineage").reason == "Forked"
    assert phase(t, "restore").attempted is False and t.exit_code == 3
    assert all_versions(store) == before


def test_foreign_lineage_is_refused_then_allowed_by_its_flag(store, aws):
    engine = history(store, ups=2, lineage="22222222-2222-4222-8222-222222222222", ledger_lineage=LINEAGE)
    store.delete(KEY)
    t = guide(store, aws, engine)
    c = phase(t, "choose")
    assert c.reason == "ForeignLineageRefused" and "--allow-foreign-lineage" in c.next_step
    assert "22222222-2222-4222-8222-222222222222 over the stack's lineage " + LINEAGE in c.message
    t2 = guide(store, aws, engine, flags=Flags(allow_foreign_lineage=True))
    assert phase(t2, "restore").status == "achieved" and t2.outcome == "complete"


def test_rollback_is_refused_without_its_flag(store, aws):
    engine = history(store, ups=3)
    head = led.read_ledger(store, LAYER, ENV).head
    s3 = aws.client("s3")
    # Every copy of the head's state is gone (versions removed by someone holding DeleteObjectVersion).
    for v in list(store.versions(".pulumi/")):
        obj = None if v.delete_marker else store.get(v.key, v.version_id)
        if obj is not None and sha(obj.body) == head.sha256:
            s3.delete_object(Bucket=store.bucket, Key=v.key, VersionId=v.version_id)
    t = guide(store, aws, engine)
    c = phase(t, "choose")
    assert c.reason == "RollbackRefused" and f"serial 2 over newer serial {head.serial}" in c.message
    assert t.exit_code == 3
    engine.declare(LAYER, resources(2))
    t2 = guide(store, aws, engine, flags=Flags(allow_rollback=True))
    assert phase(t2, "choose").details["recovery_point"]["serials_lost"] == [3]
    point = phase(t2, "choose").details["recovery_point"]
    # No copy of serial 3 is left to compare URNs with: the ledger's counts say what is lost.
    assert not point["newest_readable"] and (point["head_resources"], point["chosen_resources"]) == (5, 4)
    assert phase(t2, "restore").status == "achieved" and t2.outcome == "complete"
    assert led.read_ledger(store, LAYER, ENV).head.operation == "restore"


def test_missing_ledger_takes_the_weaker_evidence_path(store, aws):
    engine = history(store, ups=3)
    good = store.get(KEY).body
    for key, _s, _m in list(store.keys(layout.ledger_prefix(LAYER, ENV))):
        store.delete(key)
    store.put(KEY, b'{"version": 3, "checkpoint": ')
    t = guide(store, aws, engine)
    lin = phase(t, "lineage")
    assert lin.reason == "LedgerMissing" and "Weaker evidence" in lin.message
    assert any("no ledger" in n for n in phase(t, "choose").details["notes"])
    assert store.get(KEY).body == good and t.outcome == "complete"
