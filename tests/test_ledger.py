"""The ledger: appends against the emulator (including 20 at once), and the pure chain/placement verdicts."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading
from datetime import datetime, timedelta, timezone

import pytest
import zstandard

from bootstrap.records import layout
from bootstrap.kit.errors import StateUnusable
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.ledger import LedgerRecord, append_record, current_lineage, read_ledger, verify_chain
from recovery.lineage.placement import Candidate, assess_lineage, place_candidates

P, S = "network", "dev"


def checkpoint(n: int, tag: str = "") -> bytes:
    resources = [{"urn": f"urn:pulumi:dev::network::aws:ec2/vpc:Vpc::r{i}{tag}", "type": "aws:ec2/vpc:Vpc",
                  "custom": True, "id": f"vpc-{i}"} for i in range(n)]
    return json.dumps({"version": 3, "checkpoint": {"stack": "organization/network/dev",
                                                     "latest": {"manifest": {}, "resources": resources}}}).encode()


@pytest.fixture
def store(aws, bucket) -> ObjectStore:
    return ObjectStore(aws.client("s3"), bucket)


def write_state(store, body: bytes, suffix: str = ".json") -> str:
    return store.put(layout.stack_key(P, S, suffix), body)


def test_first_and_second_records_chain(store):
    body1 = checkpoint(3)
    v1 = write_state(store, body1)
    r1 = append_record(store, P, S, operation="up", run_id="run-1", git_commit="a" * 40)
    assert (r1.serial, r1.version_id, r1.resources, r1.previous_sha256) == (1, v1, 3, None)
    assert r1.sha256 == hashlib.sha256(body1).hexdigest()
    assert r1.stack_key == layout.stack_key(P, S) and r1.state_last_modified
    body2 = checkpoint(5)
    v2 = write_state(store, body2)
    r2 = append_record(store, P, S, operation="up", run_id="run-2")
    assert (r2.serial, r2.version_id, r2.previous_sha256, r2.lineage) == (2, v2, r1.sha256, r1.lineage)
    assert current_lineage(store, P, S) == r1.lineage
    stored = json.loads(store.get(layout.ledger_key(P, S, 2)).body)
    assert stored["serial"] == 2 and stored["operation"] == "up"
    assert verify_chain(read_ledger(store, P, S).records).ok


def test_given_lineage_is_used_for_the_first_record_only(store):
    write_state(store, checkpoint(1))
    assert append_record(store, P, S, operation="up", run_id="r", lineage="L-1").lineage == "L-1"
    write_state(store, checkpoint(2))
    assert append_record(store, P, S, operation="up", run_id="r", lineage="L-other").lineage == "L-1"


def test_recording_the_same_stored_state_twice_appends_nothing(store):
    write_state(store, checkpoint(2))
    a = append_record(store, P, S, operation="up", run_id="r1")
    b = append_record(store, P, S, operation="up", run_id="r2")
    assert a == b and read_ledger(store, P, S).highest_serial == 1


@pytest.mark.parametrize("suffix,pack", [(".json.gz", gzip.compress),
                                         (".json.zst", lambda b: zstandard.ZstdCompressor().compress(b))])
def test_compressed_state_counted_and_hashed_as_stored(store, suffix, pack):
    body = pack(checkpoint(4))
    write_state(store, body, suffix)
    rec = append_record(store, P, S, operation="up", run_id="r")
    assert rec.resources == 4 and rec.sha256 == hashlib.sha256(body).hexdigest()
    assert rec.stack_key.endswith(suffix)


def test_missing_or_unreadable_state_is_refused(store):
    with pytest.raises(StateUnusable):
        append_record(store, P, S, operation="up", run_id="r")
    write_state(store, b"{not json")
    with pytest.raises(StateUnusable) as err:
        append_record(store, P, S, operation="up", run_id="r")
    assert "\n" not in str(err.value)
    assert read_ledger(store, P, S).missing


def test_twenty_concurrent_appenders_get_unique_contiguous_serials(store):
    versions = [write_state(store, checkpoint(i + 1, tag=f"-{i}")) for i in range(20)]
    barrier = threading.Barrier(20)
    results, errors = [], []

    def appender(i: int) -> None:
        barrier.wait()
        try:
            results.append(append_record(store, P, S, operation="up", run_id=f"run-{i}",
                                         state_key=layout.stack_key(P, S), state_version=versions[i]))
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    led = read_ledger(store, P, S)
    assert [r.serial for r in led.records] == list(range(1, 21)) and not led.problems
    assert sorted(r.serial for r in results) == list(range(1, 21))          # nobody told a serial it lost
    assert sorted(r.version_id for r in led.records) == sorted(versions)    # none lost, none twice
    assert {(r.serial, r.run_id) for r in results} == {(r.serial, r.run_id) for r in led.records}
    verdict = verify_chain(led.records)
    assert verdict.ok, verdict.findings
    assert len({r.lineage for r in led.records}) == 1


def test_concurrent_appenders_of_one_state_record_it_once(store):
    write_state(store, checkpoint(2))
    barrier = threading.Barrier(8)
    out = []

    def appender(i):
        barrier.wait()
        out.append(append_record(store, P, S, operation="up", run_id=f"r{i}"))

    threads = [threading.Thread(target=appender, args=(i,)) for i in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert read_ledger(store, P, S).highest_serial == 1
    assert len({r.serial for r in out}) == 1


def test_damaged_ledger_is_reported_not_raised_and_appends_past_it(store):
    write_state(store, checkpoint(1))
    append_record(store, P, S, operation="up", run_id="r1")
    store.put(layout.ledger_key(P, S, 3), b"garbage")
    store.put(layout.ledger_prefix(P, S) + "notes.txt", b"x")
    led = read_ledger(store, P, S)
    assert {p.code for p in led.problems} == {"unparseable-record", "stray-object", "gap"}
    assert led.highest_serial == 3 and led.head.serial == 1
    write_state(store, checkpoint(2))
    assert append_record(store, P, S, operation="up", run_id="r2").serial == 4


def test_parent_given_makes_a_second_writer_show_as_a_fork(store):
    write_state(store, checkpoint(1))
    base = append_record(store, P, S, operation="up", run_id="a")
    write_state(store, checkpoint(2))
    append_record(store, P, S, operation="up", run_id="a2", parent_sha256=base.sha256)
    write_state(store, checkpoint(3))
    append_record(store, P, S, operation="up", run_id="b", parent_sha256=base.sha256)  # from the same parent
    verdict = verify_chain(read_ledger(store, P, S).records)
    assert not verdict.ok and [f.serial for f in verdict.forks] == [3]


# -- pure verdicts ---------------------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def rec(serial, sha, prev, *, lineage="L", version=None, minutes=None):
    at = (T0 + timedelta(minutes=minutes if minutes is not None else serial * 10)).isoformat()
    return LedgerRecord(lineage, serial, sha * 64 if len(sha) == 1 else sha, version or f"v{serial}",
                        (prev * 64 if prev and len(prev) == 1 else prev), "up", f"run-{serial}", at, None, 1,
                        "k", at)


CHAIN = [rec(1, "a", None), rec(2, "b", "a"), rec(3, "c", "b")]


def test_verify_chain_findings():
    assert verify_chain(CHAIN).ok and verify_chain([]).ok
    assert [f.code for f in verify_chain([CHAIN[0], CHAIN[2]]).findings] == ["gap"]
    assert [f.code for f in verify_chain([CHAIN[0], rec(2, "b", "q")]).findings] == ["chain-break"]
    assert [f.code for f in verify_chain(CHAIN[1:]).findings] == ["missing-start"]
    other = rec(2, "d", "a")
    assert [f.code for f in verify_chain(CHAIN + [other]).findings] == ["fork"]
    assert [f.code for f in verify_chain([*CHAIN, rec(4, "e", "b")]).findings] == ["fork"]
    assert [f.code for f in verify_chain([*CHAIN, rec(4, "e", "c", lineage="M")]).findings] == ["lineage-change"]


def cand(sha, minutes, version=None, lineage="L"):
    return Candidate("k", version or f"x{minutes}", sha * 64, T0 + timedelta(minutes=minutes), lineage)


def test_place_candidates():
    ledgered, mid, late, old = place_candidates(
        CHAIN, [cand("b", 20, version="v2"), cand("z", 25), cand("y", 40), cand("w", 1)])
    assert (ledgered.status, ledgered.serial, ledgered.rollback) == ("ledgered", 2, True)
    assert (mid.status, mid.after_serial, mid.before_serial, mid.rollback) == ("between", 2, 3, True)
    assert "after serial 2, before serial 3" in mid.sentence
    assert (late.status, late.after_serial, late.rollback) == ("after-head", 3, False)
    assert (old.status, old.before_serial) == ("before-first", 1)
    head, = place_candidates(CHAIN, [cand("c", 30, version="v3")])
    assert head.serial == 3 and head.rollback is False and head.lineage_ok is True


def test_assess_lineage_with_intact_ledger_flags_foreign_and_out_of_band_writes(store):
    from bootstrap.records.ledger import LedgerRead
    led = LedgerRead(P, S, tuple(CHAIN), (), 3)
    v = assess_lineage(led, [cand("c", 30, version="v3"), cand("q", 35, lineage="OTHER"),
                             cand("a", 50, version="copy")], expected_lineage="L")
    assert v.evidence == "ledger" and not v.weaker and v.head_serial == 3
    assert [p.key for p in v.foreign] == ["k"] and v.foreign[0].lineage == "OTHER"
    assert [f.serial for f in v.forks] == [1]  # serial 1's state written again after serial 3
    tampered = assess_lineage(led, [cand("f", 20, version="v2")])
    assert [f.code for f in tampered.forks] == ["fork"] and "serial 2" in tampered.forks[0].sentence


def test_assess_lineage_without_ledger_is_labelled_weaker():
    v = assess_lineage(None, [cand("a", 10), cand("b", 30), cand("c", 20, lineage="M")], expected_lineage="L")
    assert v.evidence == "time-order" and v.weaker and "Weaker evidence" in v.summary
    assert [p.last_modified[:16] for p in v.placements] == ["2026-01-01T00:30", "2026-01-01T00:20",
                                                            "2026-01-01T00:10"]
    assert [f.code for f in v.findings] == ["ledger-missing", "foreign-lineage"]


def test_assess_lineage_with_damaged_ledger_is_weaker_but_still_places():
    from bootstrap.records.ledger import Finding, LedgerRead
    led = LedgerRead(P, S, (CHAIN[0], CHAIN[2]), (Finding("unparseable-record", 2, "serial 2 is garbage"),), 3)
    v = assess_lineage(led, [cand("z", 25)])
    assert v.evidence == "ledger-damaged" and v.weaker
    assert v.placements[0].after_serial == 1 and v.placements[0].before_serial == 3


def test_hostile_ledger_records_are_findings_never_tracebacks():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from bootstrap.records.ledger import _parse_record

    json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                               lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                               max_leaves=12)
    good = json.loads(rec(1, "a", None).to_json())
    mutated = st.builds(lambda k, v: {**good, k: v}, st.sampled_from(sorted(good)), json_values)

    @settings(max_examples=200, deadline=None)
    @given(st.one_of(st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode()),
                     mutated.map(lambda d: json.dumps(d).encode())))
    def check(body):
        parsed, problem = _parse_record("k", 1, body)
        assert (parsed is None) != (problem is None)
        if parsed:
            verify_chain([parsed])
            place_candidates([parsed], [cand("a", 5)])

    check()


def test_record_with_a_bad_time_is_unparseable_not_a_crash_later():
    from bootstrap.records.ledger import _parse_record
    bad = {**json.loads(rec(1, "a", None).to_json()), "state_last_modified": "yesterday"}
    parsed, problem = _parse_record("k", 1, json.dumps(bad).encode())
    assert parsed is None and problem.code == "unparseable-record"
