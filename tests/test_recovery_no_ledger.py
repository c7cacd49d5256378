"""A bucket without a ledger: verdicts that are never falsely green (issue 18 §1).

Without a ledger, lineage and serial are unknown, so `state verify` says so (exit 5) instead of "OK"; a
state whose URNs name another stack or project is never a candidate, ledger or not; and a copy that is
byte-identical to the current state is the current state, not something to restore.
"""

from __future__ import annotations

import json
import time

import pytest

import tests.test_recovery_scenarios as sc
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import ledger as led
from bootstrap.records import layout
from tests.test_cli_state_inspect import groundctl
from tests.test_guide import spec_file  # noqa: F401 - fixture


@pytest.fixture
def store(aws, bucket):
    return ObjectStore(aws.client("s3"), bucket)


@pytest.fixture(autouse=True)
def env(monkeypatch):
    import uuid

    name = f"n{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sc, "ENV", name)
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, name))
    return name


def drop_ledger(store) -> None:
    for key, _s, _m in list(store.keys(layout.ledger_prefix(sc.LAYER, sc.ENV))):
        store.delete(key)


def foreign(body: bytes) -> bytes:
    """The same state with every URN naming another stack and project (as a state copied from there)."""
    return body.replace(f"urn:pulumi:{sc.ENV}::{sc.LAYER}::".encode(), b"urn:pulumi:prod::billing::")


def next_second() -> None:
    """S3 times have one-second resolution: what is written after this is listed as newer than what came before."""
    time.sleep(1.05 - time.time() % 1)


def verify(spec, endpoint, *extra):
    return groundctl("state", "verify", str(spec), "network", *extra, "--endpoint-url", endpoint)


def test_state_verify_without_a_ledger_is_unverified_never_ok(store, aws, spec_file, emulator_endpoint):
    sc.history(store)
    drop_ledger(store)
    r = verify(spec_file, emulator_endpoint)
    assert r.returncode == 5, r.stdout + r.stderr
    assert "OK" not in r.stdout and "intact ledger" not in r.stdout
    assert "UNVERIFIED" in r.stdout and "lineage and serial are unknown" in " ".join(r.stdout.split())
    data = json.loads(verify(spec_file, emulator_endpoint, "--json").stdout)
    assert (data["verdict"], data["ok"], data["problems"]) == ("unverified", False, [])
    assert "no ledger" in data["unverified_reason"]


def test_state_verify_flags_a_state_of_another_stack(store, aws, spec_file, emulator_endpoint):
    sc.history(store)
    store.put(sc.KEY, foreign(store.get(sc.KEY).body))
    for ledgered in (True, False):
        if not ledgered:
            drop_ledger(store)
        r = verify(spec_file, emulator_endpoint, "--json")
        data = json.loads(r.stdout)
        assert r.returncode == 1 and data["verdict"] == "problems"
        problem = next(p for p in data["problems"] if p["code"] == "foreign-stack")
        assert problem["stacks"] == ["prod::billing"] and "another stack's state" in problem["message"]


def test_without_a_ledger_another_stacks_state_is_never_restored(store, aws):
    engine = sc.history(store)
    ours = store.get(sc.KEY).body
    drop_ledger(store)
    next_second()
    store.put(sc.KEY, foreign(ours))  # the newest copy is another stack's
    store.delete(sc.KEY)              # and then the state is lost
    t = sc.guide(store, aws, engine)
    choose = sc.phase(t, "choose")
    assert choose.details["chosen"]["foreign_stacks"] == [] and choose.status == "achieved"
    assert any("another stack (prod::billing)" in s["reason"] for s in choose.details["skipped"])
    assert store.get(sc.KEY).body == ours  # this stack's own newest state came back



def test_with_only_another_stacks_state_left_nothing_is_restored_without_the_flag(store, aws, monkeypatch):
    sc.history(store)
    theirs = foreign(store.get(sc.KEY).body)
    fresh = f"{sc.ENV}b"  # a stack with no ledger ever, whose only copy is another stack's state
    monkeypatch.setattr(sc, "ENV", fresh)
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, fresh))
    store.put(sc.KEY, theirs)
    store.delete(sc.KEY)
    engine = sc.BucketEngine(fresh, store=store)
    t = sc.guide(store, aws, engine)
    choose = sc.phase(t, "choose")
    assert (choose.status, choose.reason) == ("refused", "ForeignStackRefused") and t.exit_code == 3
    assert "--allow-foreign-stack" in choose.next_step and "stack prod of project billing" in choose.message
    assert sc.phase(t, "restore").attempted is False and led.read_ledger(store, sc.LAYER, fresh).missing
    assert store.get(sc.KEY) is None


def test_without_a_ledger_a_backup_identical_to_the_current_state_is_not_restored(store, aws):
    engine = sc.history(store)
    drop_ledger(store)
    current = store.get(sc.KEY).body
    next_second()
    # Pulumi's backup of the very same state, written after it (a `pulumi stack import` or `cancel` leaves one).
    store.put(f"{layout.backups_prefix(sc.LAYER, sc.ENV)}{sc.ENV}.{9 * 10 ** 18}.json", current)
    before = sc.all_versions(store)
    t = sc.guide(store, aws, engine)
    choose = sc.phase(t, "choose")
    assert choose.reason == "CurrentIsNewest" and choose.details["chosen"]["source"] == "current"
    assert sc.phase(t, "restore").status == "skipped"
    assert {x for x in sc.all_versions(store) if not x[0].startswith(".groundctl/locks/")} == \
        {x for x in before if not x[0].startswith(".groundctl/locks/")}
    assert led.read_ledger(store, sc.LAYER, sc.ENV).missing  # no redundant restore record
