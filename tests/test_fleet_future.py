"""Records from the future (issue 37 §3): a drift, drill or rehearsal record that names a time after the bucket
wrote it is never the newest evidence. Planted in an emulator bucket beside real records, as a writer with a
skewed clock or anyone holding the record role would leave them; the bucket's clock is its LastModified."""

from __future__ import annotations

import time
import uuid

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.clock import SKEW_SECONDS, ahead
from bootstrap.records.drift import drift_record, save_drift_record
from bootstrap.spec import parse_spec
from recovery.drills.report import write_report
from recovery.evidence.reading import Source, read_environment
from recovery.fleet.status import fleet_report
from tests.fleetseed import Seed, drill_report, save_rehearsal, seed_environment, spec_data

YEAR = 365 * 86400


def test_a_record_is_from_the_future_only_past_the_skew():
    written = 1_800_000_000.0
    assert ahead(written + SKEW_SECONDS - 1, written) is None      # a clock a little fast: not a finding
    assert ahead(written - 3 * 86400, written) is None             # an old record copied later: its past is fine
    assert ahead(written + 3 * YEAR, written) == 3 * YEAR
    assert ahead("not a time", written) is None and ahead(written, None) is None


def _clean(layers=("backend", "network", "cluster", "flux")):
    return [{"layer": lay, "state": "clean", "summary": "no changes", "counts": {"same": 4}, "changes": []}
            for lay in layers]


@pytest.fixture
def planted(aws, emulator_endpoint):
    """`victim`: its latest real drift check found drift, its latest real rebuild drill failed and its latest
    real network rehearsal failed, ten days ago (overdue under a daily schedule). Beside them, as someone would
    plant them to hide that: a clean drift check, a passing rebuild drill and a proving rehearsal, each dated
    years ahead; and one a minute ahead (a fast clock within the skew), which is no finding."""
    s3 = aws.client("s3")
    bucket = f"ff-{uuid.uuid4().hex[:18]}"
    now = time.time()
    seed_environment(s3, "victim", bucket, Seed(drift_records=3, drifted_last=True, drill_records=4,
                                                failed_kinds=("rebuild-cluster",), rehearsals=0, noncurrent_days=30),
                     now=now)
    store = ObjectStore(s3, bucket)
    save_rehearsal(store, "victim", now - 10 * 86400, {"backend": ("proven", 0, None), "network": (
        "failed", None, "the passphrase does not decrypt the state"), "cluster": ("proven", 0, None)}, index=1)
    later = now + 3 * YEAR
    save_drift_record(store, drift_record("victim", _clean(), clock=lambda: later, check_id="20291206T000000Z-f00001"))
    save_drift_record(store, drift_record("victim", _clean(), clock=lambda: later + 60,
                                          check_id="20291206T000100Z-f00002"))
    write_report(drill_report("victim", "rebuild-cluster", 0, rto_minutes=30, recovery=300, t0=later), store=store)
    save_rehearsal(store, "victim", later, {"backend": ("proven", 0, None), "network": ("proven", 0, None),
                                            "cluster": ("proven", 0, None)}, index=9)
    spec = parse_spec(spec_data("victim", bucket, emulator_endpoint), "victim")
    return spec, store, s3, now


def test_records_from_the_future_are_findings_and_the_present_is_judged(planted):
    spec, store, s3, now = planted
    raw = read_environment(Source(spec, store, s3))
    (row,) = fleet_report([raw], {"victim": spec}, now=now)["environments"]
    rules = {}
    for f in row["findings"]:
        rules.setdefault(f["rule"], []).append(f)

    # The present is judged as if the planted records were not there.
    assert row["drift"]["result"] == "drift" and row["drift"]["age_seconds"] < 2 * 3600
    assert row["drills"]["per_kind"]["rebuild-cluster"]["last"]["verdict"] == "failed"
    assert {f.get("kind") for f in rules["drill-failed"]} == {"rebuild-cluster"}
    network = row["rehearsals"]["layers"]["network"]
    assert network["last"]["outcome"] == "failed" and network["last"]["age_seconds"] > 9 * 86400
    assert [f["layer"] for f in rules["rehearsal-failed"]] == ["network"]
    assert "rehearsal-overdue" in rules  # ten days old under a daily schedule, whatever the future claims

    # Each kind's planted records are a finding of their own, naming the first one, its time and the bucket's.
    future = {f["record"]: f for f in rules["record-from-future"]}
    assert set(future) == {"drift", "drill", "rehearsal"}
    assert future["drift"]["what"].startswith("2 drift records dated in the future: ")
    assert "2028" in future["drift"]["what"] or "2029" in future["drift"]["what"]
    for kind, f in future.items():
        assert f["level"] == "warning" and f["key"].startswith(f".groundctl/{kind}"), f
        assert f["next"]["command"] == f"aws s3api head-object --bucket {spec.backend.bucket} --key {f['key']}"
        assert abs(row["from_future"][kind]["records"][0]["ahead_seconds"] - 3 * YEAR) < 86400
    assert row["level"] == "critical"  # the failed drill, as without the planted records

    # In production a record from the future is critical.
    prod = parse_spec(spec_data("victim", spec.backend.bucket, spec.aws.endpoint_url, production=True,
                                replica="us-west-2"), "victim")
    (prow,) = fleet_report([raw], {"victim": prod}, now=now)["environments"]
    assert {f["level"] for f in prow["findings"] if f["rule"] == "record-from-future"} == {"critical"}


def test_a_clock_a_little_fast_is_no_finding(aws, emulator_endpoint):
    s3 = aws.client("s3")
    bucket = f"ff-{uuid.uuid4().hex[:18]}"
    now = time.time()
    seed_environment(s3, "fast", bucket, Seed(drift_records=2, drill_records=0, rehearsals=0), now=now)
    store = ObjectStore(s3, bucket)
    ahead_a_bit = now + SKEW_SECONDS / 3
    save_drift_record(store, drift_record("fast", _clean(), clock=lambda: ahead_a_bit,
                                          check_id="20291206T000000Z-a00001"))
    spec = parse_spec(spec_data("fast", bucket, emulator_endpoint), "fast")
    raw = read_environment(Source(spec, store, s3))
    (row,) = fleet_report([raw], {"fast": spec}, now=now)["environments"]
    assert row["drift"]["check_id"] == "20291206T000000Z-a00001" and row["drift"]["age_seconds"] == 0
    assert not any(f["rule"] == "record-from-future" for f in row["findings"])


def test_a_flood_from_the_future_is_not_followed(aws, emulator_endpoint, monkeypatch):
    """More planted records than a page: the present is still found, within a bounded number of keys."""
    from recovery.evidence import listing

    monkeypatch.setattr(listing, "MAX_FUTURE", 12)
    s3 = aws.client("s3")
    bucket = f"ff-{uuid.uuid4().hex[:18]}"
    now = time.time()
    seed_environment(s3, "flood", bucket, Seed(drift_records=2, drifted_last=True, drill_records=0, rehearsals=0),
                     now=now)
    store = ObjectStore(s3, bucket)
    for i in range(10):  # more than a page of 8
        t = now + YEAR + i * 60
        save_drift_record(store, drift_record("flood", _clean(), clock=lambda t=t: t, check_id=f"x-{i:06x}"))
    spec = parse_spec(spec_data("flood", bucket, emulator_endpoint), "flood")
    (row,) = fleet_report([read_environment(Source(spec, store, s3))], {"flood": spec}, now=now)["environments"]
    assert row["drift"]["result"] == "drift"
    assert row["from_future"]["drift"]["count"] == 10 and not row["from_future"]["drift"]["flood"]
    for i in range(10, 14):
        t = now + YEAR + i * 60
        save_drift_record(store, drift_record("flood", _clean(), clock=lambda t=t: t, check_id=f"x-{i:06x}"))
    (row,) = fleet_report([read_environment(Source(spec, store, s3))], {"flood": spec}, now=now)["environments"]
    assert row["drift"] is None and row["from_future"]["drift"]["flood"]
    (f,) = [f for f in row["findings"] if f["rule"] == "record-from-future"]
    assert f["what"].startswith("at least 12 drift records dated in the future")
