"""The environment's summary (issue 38 §1): what `fleet status` reads in one GET instead of the rehearsal listing
and the bucket's settings, and when it does not trust it — missing, unreadable, older than the newest drift
record (an earlier version's check, a lost write), settings past their TTL or read for another spec — and a
record from the future named in it, caught in the same reads. On the emulator, as the jobs leave the bucket."""

from __future__ import annotations

import time
import uuid

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.drift import drift_record, save_drift_record
from bootstrap.spec import parse_spec
from recovery.evidence import summary
from recovery.fleet.status import fleet_report
from tests.fleetseed import Seed, read_counting, save_rehearsal, seed_environment, spec_data

pytestmark = pytest.mark.emulator


def _env(aws, endpoint, *, seed=None, refreshed="plain", replica=None):
    s3 = aws.client("s3")
    bucket = f"fs-{uuid.uuid4().hex[:18]}"
    now = time.time()
    seed_environment(s3, "sum", bucket, seed or Seed(drift_records=3, drill_records=2, noncurrent_days=30), now=now,
                     summary=refreshed)
    spec = parse_spec(spec_data("sum", bucket, endpoint, replica=replica), "sum")
    return spec, ObjectStore(s3, bucket), s3, now


def _read(spec, store, s3):
    return read_counting(spec, store, s3)


def _row(raw, spec, now):
    return fleet_report([raw], {spec.name: spec}, now=now)["environments"][0]


def test_steady_state_is_three_calls_and_the_row_says_how_old_the_settings_are(aws, emulator_endpoint):
    spec, store, s3, now = _env(aws, emulator_endpoint)
    raw, calls = _read(spec, store, s3)
    assert sorted(calls) == ["GetObject", "ListObjectsV2", "ListObjectsV2"], calls
    prot = raw["protection"]
    assert prot["from"] == "summary" and prot["versioning"] == "Enabled" and prot["noncurrent_days"] == 30
    assert 0 <= prot["age_seconds"] < 600 and prot["as_of"].endswith("Z")
    row = _row(raw, spec, now)
    assert set(row["rehearsals"]["layers"]) == {"backend", "network", "cluster"}
    assert all(x["last_proven"] for x in row["rehearsals"]["layers"].values())


def test_an_older_summary_than_the_newest_drift_record_is_read_past(aws, emulator_endpoint, monkeypatch):
    """A drift check that did not refresh the summary (an earlier version, a lost write) ran after it, and so did a
    rehearsal an earlier version recorded (no summary update): the listings are read, and that rehearsal shows."""
    from recovery.evidence import rehearsal_record

    spec, store, s3, now = _env(aws, emulator_endpoint)
    time.sleep(1.1)  # LastModified has a resolution of a second
    monkeypatch.setattr(rehearsal_record, "_summarize", lambda *a: None)  # as an earlier version records
    save_rehearsal(store, "sum", now - 60, {"network": ("failed", None, "bad key")}, index=5)
    save_drift_record(store, drift_record("sum", [], clock=lambda: now + 5, check_id="20261206T000001Z-0ld002"))
    raw, calls = _read(spec, store, s3)
    assert calls.count("ListObjectsV2") == 3 and "GetBucketVersioning" in calls, calls
    assert raw["protection"].get("from") is None
    row = _row(raw, spec, now)
    assert row["rehearsals"]["layers"]["network"]["last"]["outcome"] == "failed"
    assert row["rehearsals"]["layers"]["network"]["last"]["reason"] == "bad key"


def test_a_rehearsal_recorded_after_the_refresh_is_in_the_summary_at_once(aws, emulator_endpoint):
    spec, store, s3, now = _env(aws, emulator_endpoint)
    save_rehearsal(store, "sum", now - 30, {"network": ("failed", None, "the passphrase does not decrypt the state")},
                   index=7)
    raw, calls = _read(spec, store, s3)
    assert sorted(calls) == ["GetObject", "ListObjectsV2", "ListObjectsV2"], calls  # its reason came with it
    row = _row(raw, spec, now)
    net = row["rehearsals"]["layers"]["network"]
    assert net["last"]["outcome"] == "failed" and net["last"]["reason"] == "the passphrase does not decrypt the state"
    assert any(f["rule"] == "rehearsal-failed" for f in row["findings"])


@pytest.mark.parametrize("why", ["ttl", "replica", "unreadable"])
def test_settings_are_read_again_when_the_summary_cannot_stand_in(aws, emulator_endpoint, monkeypatch, why):
    spec, store, s3, now = _env(aws, emulator_endpoint, replica=None)
    if why == "ttl":
        monkeypatch.setattr(summary, "SETTINGS_TTL_SECONDS", -1e9)
    elif why == "replica":  # the spec now asks for a replica: replication was never read for it
        spec = parse_spec(spec_data("sum", spec.backend.bucket, emulator_endpoint, replica="us-west-2"), "sum")
    else:
        store.put(summary.key("sum"), b'{"kind": "summary", "schema": 1, "environment": 5}')
    raw, calls = _read(spec, store, s3)
    assert "GetBucketVersioning" in calls and raw["protection"].get("from") is None, calls
    if why == "replica":
        assert "GetBucketReplication" in calls
    if why == "unreadable":
        assert any(p["key"] == summary.key("sum") and "not a readable summary" in p["why"] for p in raw["problems"])
        assert calls.count("ListObjectsV2") == 3  # the rehearsals are listed too


def test_a_rehearsal_from_the_future_named_in_the_summary_is_caught_in_the_same_reads(aws, emulator_endpoint):
    spec, store, s3, now = _env(aws, emulator_endpoint)
    save_rehearsal(store, "sum", now - 60, {"network": ("failed", None, "real failure")}, index=3)
    save_rehearsal(store, "sum", now + 2 * 365 * 86400, {"network": ("proven", 0, None)}, index=4)
    raw, calls = _read(spec, store, s3)
    assert sorted(calls) == ["GetObject", "ListObjectsV2", "ListObjectsV2"], calls
    row = _row(raw, spec, now)
    assert row["rehearsals"]["layers"]["network"]["last"]["outcome"] == "failed"
    (future,) = [f for f in row["findings"] if f["rule"] == "record-from-future"]
    assert future["record"] == "rehearsal" and future["key"].startswith(".groundctl/rehearsals/sum/")


def test_two_writers_never_lose_each_others_change(aws, bucket):
    """A rehearsal's update and a drift check's refresh racing: the conditional write makes the loser re-read."""
    store = ObjectStore(aws.client("s3"), bucket)
    first = True

    def rehearsal_adds(doc):
        nonlocal first
        if first:  # another writer lands between this writer's read and its write
            first = False
            assert summary.update(store, "env", lambda d: summary.with_rehearsal(d, "0000000000001-b--x.proven.json",
                                                                                 {}))
        return summary.with_rehearsal(doc, "0000000000002-a--x.failed.json", {"x": "why"})

    assert summary.update(store, "env", rehearsal_adds)
    doc = summary.load_summary(store.get(summary.key("env")).body, "k")
    assert [r["name"] for r in doc["rehearsals"]["records"]] == ["0000000000001-b--x.proven.json",
                                                                 "0000000000002-a--x.failed.json"]
