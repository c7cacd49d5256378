"""Conditional writes that are known to be atomic need no settle pause (issue 29 §2): S3's are, and groundctl's
emulator runs its writes one at a time and says so in every answer. Only a store not known to be (another
emulator) still lets racing writes land before the lock and the ledger read back."""

from __future__ import annotations

import threading

import boto3
import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import ledger, locks
from bootstrap.records.ledger import append_record
from bootstrap.records.locks import EnvironmentLock


class NotKnownAtomic(ObjectStore):
    """The emulator's bucket as a store whose conditional writes are not known to be atomic (another emulator)."""

    @property
    def atomic_conditional_writes(self) -> bool:
        return False


@pytest.fixture
def sleeps(monkeypatch) -> list:
    slept: list = []
    monkeypatch.setattr(locks.time, "sleep", slept.append)
    monkeypatch.setattr(ledger.time, "sleep", slept.append)
    return slept


def test_s3_is_known_atomic_and_an_unknown_endpoint_is_not_until_it_says_so(aws, bucket):
    on_aws = boto3.client("s3", region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="y")
    assert ObjectStore(on_aws, "b").atomic_conditional_writes  # no call is made: the endpoint says it
    store = ObjectStore(aws.client("s3"), bucket)
    assert not store.atomic_conditional_writes
    store.put("plain", b"1")
    assert not store.atomic_conditional_writes  # only a conditional write's answer counts
    assert store.put_if_absent("k", b"1") and store.atomic_conditional_writes


def test_the_emulator_lets_exactly_one_of_many_racing_creates_win(aws, bucket):
    stores = [ObjectStore(aws.client("s3"), bucket) for _ in range(12)]
    barrier = threading.Barrier(len(stores))
    won: list = []

    def create(i: int) -> None:
        barrier.wait()
        if stores[i].put_if_absent("race", f"writer {i}".encode()):
            won.append(i)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(won) == 1 and stores[0].get("race").body == f"writer {won[0]}".encode()


def test_the_lock_and_the_ledger_pause_only_where_writes_are_not_known_atomic(aws, bucket, sleeps):
    store = ObjectStore(aws.client("s3"), bucket)
    state = b'{"version": 3, "checkpoint": {"latest": {"resources": []}}}'
    store.put(".pulumi/stacks/network/dev.json", state)
    with EnvironmentLock(store, "dev", "run-1"):
        append_record(store, "network", "dev", operation="up", run_id="run-1", lineage="lin-1")
    assert sleeps == []
    slow = NotKnownAtomic(aws.client("s3"), bucket)
    with EnvironmentLock(slow, "dev", "run-2"):
        store.put(".pulumi/stacks/network/dev.json", state + b" ")
        append_record(slow, "network", "dev", operation="up", run_id="run-2")
    assert sleeps == [0.2, ledger.SETTLE_SECONDS]
