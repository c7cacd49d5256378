"""The run record: phases with start/end/outcome, attempted vs achieved, stored, never a secret."""

from __future__ import annotations

import json

import pytest

from bootstrap.kit.errors import EngineError, Refused
from bootstrap.records.layout import run_key
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.runs import REDACTED, new_run_id, redact, start_run


class FakeClock:
    def __init__(self, t: float = 1_800_000_000.0, step: float = 0.5):
        self.t, self.step = t, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_phases_record_start_end_and_outcome():
    clock = FakeClock()
    log = start_run("dev", "up", {"yes": True}, clock=clock, run_id="r1")
    log.plan_layers(["network", "cluster"], "up")
    with log.phase("account") as note:
        note["detail"] = "account 111111111111"
    with log.phase("preview", "network"):
        pass
    with pytest.raises(EngineError):
        with log.phase("up", "network"):
            raise EngineError("Pulumi up of layer 'network' failed: boom.")
    rec = log.record
    assert [(p.name, p.outcome, p.detail) for p in rec.phases] == [("account", "ok", "account 111111111111")]
    assert rec.phases[0].seconds == pytest.approx(0.5)
    net = rec.layer("network")
    assert [(p.name, p.outcome) for p in net.phases] == [("preview", "ok"), ("up", "failed")]
    assert net.phases[1].detail.startswith("Pulumi up of layer 'network' failed")
    assert rec.stopped_at == "network/up"
    assert rec.layer("cluster").achieved == "not-reached" and rec.layer("cluster").attempted == "up"


def test_refusal_is_recorded_as_refused():
    log = start_run("dev", "up", {}, clock=FakeClock(), run_id="r2")
    log.plan_layers(["network"], "up")
    with pytest.raises(Refused):
        with log.phase("gate", "network"):
            raise Refused("not approved")
    assert log.record.layer("network").phases[0].outcome == "refused"


def test_saved_after_each_phase_once_attached_and_redacted(aws, bucket):
    store = ObjectStore(aws.client("s3"), bucket)
    canary = "CANARY-passphrase-7f3a9c"
    log = start_run("dev", "up", {}, clock=FakeClock(), run_id="r3", secret_values=lambda: [canary])
    log.plan_layers(["network"], "up")
    with log.phase("account"):
        pass
    assert store.get(run_key("dev", "r3")) is None  # no sink yet: kept in memory
    log.attach(store.put)
    with log.phase("lock"):  # written before the next phase runs (bootstrap/records/runs.py MUTATING)
        assert [p["name"] for p in json.loads(store.get(run_key("dev", "r3")).body)["phases"]] == ["account", "lock"]
    with pytest.raises(EngineError):
        with log.phase("up", "network"):
            raise EngineError(f"pulumi said: passphrase {canary} is wrong")
    log.finish("failed", f"stopped: {canary}")
    body = store.get(run_key("dev", "r3")).body.decode()
    assert canary not in body and REDACTED in body
    doc = json.loads(body)
    assert doc["outcome"] == "failed" and doc["ended_at"] and doc["stopped_at"] == "network/up"


def test_run_ids_sort_by_time_and_are_unique():
    ids = [new_run_id(lambda: 1_800_000_000.0) for _ in range(50)]
    assert len(set(ids)) == 50
    assert new_run_id(lambda: 1_800_000_001.0) > new_run_id(lambda: 1_800_000_000.0)


def test_redact_longest_first_and_ignores_tiny_values():
    assert redact("key=abcdef123456 part=abcdef", ["abcdef", "abcdef123456"]) == f"key={REDACTED} part={REDACTED}"
    assert redact("a b c", ["a"]) == "a b c"


def test_stored_record_redacts_secrets_that_json_escapes():
    # A deploy key has newlines, a passphrase may have quotes or non-ASCII: in the JSON record they
    # appear escaped, and must be redacted in that form too.
    canary = 'CANARY "pass\\phrase"\nline two é'
    log = start_run("dev", "up", {}, clock=FakeClock(), run_id="r4", secret_values=lambda: [canary])
    log.plan_layers(["network"], "up")
    with pytest.raises(EngineError):
        with log.phase("up", "network"):
            raise EngineError(f"pulumi said: {canary}")
    body = log.to_bytes().decode()
    assert json.dumps(canary)[1:-1] not in body and canary not in body
    assert REDACTED in body
