"""Every record kind passes the same checks, and one that fails them is reported as unreadable with its key,
never shown as "failed: None" (issue 27 §5). A record that says it failed must say why; `fleet status` shows a
drift check or drill whose record cannot be read by the verdict its key names, with that as the reason, and
names the key; an unreadable lock is a record problem like the others."""

from __future__ import annotations

import json
import re
import uuid

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from bootstrap.records.drift import failed_drift_record, load_drift_record, record_name, save_drift_record
from bootstrap.spec import parse_spec
from bootstrap.kit.untrusted import Unreadable
from recovery.evidence.drill_record import load_drill_record
from recovery.evidence.reading import Source, read_fleet
from recovery.fleet.status import fleet_report
from recovery.evidence.rehearsal_record import load_rehearsal_record, rehearsal_record
from tests.conftest import REPO
from tests.fleetseed import T0, Seed, seed_environment, spec_data
from tests.test_hostile_records import _valid

KEY = ".groundctl/x/planted.json"


def _failed(kind: str, reason) -> dict:
    if kind == "rehearsal":  # a scheduled rehearsal that stopped before any layer's verdict
        d = rehearsal_record("local", [], started=1.8e9, finished=1.8e9 + 3, groundctl_version="0.1.0",
                             pulumi_version=None, reason="stand-in", rehearsal_id="20270115T080000Z-abc123")
        return d | {"reason": reason}
    if kind == "drift":
        d = _valid("drift") | {"outcome": "failed", "drift": None, "reason": reason}
    else:
        d = _valid("drill")
        d["verdict"] = d["verdict"] | {"outcome": "failed", "reason": reason}
    return {k: v for k, v in d.items() if v is not None or k == "drift"} if reason is None else d


LOADERS = {"drift": load_drift_record, "drill": load_drill_record, "rehearsal": load_rehearsal_record}


@pytest.mark.parametrize("kind", sorted(LOADERS))
@pytest.mark.parametrize("reason", [None, "", "   "])
def test_a_record_that_failed_without_saying_why_is_unreadable_naming_its_key(kind, reason):
    with pytest.raises(Unreadable) as info:
        LOADERS[kind](json.dumps(_failed(kind, reason)).encode(), KEY)
    assert info.value.source == KEY and "reason" in info.value.reason
    assert LOADERS[kind](json.dumps(_failed(kind, "the preview failed")).encode(), KEY)


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_an_outcome_no_writer_uses_is_unreadable(kind):
    d = _failed(kind, "why")
    (d if kind in ("drift", "rehearsal") else d["verdict"])["outcome"] = "succeeded-ish"
    with pytest.raises(Unreadable, match="not one of"):
        LOADERS[kind](json.dumps(d).encode(), KEY)


@pytest.mark.parametrize("reason", [None, " "])
def test_a_rehearsed_layer_that_failed_without_saying_why_is_unreadable(reason):
    d = _failed("rehearsal", "why")
    d["layers"] = [{"layer": "network", "outcome": "failed", "reason": reason, "skipped_reason": None,
                    "failed_phase": "choose", "age_seconds": None, "seconds": {}}]
    with pytest.raises(Unreadable, match="'reason' says nothing"):
        load_rehearsal_record(json.dumps(d).encode(), KEY)
    d["layers"][0]["reason"] = "every copy is damaged"
    assert load_rehearsal_record(json.dumps(d).encode(), KEY)["layers"][0]["outcome"] == "failed"


def test_a_drill_in_progress_and_a_passing_one_need_no_reason():
    for outcome in ("running", "passed", "dry-run"):
        d = _valid("drill")
        d["verdict"] = d["verdict"] | {"outcome": outcome, "reason": ""}
        assert load_drill_record(json.dumps(d).encode(), KEY)["verdict"]["outcome"] == outcome


def test_every_loader_checks_a_verdict_with_the_shared_check():
    """A record kind added later reads its outcome through `untrusted.outcome` too, not as plain text."""
    loaders = [p for floor in ("bootstrap", "recovery") for p in (REPO / floor).rglob("*.py")
               if "load_record(" in p.read_text()]
    assert len(loaders) >= 5
    for path in loaders:
        assert not re.search(r"\btext\([^)]*[\"']outcome[\"']", path.read_text()), path


# -- fleet status ----------------------------------------------------------------------------------------


@pytest.mark.emulator
def test_fleet_status_names_each_unreadable_record_and_never_shows_none(aws, emulator_endpoint):
    s3 = aws.client("s3")
    bucket = f"rc-{uuid.uuid4().hex[:18]}"
    seed_environment(s3, "checks", bucket, Seed(drift_records=3, drill_records=4, noncurrent_days=30))
    store = ObjectStore(s3, bucket)
    # The newest drift check failed, by its name; its body says nothing of why.
    failed = failed_drift_record("checks", "boom", clock=lambda: T0 + 30 * 86400, check_id="c-last")
    drift_key = save_drift_record(store, failed)
    store.put(drift_key, json.dumps({k: v for k, v in failed.items() if k != "reason"}).encode())
    # The newest rebuild drill failed, by its name; its body is not JSON. An older one passed.
    drill_id = "20270101T000000Z-rebuild-cluster-abcdef"
    drill_key = layout.drill_key("checks", f"{drill_id}--failed-700s")
    store.put(drill_key, b"{not json")
    # A lock object nobody can read.
    store.put(layout.lock_key("checks"), b'"a string"')

    spec = parse_spec(spec_data("checks", bucket, emulator_endpoint), "checks")
    report = fleet_report(read_fleet([Source(spec, store, s3)]), {"checks": spec}, now=T0 + 31 * 86400)
    (row,) = report["environments"]
    said = json.dumps(row)
    assert "None" not in " ".join(f["what"] for f in row["findings"]), row["findings"]
    unreadable = {f["key"]: f["what"] for f in row["findings"] if f["rule"] == "record-unreadable"}
    assert set(unreadable) == {drift_key, drill_key, layout.lock_key("checks")}, unreadable
    assert "field 'outcome' is 'failed' but field 'reason' says nothing" in unreadable[drift_key]
    assert "not valid JSON" in unreadable[drill_key]
    (drift,) = [f for f in row["findings"] if f["rule"] == "drift-check-failed"]
    assert "its record cannot be read" in drift["what"]
    last = row["drills"]["per_kind"]["rebuild-cluster"]["last"]
    assert last["drill_id"] == drill_id and last["verdict"] == "failed"  # not the older passing one
    assert "its record cannot be read" in last["reason"]
    assert "failed: None" not in said and "(None)" not in said
