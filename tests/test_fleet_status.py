"""`groundctl fleet status` against the emulator: every environment's drift, drills and RTO trend, lock,
ledger head and bucket protection judged against its RPO; unreadable environments are rows, not crashes;
the number of S3 calls per environment does not grow with the history; `drift --record` writes what
status reads. The protection judgement is also tested as the pure function it is."""

from __future__ import annotations

import json
import sys
import uuid

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.drift import drift_record, parse_name, record_name, save_drift_record
from bootstrap.spec import parse_spec
from recovery.evidence.protection import AT_RISK, FAILS, MEETS, UNKNOWN, judge
from recovery.evidence.reading import Source, drill_kind, read_environment, read_fleet
from recovery.fleet.status import failing, fleet_report
from tests.fleetseed import Seed, dump, read_counting, seed_environment, spec_data

pytestmark = pytest.mark.emulator


def _bucket() -> str:
    return f"fl-{uuid.uuid4().hex[:18]}"


@pytest.fixture
def fleet(aws, emulator_endpoint):
    """Four environments, each with a story: healthy, drifted + failing drills, locked + slowing, unprotected."""
    s3 = aws.client("s3")
    stories = {
        "healthy": (Seed(replication_rtc=True, noncurrent_days=30), {"replica": "us-west-2"}),
        "drifted": (Seed(drifted_last=True, last_drill_fails=True, replication_rtc=False, noncurrent_days=30), {}),
        "locked": (Seed(lock_holder="alice", slower_each_drill=60, noncurrent_days=7, drill_records=6), {}),
        "bare": (Seed(versioning=False, drift_records=0, drill_records=0, layers_with_ledger=()), {"replica": "us-west-2"}),
    }
    specs, sources = {}, []
    for name, (seed, extra) in stories.items():
        bucket = _bucket()
        seed_environment(s3, name, bucket, seed)
        spec = parse_spec(spec_data(name, bucket, emulator_endpoint, **extra), name)
        specs[name] = spec
        sources.append(Source(spec, ObjectStore(s3, bucket), s3))
    return specs, sources


def _rows(specs, sources) -> dict[str, dict]:
    report = fleet_report(read_fleet(sources, workers=4), specs, now=1_764_000_000.0 + 40 * 86400)
    return {r["environment"]: r for r in report["environments"]}


def test_every_environment_shows_what_the_operator_needs(fleet):
    rows = _rows(*fleet)
    h = rows["healthy"]
    assert h["drift"]["result"] == "clean" and h["drift"]["check_id"].endswith("-00001d") and h["drift"]["age_seconds"] > 0
    assert h["drills"]["last"]["verdict"] == "passed" and h["drills"]["records"] == 10
    kinds = h["drills"]["per_kind"]
    assert set(kinds) == {"rebuild-cluster", "state-loss"} and kinds["state-loss"]["records"] == 5
    assert kinds["rebuild-cluster"]["trend"]["trend"] == "steady"
    assert kinds["rebuild-cluster"]["trend"]["recovery_seconds"] == [600.0] * 5  # from the names: no GET each
    assert h["lock"]["held"] is False
    assert set(h["ledger"]["layers"]) == {"backend", "network", "cluster"} and h["ledger"]["layers"]["network"]["serial"] == 2
    assert h["ledger"]["head_age_seconds"] is not None
    assert h["protection"]["verdict"] == MEETS, h["protection"]

    d = rows["drifted"]
    assert d["drift"]["result"] == "drift" and d["drift"]["drifted_layers"] == ["network"]
    assert d["drills"]["per_kind"]["rebuild-cluster"]["last"]["verdict"] == "failed"
    assert d["drills"]["per_kind"]["state-loss"]["last"]["verdict"] == "failed"
    assert d["protection"]["verdict"] == AT_RISK  # replication without RTC: no bound to hold the RPO against
    rules = {f["rule"]: f["level"] for f in d["findings"]}
    assert rules["drift"] == "warning" and rules["drill-failed"] == "critical" and d["level"] == "critical"

    lk = rows["locked"]
    assert lk["lock"]["held"] and "alice@runner-7" in lk["lock"]["holder"]
    # 6 drills, 60 s slower each: the latest passing rebuild is 240 s over the median of the three before (> 60 s)
    assert lk["drills"]["per_kind"]["rebuild-cluster"]["trend"]["trend"] == "not enough data"
    assert any("expire after 7 days" in f["what"] for f in lk["protection"]["findings"])

    b = rows["bare"]
    assert b["drift"] is None and b["drills"]["last"] is None and b["ledger"]["head_at"] is None
    assert b["protection"]["verdict"] == FAILS
    whats = " ".join(f["what"] for f in b["protection"]["findings"])
    assert "versioning is Disabled" in whats and "replica in us-west-2" in whats
    assert {"drift-never", "protection-fails"} <= {f["rule"] for f in b["findings"]}


def test_timelines_carry_the_latest_drill_of_each_kind(fleet):
    rows = _rows(*fleet)
    timelines = rows["healthy"]["drills"]["timelines"]
    assert [t["kind"] for t in timelines] == ["rebuild-cluster", "state-loss"]
    # Passing drills are known by their names (recovery time, no phases); failed ones are read in full.
    assert timelines[0]["phases"] == [] and timelines[0]["recovery_seconds"] == 600.0
    failed = rows["drifted"]["drills"]["timelines"]
    assert [p["name"] for p in failed[0]["phases"]][:2] == ["preflight", "baseline"]
    assert rows["drifted"]["drills"]["per_kind"]["rebuild-cluster"]["last"]["reason"] == "Timeout"


def test_a_missing_bucket_and_an_unreachable_endpoint_are_rows_not_crashes(aws, emulator_endpoint):
    s3 = aws.client("s3")
    gone = parse_spec(spec_data("gone", _bucket(), emulator_endpoint), "gone")
    import boto3
    from botocore.config import Config

    dead = boto3.client("s3", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x",
                        config=Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=1))
    away = parse_spec(spec_data("away", _bucket(), "http://127.0.0.1:9"), "away")
    raws = read_fleet([Source(gone, ObjectStore(s3, gone.backend.bucket), s3),
                       Source(away, ObjectStore(dead, away.backend.bucket), dead),
                       Source(gone.model_copy(update={"name": "skipme"}), skip="uses the embedded emulator")])
    report = fleet_report(raws, {"gone": gone, "away": away, "skipme": gone}, now=0)
    rows = {r["environment"]: r for r in report["environments"]}
    assert rows["gone"]["protection"]["verdict"] == FAILS and "does not exist" in rows["gone"]["note"]
    assert "could not be reached" in rows["away"]["error"]
    assert rows["skipme"]["skipped"] == "uses the embedded emulator"
    assert report["counts"]["skipped"] == 1 and report["counts"]["unreadable"] == 1
    # Unreadable is a finding, never "never checked / free / no ledger": the row says only what is known.
    assert rows["away"]["level"] == "warning" and [f["rule"] for f in rows["away"]["findings"]] == ["unreadable"]
    assert "drift" not in rows["away"] and "lock" not in rows["away"] and "ledger" not in rows["away"]
    assert rows["skipme"]["level"] == "info"
    assert report["counts"]["needing_attention"] == 2  # the missing bucket and the unreachable endpoint


def test_api_calls_per_environment_do_not_grow_with_history(aws, emulator_endpoint):
    s3 = aws.client("s3")
    calls = []

    def count(**kwargs):
        calls.append(kwargs.get("model").name if kwargs.get("model") else "?")

    def calls_for(seed: Seed, summary: str = "plain") -> int:
        bucket = _bucket()
        seed_environment(s3, "hist", bucket, seed, summary=summary)
        spec = parse_spec(spec_data("hist", bucket, emulator_endpoint), "hist")
        calls.clear()
        s3.meta.events.register("before-call.s3", count)
        try:
            read_environment(Source(spec, ObjectStore(s3, bucket), s3))
        finally:
            s3.meta.events.unregister("before-call.s3", count)
        return len(calls)

    small = calls_for(Seed(drift_records=3, drill_records=10))
    large = calls_for(Seed(drift_records=90, drill_records=40))
    assert small == large, (small, large)
    # Steady state (the last drift check refreshed the summary): the summary's GET (the newest rehearsals and
    # the bucket's settings) + the drift listing + one listing of drills/ledger/locks; every drill and
    # rehearsal passed, so its name says all.
    assert large == 3, calls
    assert calls_for(Seed(drift_records=3, drill_records=10, rehearsals=60)) == large
    assert calls_for(Seed(drift_records=3, drill_records=10, lock_holder="bob")) == large + 1  # the lock's GET
    assert calls_for(Seed(drift_records=3, drill_records=40, failed_kinds=("state-loss",))) == large + 1  # its reason
    # A bucket an earlier version's drift checks wrote (no summary a listing built): the records themselves —
    # versioning + lifecycle (no replica asked for: replication is not read) + the listing of the rehearsals.
    assert calls_for(Seed(drift_records=3, drill_records=10), summary=None) == large + 3


@pytest.mark.parametrize("drifted,cap,records,exact,listings", [
    (5, None, 5, True, 2),      # the run ends inside the first page of drift records: no extra listing
    (12, None, 12, True, 3),    # it fills the page: one more listing dates its start
    (30, None, 30, True, 3),    # every check drifted: the run starts at the first check ever
    (12, 10, 10, False, 3),     # past the cap: dated "at least" that far back, and no further listing
])
def test_a_run_of_drifted_checks_is_dated_by_its_first(aws, emulator_endpoint, monkeypatch, drifted, cap, records,
                                                       exact, listings):
    from datetime import datetime

    from recovery.evidence import reading
    from tests.fleetseed import T0

    if cap:
        monkeypatch.setattr(reading, "MAX_DRIFT_STREAK", cap)
    s3 = aws.client("s3")
    bucket = _bucket()
    seed_environment(s3, "runs", bucket, Seed(drift_records=30, drill_records=0, drifted_checks=drifted))
    spec = parse_spec(spec_data("runs", bucket, emulator_endpoint), "runs")
    calls = []

    def count(**kwargs):
        calls.append(kwargs["model"].name)

    s3.meta.events.register("before-call.s3", count)
    try:
        raw = read_environment(Source(spec, ObjectStore(s3, bucket), s3))
    finally:
        s3.meta.events.unregister("before-call.s3", count)
    streak = raw["drift_streak"]
    first = T0 + (30 - records) * 3600  # checks are hourly from T0; the run's oldest one
    assert (streak["records"], streak["exact"]) == (records, exact)
    assert datetime.fromisoformat(streak["at"].replace("Z", "+00:00")).timestamp() == first
    assert calls.count("ListObjectsV2") == listings + 1, calls  # and the one of the newest rehearsals
    row = fleet_report([raw], {"runs": spec}, now=T0 + 40 * 86400)["environments"][0]
    drift = next(f for f in row["findings"] if f["rule"] == "drift")
    assert drift["since"] == streak["at"] and drift["since_exact"] is exact
    assert f"{'' if exact else 'at least '}{records} checks in a row" in drift["what"]


def test_a_drift_record_name_carries_its_time_and_verdict():
    record = drift_record("dev", [{"layer": "network", "state": "drift", "summary": "", "counts": {}},
                                  {"layer": "cluster", "state": "not deployed", "summary": "", "counts": {}},
                                  {"layer": "flux", "state": "clean", "summary": "", "counts": {}}],
                          clock=lambda: 1_764_000_000.25, check_id="20251124T160000Z-abc123")
    parsed = parse_name(record_name(record))
    assert parsed == {"check_id": "20251124T160000Z-abc123", "at": record["at"], "outcome": "drift", "drift": True,
                      "drifted_layers": ["network", "cluster"]}
    clean = drift_record("dev", [], clock=lambda: 1_764_000_001.0, check_id="x-1")
    assert parse_name(record_name(clean))["drift"] is False
    assert record_name(clean) < record_name(record)  # the newer one lists first
    assert parse_name("20251124T160000Z-abc123") is None and parse_name("123-x--maybe") is None


def test_a_drift_record_of_another_name_is_read_in_full(aws, bucket, emulator_endpoint):
    s3 = aws.client("s3")
    store = ObjectStore(s3, bucket)
    record = drift_record("odd", [{"layer": "network", "state": "drift", "summary": "", "counts": {}}],
                          clock=lambda: 1_764_000_000.0, check_id="c-1")
    store.put(".groundctl/drift/odd/hand-written.json", json.dumps(record).encode())
    spec = parse_spec(spec_data("odd", bucket, emulator_endpoint), "odd")
    raw = read_environment(Source(spec, store, s3))
    assert raw["drift"]["drifted_layers"] == ["network"] and raw["problems"] == []


def test_drill_kind_is_read_from_the_id():
    assert drill_kind("20261202T110000Z-rebuild-cluster-3f9a1c") == "rebuild-cluster"
    assert drill_kind("20261202T110000Z-state-loss-00000a") == "state-loss"
    assert drill_kind("not-a-drill") is None


def test_drift_record_keeps_verdicts_not_values_and_masks_secrets(aws, bucket):
    store = ObjectStore(aws.client("s3"), bucket)
    canary = "canary-secret-9f8e7d6c"
    rows = [{"layer": "network", "state": "drift", "summary": f"1 to update ({canary})", "counts": {"update": 1},
             "changes": [{"urn": "u", "type": "t", "operation": "update", "diff_keys": ["tags"]}]}]
    key = save_drift_record(store, drift_record("dev", rows, clock=lambda: 1_764_000_000.0), [canary])
    assert key.startswith(f".groundctl/drift/dev/{9_999_999_999_999 - 1_764_000_000_000:013d}-20251124T")
    assert key.endswith("--drift-network.json")
    body = store.get(key).body.decode()
    assert canary not in body and "[redacted]" in body
    doc = json.loads(body)
    assert doc["drift"] is True and doc["drifted_layers"] == ["network"] and doc["layers"][0]["changed"] == 1


# -- the judgement, pure ------------------------------------------------------------------------------

def _prot(**over) -> dict:
    base = {"bucket": "b", "exists": True, "unreadable": [], "versioning": "Enabled", "mfa_delete": False,
            "replication": {"enabled_rules": 1, "destinations": ["arn:aws:s3:::r"], "time_control": True},
            "noncurrent_days": 90}
    return base | over


@pytest.mark.parametrize("prot,rpo,replica,verdict,needle", [
    (_prot(), 30, "eu-central-1", MEETS, None),
    (_prot(), 10, "eu-central-1", AT_RISK, "longer than the RPO of 10 min"),
    (_prot(replication={"enabled_rules": 1, "destinations": [], "time_control": False}), 60, "x", AT_RISK, "no time bound"),
    (_prot(replication={"enabled_rules": 0, "destinations": [], "time_control": False}), 60, None, AT_RISK, "no replica"),
    (_prot(replication={"enabled_rules": 0, "destinations": [], "time_control": False}), 60, "eu-central-1", FAILS,
     "asks for a replica in eu-central-1"),
    (_prot(versioning="Suspended"), 60, "eu-central-1", FAILS, "versioning is Suspended"),
    (_prot(noncurrent_days=7), 60, "eu-central-1", AT_RISK, "expire after 7 days"),
    (_prot(noncurrent_days=0), 60, "eu-central-1", MEETS, None),  # kept forever reaches back furthest
    (_prot(replication=None, unreadable=["replication (AccessDenied)"]), 60, "eu-central-1", UNKNOWN, "could not be read"),
])
def test_protection_against_the_rpo(prot, rpo, replica, verdict, needle):
    got = judge(prot, rpo_minutes=rpo, retention_days=30, replica_region=replica)
    assert got["verdict"] == verdict, got
    if needle:
        assert any(needle in f["what"] for f in got["findings"]), got


# -- the CLI, through the front door -------------------------------------------------------------------

def test_cli_json_and_html(tmp_path, monkeypatch, capsys, aws, emulator_endpoint):
    from groundctl import main

    s3 = aws.client("s3")
    envs = tmp_path / "environments"
    envs.mkdir()
    for name, seed in (("alpha", Seed(drift_records=2, drill_records=2)), ("beta", Seed(drifted_last=True, drift_records=2,
                                                                                      drill_records=0))):
        bucket = _bucket()
        seed_environment(s3, name, bucket, seed)
        (envs / f"{name}.yaml").write_text(dump(spec_data(name, bucket, emulator_endpoint)))
    (envs / "local.yaml").write_text(dump(spec_data("local", _bucket(), "embedded")))
    monkeypatch.setattr(sys, "argv", ["groundctl", "fleet", "status", "--environments", str(envs), "--json",
                                      "--html", str(tmp_path / "out")])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    assert done.value.code == 0, err
    doc = json.loads(out)
    rows = {r["environment"]: r for r in doc["environments"]}
    assert "drift" in rows["alpha"] and "drift" in rows["beta"], rows  # an unread row says why, in its error
    assert rows["beta"]["drift"]["result"] == "drift" and rows["alpha"]["drills"]["last"]["verdict"] == "passed"
    assert "embedded emulator" in rows["local"]["skipped"]
    page = (tmp_path / "out" / "fleet-status.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 2 and "<script" not in page


# -- what scheduled runs write is what status reads ------------------------------------------------------

from tests.test_cli_up import cli  # noqa: E402,F401 - the in-process CLI with the in-memory engine


def test_drift_record_written_by_a_scheduled_run_is_what_status_shows(cli, tmp_path):
    assert cli("up", "SPEC", "--yes", "--json")[0] == 0
    code, _, err = cli("drift", "SPEC", "--record", "--json")
    assert code == 0 and "Drift record: .groundctl/drift/local/" in err
    cli.engine.state["network"][0].inputs["name"] = "changed-by-hand"
    assert cli("drift", "SPEC", "--record", "--json")[0] == 1
    keys = [k for k, _s, _m in cli.store.keys(".groundctl/drift/local/")]
    # Two records, and the summary the check refreshed after each (sorted after them: never among the newest).
    assert len(keys) == 3 and keys[-1] == ".groundctl/drift/local/~summary.json"

    code, out, err = cli("fleet", "status", "--environments", str(tmp_path), "--json")
    assert code == 0, err
    row = json.loads(out)["environments"][0]
    # The bucket's settings came from the summary the drift check left, and the row says as of when.
    assert row["protection"]["from"] == "summary" and row["protection"]["age_seconds"] < 600
    assert row["environment"] == "local"
    assert row["drift"]["result"] == "drift" and row["drift"]["drifted_layers"] == ["network"]
    assert set(row["ledger"]["layers"]) == {"backend", "network", "cluster"}
    assert row["ledger"]["layers"]["network"]["serial"] == 1 and row["lock"]["held"] is False
    assert row["drills"]["last"] is None


def test_environments_sharing_a_bucket_see_only_their_own_records(aws, emulator_endpoint):
    s3 = aws.client("s3")
    bucket = _bucket()
    seed_environment(s3, "one", bucket, Seed(drift_records=2, drill_records=2, drifted_last=True))
    spec_one = parse_spec(spec_data("one", bucket, emulator_endpoint), "one")
    spec_two = parse_spec(spec_data("two", bucket, emulator_endpoint), "two")
    raws = read_fleet([Source(s, ObjectStore(s3, bucket), s3) for s in (spec_one, spec_two)])
    rows = {r["environment"]: r for r in fleet_report(raws, {"one": spec_one, "two": spec_two}, now=0)["environments"]}
    assert rows["one"]["drift"]["result"] == "drift" and rows["one"]["drills"]["records"] == 2
    assert rows["two"]["drift"] is None and rows["two"]["drills"]["records"] == 0
    assert rows["two"]["ledger"]["head_at"] is None and rows["one"]["ledger"]["head_at"] is not None


def test_a_failed_drift_check_is_shown_as_failed_with_its_reason(aws, emulator_endpoint):
    # Failed scheduled checks are recorded with `outcome: "failed"` and a `reason`; whatever their name, the newest
    # record is read in full when its name does not carry a clean/drift verdict.
    s3 = aws.client("s3")
    bucket = _bucket()
    seed_environment(s3, "flaky", bucket, Seed(drift_records=2, drill_records=0))
    record = drift_record("flaky", [], clock=lambda: 1_764_000_000.0 + 86400, check_id="c-9")
    record |= {"outcome": "failed", "reason": "the preview failed: AccessDenied reading a subnet"}
    name = record_name(record).rsplit("--", 1)[0] + "--failed"
    ObjectStore(s3, bucket).put(f".groundctl/drift/flaky/{name}.json", json.dumps(record).encode())
    spec = parse_spec(spec_data("flaky", bucket, emulator_endpoint), "flaky")
    row = fleet_report(read_fleet([Source(spec, ObjectStore(s3, bucket), s3)]), {"flaky": spec},
                       now=1_764_000_000.0 + 86400 + 60)["environments"][0]
    assert row["drift"]["result"] == "failed" and "AccessDenied" in row["drift"]["reason"]
    failed = next(f for f in row["findings"] if f["rule"] == "drift-check-failed")
    assert failed["level"] == "warning" and "AccessDenied reading a subnet" in failed["what"]


def test_a_drill_is_listed_once_after_its_progress_checkpoints(aws, bucket):
    from dataclasses import replace

    from recovery.drills.report import load_history, write_report
    from recovery.evidence.reading import scan
    from tests.fleetseed import drill_report

    store = ObjectStore(aws.client("s3"), bucket)
    final = drill_report("dev", "rebuild-cluster", 1, rto_minutes=30, recovery=600)
    progress = replace(final, verdict=replace(final.verdict, outcome="running", reason="InProgress"))
    assert write_report(progress, store=store).bucket_key == f".groundctl/drills/dev/{final.drill_id}.json"
    assert [d["outcome"] for d in scan(store, "dev")["drills"]["rebuild-cluster"]] == [None]  # read in full
    key = write_report(final, store=store).bucket_key
    assert key.endswith("--passed-600s.json") and [k for k, _s, _m in store.keys(".groundctl/drills/dev/")] == [key]
    records, unreadable = load_history(store, "dev")
    assert [r["verdict"]["outcome"] for r in records] == ["passed"] and unreadable == []
    # A checkpoint left beside its finished record (its delete failed) is still one drill.
    store.put(f".groundctl/drills/dev/{final.drill_id}.json", b"{}")
    assert [d["outcome"] for d in scan(store, "dev")["drills"]["rebuild-cluster"]] == ["passed"]


def test_the_last_proven_restore_is_read_from_the_rehearsal_records_names(aws, emulator_endpoint):
    """Rehearsal records as `state rehearse --record` writes them: the last proven restore per layer and the
    measured RPO come from the listing; only the record a layer last failed in is read, for its reason."""
    from tests.fleetseed import T0, save_rehearsal

    s3 = aws.client("s3")
    bucket = _bucket()
    seed_environment(s3, "reh", bucket, Seed(drift_records=2, drill_records=2, rehearsals=0, noncurrent_days=30))
    store = ObjectStore(s3, bucket)
    save_rehearsal(store, "reh", T0 - 86400, {"backend": ("proven", 60, None), "network": ("proven", 600, None),
                                              "cluster": ("proven", 120, None)}, index=1)
    # backend untouched for 40 days: its newest version is what was proven, so a restore loses nothing.
    save_rehearsal(store, "reh", T0 - 3600, {"backend": ("proven", 0, None), "network": ("failed", 900,
                   "the passphrase does not decrypt the state"), "cluster": ("drift", 7200, None)}, index=2,
                   ages={"backend": 40 * 86400})
    store.put(".groundctl/rehearsals/reh/planted.json", b"{}")
    spec = parse_spec(spec_data("reh", bucket, emulator_endpoint, production=False, rpo=30), "reh")
    raw, calls = read_counting(spec, store, s3)
    # No drift check of this version has rebuilt the summary from a listing (only the rehearsals wrote to it), so
    # the rehearsals are listed: the summary's GET, three listings, and the failed record, once.
    assert calls.count("GetObject") == 2 and calls.count("ListObjectsV2") == 3, calls
    report = fleet_report([raw], {"reh": spec}, now=T0)
    (row,) = report["environments"]
    layers = row["rehearsals"]["layers"]
    assert list(layers) == ["backend", "network", "cluster"]
    assert layers["network"]["last"]["reason"] == "the passphrase does not decrypt the state"
    net, cluster = layers["network"]["last_proven"], layers["cluster"]["last_proven"]
    assert net["rpo_seconds"] == 600 and net["age_seconds"] == 86400
    assert cluster["outcome"] == "drift" and cluster["rpo_seconds"] == 7200
    rules = {(f["rule"], f.get("layer")): f["level"] for f in row["findings"]}
    assert rules[("rehearsal-failed", "network")] == "warning" and rules[("rpo-exceeded", "cluster")] == "warning"
    assert layers["backend"]["last_proven"]["rpo_seconds"] == 0 and ("rpo-exceeded", "backend") not in rules
    assert ("rehearsal-overdue", None) not in rules
    assert any(f["rule"] == "record-unreadable" and f["key"].endswith("planted.json") for f in row["findings"])
    # The same environment in production: each of them is critical, and `--fail-on critical` would fail.
    prod = parse_spec(spec_data("reh", bucket, emulator_endpoint, production=True, rpo=30, replica="us-west-2"), "reh")
    prod_report = fleet_report([raw], {"reh": prod}, now=T0)
    (prow,) = prod_report["environments"]
    levels = {(f["rule"], f.get("layer")): f["level"] for f in prow["findings"]}
    assert levels[("rehearsal-failed", "network")] == levels[("rpo-exceeded", "cluster")] == "critical"
    assert failing(prod_report, "critical")
    without = {**raw, "rehearsals": {"records": [], "complete": True, "reasons": {}}, "problems": []}
    assert not failing(fleet_report([without], {"reh": spec}, now=T0), "critical")
