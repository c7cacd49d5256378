"""Emulator tier: a run that fails mid-way resumes; the ledger continues without duplicates; the lock.

The in-memory engine writes its checkpoints into the emulator's state bucket like Pulumi's DIY
backend, so the ledger records real sha256 values and S3 version ids of stored state objects.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from bootstrap.kit.errors import EngineError, LockHeld
from bootstrap.records.layout import run_key, stack_key
from bootstrap.records.lock_status import lock_status
from bootstrap.records.locks import EnvironmentLock
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.apply.layer_up import UpOptions
from bootstrap.apply.runner import run
from bootstrap.apply.services import default_services
from bootstrap.apply.steps import build_up
from bootstrap.records.ledger import read_ledger, verify_chain
from tests.fakes.engine import quick_append
from tests.fakes.engine import FakeResource, InMemoryEngine, TickingClock, declare_standard, target_with


@pytest.fixture
def env(local_spec, aws):
    clock = TickingClock(1.0)
    store = ObjectStore(aws.client("s3"), local_spec.backend.bucket)
    engine = InMemoryEngine("local", store=store, clock=clock)
    declare_standard(engine)

    def up():
        svc = default_services(clock=clock, git_commit=lambda: None, confirm=lambda q: False,
                               append_record=quick_append,
                               environment_lock=lambda s, e, r: EnvironmentLock(s, e, r, settle_seconds=0))
        with target_with(engine, local_spec) as target:
            return run(target, build_up(target.spec, None, emulated=True), svc, UpOptions(yes=True))

    return engine, store, up


def _serials(store, layer):
    return [r.serial for r in read_ledger(store, layer, "local").records]


def test_failed_run_resumes_and_ledger_serials_continue(env):
    engine, store, up = env
    engine.fail[("up", "cluster")] = EngineError("Pulumi up of layer 'cluster' failed: the API timed out.")
    first = up()
    assert first.exit_code == 4 and "timed out" in first.error.message
    record = json.loads(store.get(run_key("local", first.record.run_id)).body)
    achieved = {lay["layer"]: lay["achieved"] for lay in record["layers"]}
    assert achieved == {"backend": "applied", "network": "applied", "cluster": "failed", "flux": "not-reached"}
    assert record["stopped_at"] == "cluster/up" and record["outcome"] == "failed"
    assert (_serials(store, "backend"), _serials(store, "network"), _serials(store, "cluster")) == ([1, 2], [1], [])
    assert lock_status(store, "local").holder is None  # released despite the failure

    engine.calls.clear()
    second = up()
    assert second.error is None
    # Layers already up to date preview to no changes and are not applied again.
    assert [c for c in engine.calls if c[0] in ("preview", "up")] == [
        ("preview", "backend"), ("preview", "network"), ("preview", "cluster"), ("up", "cluster")]
    record = json.loads(store.get(run_key("local", second.record.run_id)).body)
    achieved = {lay["layer"]: lay["achieved"] for lay in record["layers"]}
    assert achieved == {"backend": "unchanged", "network": "unchanged", "cluster": "applied", "flux": "skipped"}
    assert (_serials(store, "backend"), _serials(store, "network"), _serials(store, "cluster")) == ([1, 2], [1], [1])

    engine.desired["network"].append(FakeResource("aws:ec2/subnet:Subnet", "private-b", {"name": "private-b"}))
    assert up().error is None
    records = read_ledger(store, "network", "local").records
    assert [r.serial for r in records] == [1, 2]
    assert verify_chain(records).ok and records[1].previous_sha256 == records[0].sha256
    assert records[0].lineage == records[1].lineage == engine.outputs("network").values["groundctl_lineage"]
    current = store.get(stack_key("network", "local"))
    assert records[1].sha256 == hashlib.sha256(current.body).hexdigest()
    assert records[1].version_id == current.version_id and records[1].resources == 5
    assert len(list(store.keys(".groundctl/runs/local/"))) == 3


def test_second_run_is_refused_while_the_lock_is_held(env):
    engine, store, up = env
    assert up().error is None  # creates the backend so the lock has somewhere to live
    engine.calls.clear()
    with EnvironmentLock(store, "local", "other-run", settle_seconds=0):
        outcome = up()
    assert isinstance(outcome.error, LockHeld) and outcome.exit_code == 3
    assert "other-run" in outcome.error.message and engine.calls == []
    assert outcome.record.stopped_at == "lock"
