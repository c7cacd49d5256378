"""Issue 13 item 1: a forged but well-chained ledger record must not buy a silent rollback.

The bucket holds the evidence: S3's own version order of the stack object, and the versions of each
ledger object (a record is written once, with If-None-Match; a second version means it was rewritten).
"""

from __future__ import annotations

import dataclasses
import json

from bootstrap.records import layout
from bootstrap.records import ledger as led
from recovery.choice.choose import Flags
from recovery.lineage.tamper import tamper_findings
from tests.test_recovery_scenarios import (LAYER, fresh_environment, guide, history, phase, sha,  # noqa: F401
                                           store)
import tests.test_recovery_scenarios as scen


def _forge(store, serial: int, copy_of: int, previous_of: int) -> None:
    read = led.read_ledger(store, LAYER, scen.ENV)
    recs = {r.serial: r for r in read.records}
    forged = dataclasses.replace(recs[copy_of], serial=serial, previous_sha256=recs[previous_of].sha256)
    store.put(layout.ledger_key(LAYER, scen.ENV, serial), forged.to_json())


def test_a_forged_head_pointing_at_an_older_version_is_refused(store, aws):
    engine = history(store, ups=4)
    current = store.get(scen.KEY).body
    _forge(store, 5, copy_of=1, previous_of=4)
    assert led.verify_chain(led.read_ledger(store, LAYER, scen.ENV).records).ok  # the chain itself holds
    t = guide(store, aws, engine)
    choose = phase(t, "choose")
    assert choose.status == "refused" and choose.reason == "TamperedLedger", choose.message
    assert "serial 5" in choose.message and "--allow-tampered-ledger" in choose.next_step
    assert sha(store.get(scen.KEY).body) == sha(current)  # nothing restored
    assert t.exit_code == 3


def test_a_record_overwritten_in_place_is_refused(store, aws):
    engine = history(store, ups=4)
    current = store.get(scen.KEY).body
    _forge(store, 4, copy_of=1, previous_of=3)
    t = guide(store, aws, engine)
    choose = phase(t, "choose")
    assert choose.status == "refused" and choose.reason == "TamperedLedger", choose.message
    assert "serial 4" in choose.message and "rewritten" in choose.message
    assert sha(store.get(scen.KEY).body) == sha(current)


def test_with_the_flag_the_ledger_is_set_aside_and_the_newest_state_kept(store, aws):
    engine = history(store, ups=4)
    current = store.get(scen.KEY).body
    _forge(store, 5, copy_of=1, previous_of=4)
    t = guide(store, aws, engine, flags=Flags(allow_tampered_ledger=True))
    choose = phase(t, "choose")
    assert choose.status == "achieved", choose.message
    assert sha(store.get(scen.KEY).body) == sha(current)  # never rolled back to version 1


def test_an_honest_ledger_shows_no_tampering(store, aws):
    history(store, ups=4)
    read = led.read_ledger(store, LAYER, scen.ENV)
    versions = list(store.versions(scen.KEY))
    ledger_versions = led.ledger_object_versions(store, LAYER, scen.ENV)
    assert tamper_findings(read.records, versions, ledger_versions) == []


def test_tamper_rules_are_pure():
    R = led.LedgerRecord
    def rec(serial, version):
        return R(lineage="l", serial=serial, sha256=f"s{serial}", version_id=version, previous_sha256=None,
                 operation="up", run_id="r", at="2026-01-01T00:00:00Z", git_commit=None, resources=1,
                 stack_key="k")
    @dataclasses.dataclass
    class V:
        key: str
        version_id: str
        delete_marker: bool = False
    listing = [V("k", "v3"), V("k", "v2"), V("k", "v1")]  # S3 lists newest first
    assert tamper_findings([rec(1, "v1"), rec(2, "v2"), rec(3, "v3")], listing, {}) == []
    found = tamper_findings([rec(1, "v1"), rec(2, "v3"), rec(3, "v2")], listing, {})
    assert [f.serial for f in found] == [3] and found[0].code == "order-contradiction"
    found = tamper_findings([rec(1, "v1")], listing, {"x/000000000001.json": 2})
    assert found[0].code == "rewritten-record"
