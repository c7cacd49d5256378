"""The ledger's index (issue 38 §3): a long ledger is read in a few calls, and an index that is tampered
with, stale, missing, raced over or absent (a bucket an earlier version wrote) never changes what is read:
what it cannot vouch for is read record by record, and the reader says so."""

from __future__ import annotations

import dataclasses
import gzip
import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from bootstrap.records import ledger as led
from bootstrap.records import ledger_index as idx
from tests.test_ledger import P, S, checkpoint, write_state
from tests.fakes.engine import LINEAGE_CONFIG, BucketEngine, FakeResource
from tests.fakes.engine import quick_append as append
from tests.test_recovery_scenarios import LAYER, guide, history, phase
import tests.test_recovery_scenarios as scen


class Counting(ObjectStore):
    def __init__(self, client, bucket):
        super().__init__(client, bucket)
        self.record_gets = 0

    def get(self, key, version_id=None):
        if key.startswith(".groundctl/ledger/"):
            self.record_gets += 1
        return super().get(key, version_id)


@pytest.fixture
def store(aws, bucket) -> Counting:
    return Counting(aws.client("s3"), bucket)


def ups(store, n: int) -> None:
    for i in range(n):
        write_state(store, checkpoint(i + 1))
        led.append_record(store, P, S, operation="up", run_id=f"run-{i}")


def truth(store, project=P, stack=S) -> list[led.LedgerRecord]:
    """The records as the record objects themselves hold them, one GET each."""
    prefix = layout.ledger_prefix(project, stack)
    return sorted((led.LedgerRecord.from_dict(json.loads(store.get(k).body)) for k, _s, _m in store.keys(prefix)),
                  key=lambda r: r.serial)


def index_entries(store, project=P, stack=S) -> dict[int, bytes]:
    return idx.decode(store.get(layout.ledger_index_key(project, stack)).body)


def put_index(store, entries, project=P, stack=S) -> None:
    store.put(layout.ledger_index_key(project, stack), idx.encode(entries), content_type="application/gzip")


def test_an_intact_ledger_is_read_from_its_index_without_a_get_per_record(store):
    ups(store, 6)
    store.record_gets = 0
    read = led.read_ledger(store, P, S)
    assert store.record_gets == 0
    assert list(read.records) == truth(store) and not read.problems and read.highest_serial == 6
    assert read.index_note.startswith("all 6 ledger records read from the ledger's index")
    assert read.object_versions == {layout.ledger_key(P, S, n): 1 for n in range(1, 7)}
    assert led.verify_chain(read.records).ok


def test_a_tampered_index_entry_is_read_from_its_record_and_said(store):
    ups(store, 4)
    entries = index_entries(store)
    forged = json.loads(entries[2])
    forged["resources"] = 999
    entries[2] = json.dumps(forged, sort_keys=True, indent=2).encode()
    put_index(store, entries)
    store.record_gets = 0
    read = led.read_ledger(store, P, S)
    assert store.record_gets == 1
    assert list(read.records) == truth(store) and read.records[1].resources == 2
    assert "3 of 4 ledger records read from the ledger's index, 1 read one by one (1 its index entry differs" \
        in read.index_note


def test_a_forged_entry_with_its_own_digest_leaves_two_digests_and_the_record_is_read(store):
    ups(store, 3)
    entries = index_entries(store)
    forged = dataclasses.replace(led.LedgerRecord.from_dict(json.loads(entries[2])), resources=999).to_json()
    entries[2] = forged
    put_index(store, entries)
    store.put(layout.ledger_digest_key(P, S, 2, idx.digest(forged)), b"")
    read = led.read_ledger(store, P, S)
    assert list(read.records) == truth(store)
    assert "1 two digests claim its serial" in read.index_note


def test_a_digest_written_after_its_record_vouches_for_nothing(store):
    # An earlier version wrote record 1 with no digest; a forger adds a digest and an entry for it later.
    write_state(store, checkpoint(1))
    honest = led.LedgerRecord("L", 1, "a" * 64, None, None, "up", "r", "2026-01-01T00:00:00.000Z", None, 1,
                              layout.stack_key(P, S))
    store.put(layout.ledger_key(P, S, 1), honest.to_json())
    stored = next(store.versions(layout.ledger_key(P, S, 1))).last_modified
    while datetime.now(timezone.utc) < stored.replace(microsecond=0) + timedelta(seconds=1):
        time.sleep(0.05)  # the forger comes later than the record, as S3 lists times to the second
    forged = dataclasses.replace(honest, resources=999).to_json()
    store.put(layout.ledger_digest_key(P, S, 1, idx.digest(forged)), b"")
    put_index(store, {1: forged})
    read = led.read_ledger(store, P, S)
    assert list(read.records) == [honest] and "1 its digest was stored after it" in read.index_note


def test_a_stale_index_reads_the_rest_one_by_one_and_the_next_writer_catches_it_up(store):
    ups(store, 3)
    stale = index_entries(store)
    ups_more = 2
    for i in range(ups_more):
        write_state(store, checkpoint(10 + i))
        led.append_record(store, P, S, operation="up", run_id=f"later-{i}")
    put_index(store, stale)  # as if the last two writers had died before updating it
    store.record_gets = 0
    read = led.read_ledger(store, P, S)
    assert store.record_gets == 2 and list(read.records) == truth(store)
    assert "2 not in the index" in read.index_note
    write_state(store, checkpoint(20))
    led.append_record(store, P, S, operation="up", run_id="next")
    assert sorted(index_entries(store)) == [1, 2, 3, 4, 5, 6]
    store.record_gets = 0
    read = led.read_ledger(store, P, S)
    assert store.record_gets == 0 and list(read.records) == truth(store)


@pytest.mark.parametrize("damage", ["missing", "garbage", "bomb", "wrong-shape"])
def test_a_missing_or_unreadable_index_is_no_error(store, damage):
    ups(store, 3)
    key = layout.ledger_index_key(P, S)
    if damage == "missing":
        store.delete(key)
    else:
        body = {"garbage": b"\x1f\x8bnot gzip at all",
                "bomb": gzip.compress(b"[" * (idx.MAX_INDEX_TEXT + 10)),
                "wrong-shape": gzip.compress(json.dumps({"format": 1, "records": [["1", "x"]]}).encode())}[damage]
        store.put(key, body)
    store.record_gets = 0
    read = led.read_ledger(store, P, S)
    assert store.record_gets == 3 and list(read.records) == truth(store) and not read.problems
    assert read.index_note.startswith("the ledger's index is unusable (") and "3 read one by one" in read.index_note


def test_a_bucket_an_earlier_version_wrote_has_no_index_and_reads_as_before(store):
    write_state(store, checkpoint(1))
    rec = led.LedgerRecord("L", 1, "b" * 64, None, None, "up", "r", "2026-01-01T00:00:00.000Z", None, 1,
                           layout.stack_key(P, S))
    store.put(layout.ledger_key(P, S, 1), rec.to_json())
    read = led.read_ledger(store, P, S)
    assert list(read.records) == [rec] and "there is none" in read.index_note and "1 not in the index" in read.index_note
    # The first record this version writes is indexed; the old one stays read from its record (no digest).
    write_state(store, checkpoint(2))
    led.append_record(store, P, S, operation="up", run_id="new")
    store.record_gets = 0
    read = led.read_ledger(store, P, S)
    assert store.record_gets == 1 and "1 no digest claimed before it" in read.index_note
    assert [r.serial for r in read.records] == [1, 2] and list(read.records) == truth(store)


def test_a_rewritten_record_is_read_as_rewritten_not_from_the_index(store):
    ups(store, 3)
    recs = truth(store)
    store.put(layout.ledger_key(P, S, 2), dataclasses.replace(recs[1], run_id="forger").to_json())
    read = led.read_ledger(store, P, S)
    assert read.records[1].run_id == "forger"  # what the record object holds now, as before the index
    assert read.object_versions[layout.ledger_key(P, S, 2)] == 2
    assert "1 the record object was rewritten" in read.index_note


def test_concurrent_writers_never_make_the_index_disagree_with_the_records(store):
    versions = [write_state(store, checkpoint(i + 1, tag=f"-{i}")) for i in range(12)]
    barrier = threading.Barrier(12)
    errors = []

    def appender(i: int) -> None:
        barrier.wait()
        try:
            led.append_record(store, P, S, operation="up", run_id=f"w{i}", state_key=layout.stack_key(P, S),
                              state_version=versions[i])
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads)
    read = led.read_ledger(store, P, S)
    assert list(read.records) == truth(store) and [r.serial for r in read.records] == list(range(1, 13))
    # Every entry the index holds is its serial's record, whichever writer put it there; a serial two writers
    # raced for has two digests and is read from its record.
    entries = index_entries(store)
    for serial, body in entries.items():
        assert body == store.get(layout.ledger_key(P, S, serial)).body
    assert len(entries) >= 6, read.index_note  # conditional writes: writers rarely drop each other's entries


def test_vouched_is_pure_and_strict():
    @dataclasses.dataclass
    class V:
        last_modified: datetime
        delete_marker: bool = False

    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    body = b'{"serial": 1}'
    good = {1: [(idx.digest(body), t)]}
    assert idx.vouched({1: body}, good, {1: [V(t)]}) == ({1: body}, {})
    assert idx.vouched({1: body}, good, {1: [V(t - timedelta(seconds=1))]})[1] == {1: idx.DIGEST_LATER}
    assert idx.vouched({1: body}, good, {1: [V(t), V(t)]})[1] == {1: idx.REWRITTEN}
    assert idx.vouched({1: body}, {}, {1: [V(t)]})[1] == {1: idx.NO_DIGEST}
    assert idx.vouched({}, good, {1: [V(t)]})[1] == {1: idx.NOT_INDEXED}
    assert idx.vouched({1: body + b" "}, good, {1: [V(t)]})[1] == {1: idx.DIGEST_DIFFERS}
    assert idx.vouched({1: body}, {1: good[1] * 2}, {1: [V(t)]})[1] == {1: idx.TWO_DIGESTS}


def test_an_index_entry_hiding_a_fork_does_not_hide_it(store, aws):
    """The guide's choice: a fork in the records is refused whatever the index claims."""
    engine = history(store, ups=3)
    recs = led.read_ledger(store, LAYER, scen.ENV).records
    other = BucketEngine(scen.ENV, store=store)
    other.set_config(LAYER, LINEAGE_CONFIG, scen.LINEAGE)
    other.declare(LAYER, scen.resources(2) + [FakeResource("aws:ec2/vpc:Vpc", "vpc-b", {})])
    other.up(LAYER)
    append(store, LAYER, scen.ENV, operation="up", run_id="writer-b", parent_sha256=recs[1].sha256)
    entries = index_entries(store, LAYER, scen.ENV)
    mended = dataclasses.replace(led.LedgerRecord.from_dict(json.loads(entries[4])),
                                 previous_sha256=recs[2].sha256).to_json()
    entries[4] = mended
    put_index(store, entries, LAYER, scen.ENV)
    store.put(layout.ledger_digest_key(LAYER, scen.ENV, 4, idx.digest(mended)), b"")
    t = guide(store, aws, engine)
    lineage = phase(t, "lineage")
    assert lineage.reason == "Forked" and "two digests claim its serial" in lineage.message
    assert phase(t, "choose").reason == "ForkRefused"
