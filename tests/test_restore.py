"""The restore shell on the emulator: quarantine, server-side copy, ledger record, under the lock;
never a version deleted; every step safe to repeat."""

from __future__ import annotations

import functools
import hashlib

import pytest

from bootstrap.records import layout
from bootstrap.kit.errors import LockHeld
from bootstrap.records.locks import EnvironmentLock
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import ledger as led
from recovery.restoring.restore import RestorePlan, restore, suffix_for

PROJECT, STACK = "network", "dev"
KEY = layout.stack_key(PROJECT, STACK)
append = functools.partial(led.append_record, settle_seconds=0)
lock = lambda s, env, run_id: EnvironmentLock(s, env, run_id, settle_seconds=0)  # noqa: E731


def body(n: int) -> bytes:
    return (b'{"version": 3, "checkpoint": {"stack": "organization/network/dev", "latest": {"resources": ['
            + b",".join(b'{"urn": "urn:pulumi:dev::network::aws:ec2/vpc:Vpc::v%d", "type": "aws:ec2/vpc:Vpc", '
                        b'"custom": true, "id": "vpc-%d"}' % (i, i) for i in range(n)) + b"]}}}")


@pytest.fixture
def store(aws, bucket):
    return ObjectStore(aws.client("s3"), bucket)


def seed(store, n=3) -> list[str]:
    vids = []
    for i in range(1, n + 1):
        vids.append(store.put(KEY, body(i)))
        append(store, PROJECT, STACK, operation="up", run_id=f"r{i}", lineage="L")
    return vids


def plan_for(store, vid) -> RestorePlan:
    obj = store.get(KEY, vid)
    return RestorePlan(PROJECT, STACK, STACK, KEY, vid, hashlib.sha256(obj.body).hexdigest(), "L")


def every_version(store) -> set:
    """Every stored version, except the lock's own (each run writes and removes one)."""
    return {(v.key, v.version_id) for v in store.versions("") if not v.delete_marker
            and not v.key.startswith(".groundctl/locks/")}


def test_restore_quarantines_copies_and_records(store):
    vids = seed(store)
    store.put(KEY, b"garbage")
    before = every_version(store)
    res = restore(store, plan_for(store, vids[-1]), lock_factory=lock, run_id="rec-1", append_record=append)
    assert store.get(KEY).body == body(3)
    (q,) = res.quarantined
    assert q.startswith(f".groundctl/quarantine/{PROJECT}/{STACK}/") and store.get(q).body == b"garbage"
    head = led.read_ledger(store, PROJECT, STACK).head
    assert (head.operation, head.serial, head.version_id, head.run_id) == ("restore", 4, res.new_version, "rec-1")
    assert before <= every_version(store)
    assert [s.name for s in res.steps] == ["lock", "quarantine", "copy", "record", "release"]
    assert store.get(layout.lock_key(STACK)) is None  # released


def test_second_run_writes_nothing_more(store):
    vids = seed(store)
    store.put(KEY, b"garbage")
    plan = plan_for(store, vids[-1])
    restore(store, plan, lock_factory=lock, run_id="rec-1", append_record=append)
    after_first = every_version(store)
    res = restore(store, plan, lock_factory=lock, run_id="rec-2", append_record=append)
    assert every_version(store) == after_first
    assert [s.done for s in res.steps if s.name in ("quarantine", "copy", "record")] == [False, False, False]
    assert led.read_ledger(store, PROJECT, STACK).head.serial == 4


def test_delete_marker_is_noted_not_quarantined(store):
    vids = seed(store, 2)
    store.delete(KEY)
    res = restore(store, plan_for(store, vids[0]), lock_factory=lock, run_id="rec", append_record=append)
    assert res.delete_marker_displaced and not res.quarantined
    assert store.get(KEY).body == body(1)


def test_restore_refuses_while_another_run_holds_the_lock(store):
    vids = seed(store)
    with lock(store, STACK, "someone-else"):
        with pytest.raises(LockHeld, match="someone-else"):
            restore(store, plan_for(store, vids[0]), lock_factory=lock, run_id="rec", append_record=append)
    assert store.get(KEY).body == body(3)


def test_compressed_candidate_goes_back_under_its_own_suffix():
    assert suffix_for(".pulumi/history/network/dev/dev-1.checkpoint.json.gz") == ".json.gz"
    assert suffix_for(".pulumi/stacks/network/dev.json.bak") == ".json"
    assert suffix_for(".pulumi/stacks/network/dev.json.zst") == ".json.zst"


def test_a_shadowing_object_under_another_suffix_is_hidden_not_deleted(store):
    vids = seed(store)
    gz = layout.stack_key(PROJECT, STACK, ".json.gz")
    store.put(gz, b"\x1f\x8bnot really")
    res = restore(store, plan_for(store, vids[1]), lock_factory=lock, run_id="rec", append_record=append)
    assert store.get(gz) is None  # hidden behind a delete marker …
    assert any(v.key == gz and not v.delete_marker for v in store.versions(gz))  # … its version kept
    assert any(store.get(q).body == b"\x1f\x8bnot really" for q in res.quarantined)


def test_a_version_under_another_secrets_provider_is_refused_before_the_lock_or_any_write(store):
    from dataclasses import replace

    from bootstrap.kit.errors import Refused

    vids = seed(store)
    kms = "awskms://alias/another-key?region=eu-west-1"
    encrypted = body(3).replace(b'"latest": {', b'"latest": {"secrets_providers": {"type": "cloud", "state": '
                                                 b'{"url": "' + kms.encode() + b'"}}, ', 1)
    vid = store.put(KEY, encrypted)
    store.put(KEY, b"garbage")
    before = {(v.key, v.version_id) for v in store.versions("")}  # the lock's versions included
    plan = replace(plan_for(store, vid), secrets_provider="passphrase")
    with pytest.raises(Refused, match="was not restored, and nothing was written") as refused:
        restore(store, plan, lock_factory=lock, run_id="rec", append_record=append)
    assert kms in refused.value.message and "'passphrase'" in refused.value.message
    assert {(v.key, v.version_id) for v in store.versions("")} == before
    # A state that records no provider yet, or the environment's own, is restored.
    restore(store, replace(plan_for(store, vids[-1]), secrets_provider="passphrase"), lock_factory=lock,
            run_id="rec", append_record=append)
    assert store.get(KEY).body == body(3)
    restore(store, replace(plan, secrets_provider=kms), lock_factory=lock, run_id="rec-2", append_record=append)
    assert store.get(KEY).body == encrypted
