"""Issue 37 §1: the rehearsal proves a state with pending operations instead of failing it at the engine's
pending-operations refusal. The real CLI on a state a killed `pulumi up` left is the engine tier's
(tests/test_engine_tier_rehearsal_pending.py); here the engine's rule for a private copy, the judgment of the
preview and what the record keeps."""

from __future__ import annotations

import json

import pytest

from bootstrap.engine.pending import PendingOperationsLeft
from recovery.evidence.rehearsal_judge import (Attempt, Decrypt, LayerResult, Preview, pending_of, preview_from_row,
                                               refusal_reason)
from recovery.evidence.rehearsal_record import load_rehearsal_record, rehearsal_record
from tests.test_engine_cli_calls import LINEAGE, engine_cli  # noqa: F401 - fixture

ROOT = "urn:pulumi:dev::network::pulumi:pulumi:Stack::network-dev"
EIP = "urn:pulumi:dev::network::aws:ec2/eip:Eip::nat-0"
VPC = "urn:pulumi:dev::network::aws:ec2/vpc:Vpc::vpc"
PENDING = [{"type": "creating", "resource": {"urn": EIP, "type": "aws:ec2/eip:Eip"}},
           {"type": "updating", "resource": {"urn": VPC, "type": "aws:ec2/vpc:Vpc"}}]


def _state(engine, pending) -> dict:
    return {"resources": [{"type": "pulumi:pulumi:Stack", "urn": ROOT, "outputs": {}}],
            "secrets_providers": {"type": "cloud", "state": {"url": engine.settings.secrets_provider}},
            "pending_operations": pending}


def test_a_private_copy_is_previewed_whatever_its_pending_operations_and_never_updated(engine_cli):
    engine, cli, _made = engine_cli
    state = _state(engine, PENDING)
    stored = type(engine)(engine.spec, lineage_for=lambda layer: LINEAGE, state_of=lambda layer: state)
    with pytest.raises(PendingOperationsLeft):  # the environment's own state: refused, as before
        stored.preview("network")
    assert cli == []
    copy = type(engine)(engine.spec, lineage_for=lambda layer: LINEAGE, state_of=lambda layer: state,
                        private_copy=True)
    copy.preview("network")
    assert cli == ["preview"]
    with pytest.raises(PendingOperationsLeft):  # a preview only: nothing updates the copy either
        copy.up("network")
    assert cli == ["preview"]


def test_the_pending_operations_are_split_as_a_recovery_meets_them_and_made_inert():
    pending = pending_of({"pending_operations": PENDING + [
        {"type": "creating", "resource": {"urn": "urn:pulumi:dev::network::t::evil\x1b[2J"}}]})
    assert pending.creates == ({"kind": "creating", "urn": EIP},
                               {"kind": "creating", "urn": "urn:pulumi:dev::network::t::evil\\x1b[2J"})
    assert pending.others == ({"kind": "updating", "urn": VPC},)
    assert pending_of({}).to_dict() == {"creates": [], "others": []}
    reason = refusal_reason("serial 7", pending)
    assert "would refuse" in reason and f"updating {VPC}" in reason and EIP not in reason


def _row(*changes, state="drift") -> dict:
    return {"layer": "network", "state": state, "summary": "1 to create", "counts": {"create": len(changes)},
            "changes": [{"urn": u, "type": "t", "operation": op, "diff_keys": []} for op, u in changes]}


def test_the_creates_an_interrupted_update_never_finished_are_no_drift_and_anything_else_still_is():
    unfinished = frozenset({EIP})
    proven = preview_from_row(_row(("create", EIP), state="not deployed"), unfinished)
    assert (proven.result, proven.changes, proven.changes_total) == ("no-change", (), 0)
    assert "1 create(s) the interrupted update never finished" in proven.summary
    before = preview_from_row(_row(("create", EIP), state="not deployed"))
    assert before.result == "drift"  # as it was judged without the pending creates
    drift = preview_from_row(_row(("create", EIP), ("update", VPC)), unfinished)
    assert drift.result == "drift" and [c["urn"] for c in drift.changes] == [VPC]
    replaced = preview_from_row(_row(("replace", EIP)), unfinished)  # only a create is the unfinished one
    assert replaced.result == "drift"


def test_the_record_keeps_each_pending_operation_with_its_kind_and_urn_and_reads_it_back():
    pending = pending_of({"pending_operations": PENDING})
    version = {"key": ".pulumi/stacks/network/dev.json", "version_id": "v1", "source": "current", "serial": 3,
               "sha256": "s", "lineage": "L", "last_modified": "2026-12-01T00:00:00Z", "label": "serial 3"}
    attempt = Attempt(version, 10.0, Decrypt("ok", "passphrase"), Preview("no-change", "no change"), {"preview": 1.0},
                      "pending", refusal_reason("serial 3", pending), pending)
    record = rehearsal_record("dev", [LayerResult("network", attempt)], started=1_800_000_000.0,
                              finished=1_800_000_010.0, groundctl_version="0", pulumi_version="v3.259.0")
    layer = record["layers"][0]
    assert (layer["outcome"], layer["failed_phase"]) == ("failed", "pending")
    assert layer["pending"] == {"creates": [{"kind": "creating", "urn": EIP}], "others": [{"kind": "updating",
                                                                                           "urn": VPC}]}
    back = load_rehearsal_record(json.dumps(record).encode(), "k.json")
    assert back["layers"][0]["pending"] == layer["pending"]
    record["layers"][0]["pending"]["others"][0]["urn"] = "bad\x07"
    with pytest.raises(Exception, match="urn"):
        load_rehearsal_record(json.dumps(record).encode(), "k.json")
