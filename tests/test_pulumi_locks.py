"""Pulumi's own stack locks (issue 18 §2, issue 27 §3): shown with their holder, judged alive, dead or unknown
(dead only where groundctl's lock history places the holder in this boot and pid namespace), removed one stack
at a time only when provably dead or with --force (a copy kept), never while seen alive, and a restore refused
while one is held. The engine tier (test_engine_tier_pulumi_lock.py) shows the same with a real `pulumi up`
killed mid-update."""

from __future__ import annotations

import json
import os
import time

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.engine.errors import StackLocked
from bootstrap.kit.errors import Refused
from bootstrap.records import layout, proc_probe
from bootstrap.records.liveness import ALIVE, DEAD, GONE, UNKNOWN, Place, Process
from bootstrap.records.lock_history import LockHistory
from bootstrap.records.lock_object import LockInfo, iso
from bootstrap.records.lock_status import lock_status
from bootstrap.records.pulumi_locks import break_decision, break_locks, judge, parse, refuse_restore_under_lock
from tests.conftest import local_spec_with_bucket
from tests.test_cli_errors import groundctl
from tests.test_restore import append, body, lock, plan_for, seed
from recovery.restoring.restore import restore

HERE = proc_probe.here()
HOST = HERE.host
DAY = 86400.0


@pytest.fixture
def store(aws, bucket) -> ObjectStore:
    return ObjectStore(aws.client("s3"), bucket)


def _plant(store, layer: str, env: str, *, pid: int, host: str = HOST, name: str = "0b7c",
           at: float | None = None) -> str:
    """Pulumi's lock file as Pulumi writes it (pkg/backend/diy/lock.go:39-44), by default just now."""
    key = f"{layout.pulumi_locks_prefix(layer, env)}{name}.json"
    stamp = iso(time.time() if at is None else at).replace("Z", "456789Z")  # Go writes nanoseconds
    store.put(key, json.dumps({"pid": pid, "username": "ops", "hostname": host, "timestamp": stamp}).encode())
    return key


def _groundctl_ran(store, env: str, *, at: float, place: Place = HERE) -> None:
    """A groundctl run held the environment lock around `at` from `place`, and released it: its versions stay."""
    info = LockInfo(env, "ops", place.host, 4242, "run-then", iso(at - 30), iso(at + 30), 120, place.boot_id,
                    place.pid_ns)
    store.put(layout.lock_key(env), info.body())
    store.delete(layout.lock_key(env))


# -- the judgement, pure over plain facts ----------------------------------------------------------

BOOT = "c4b6a71f-0913-4811-a305-068e6082ab5e"
ME = Place("h1", BOOT, 4026531836)
TAKEN = 1_796_000_000.0
LOCK = parse("network", "k", json.dumps({"pid": 7, "username": "u", "hostname": "h1",
                                         "timestamp": "2026-12-01T08:53:20.000000001Z"}).encode())


def _judged(seen=GONE, placed=None, here=ME, lock=LOCK):
    return judge(lock, here, lambda pid: seen, lambda host, at: placed)


def test_judged_where_groundctls_lock_history_places_the_holder():
    assert _judged(GONE, placed=ME).holder_state == DEAD
    assert _judged(Process(True, TAKEN - 60), placed=ME).holder_state == ALIVE
    assert _judged(Process(True, TAKEN - 60), placed=None).holder_state == ALIVE  # may be it: never removed
    unplaced = _judged(GONE, placed=None)
    assert unplaced.holder_state == UNKNOWN and "Pulumi's lock records neither" in unplaced.reason
    other = _judged(GONE, here=Place("h2", BOOT, ME.pid_ns))
    assert other.holder_state == UNKNOWN and "another host (h1)" in other.reason and "no heartbeat" in other.reason
    broken = parse("network", "k", b'{"pid": "seven"}')
    assert _judged(GONE, lock=broken).holder_state == UNKNOWN and "pid" in broken.unreadable


def test_a_pid_now_held_by_a_process_started_after_the_lock_is_dead_where_placed():
    later = Process(True, TAKEN + 3 * DAY)
    dead = _judged(later, placed=ME)
    assert dead.holder_state == DEAD and "given again" in dead.reason
    # Unplaced, it is not proven dead, but no longer "alive" either: --force removes it.
    assert _judged(later, placed=None).holder_state == UNKNOWN


def test_the_same_host_name_in_another_pid_namespace_or_boot_is_unknown_not_dead():
    for placed in (Place("h1", BOOT, ME.pid_ns + 1), Place("h1", "0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6", ME.pid_ns)):
        for seen in (GONE, Process(True, TAKEN - 60), Process(True, TAKEN + DAY)):
            judged = _judged(seen, placed=placed)
            assert judged.holder_state == UNKNOWN, (placed, seen, judged.reason)


def test_a_holder_shown_alive_is_never_broken_even_with_force():
    alive, dead, unknown = (_judged(Process(True, TAKEN - 60), placed=ME), _judged(GONE, placed=ME),
                            _judged(GONE, placed=None))
    assert break_decision((alive,), force=True) is not None
    assert break_decision((dead,), force=False) is None
    assert break_decision((unknown,), force=False) is not None
    assert break_decision((unknown,), force=True) is None


def test_the_history_places_a_holder_only_inside_a_run_that_recorded_its_place(store):
    _groundctl_ran(store, "hist", at=TAKEN)
    history = LockHistory(store, "hist")
    assert history.place_at(HOST, TAKEN) == HERE
    assert history.place_at(HOST, TAKEN + 3600) is None  # after that run's lock expired
    assert history.place_at("elsewhere", TAKEN) is None
    _groundctl_ran(store, "old", at=TAKEN, place=Place(HOST))  # an older groundctl: no boot, no namespace
    assert LockHistory(store, "old").place_at(HOST, TAKEN) is None
    assert LockHistory(store, "never").place_at(HOST, TAKEN) is None


# -- against the emulator ------------------------------------------------------------------------------


def test_lock_status_shows_the_holder_and_whether_it_is_alive(store, dead_pid):
    then = time.time() - 600
    _groundctl_ran(store, "st", at=then)
    _plant(store, "network", "st", pid=dead_pid, at=then)
    _plant(store, "cluster", "st", pid=os.getpid())
    by_layer = {p.layer: p for p in lock_status(store, "st").pulumi_locks}
    assert by_layer["network"].holder_state == DEAD and f"pid {dead_pid} is gone" in by_layer["network"].reason
    assert by_layer["cluster"].holder_state == ALIVE
    assert by_layer["network"].hostname == HOST and by_layer["network"].username == "ops"


def test_break_removes_only_that_stacks_dead_lock_and_keeps_a_copy(store, dead_pid):
    then = time.time() - 600
    _groundctl_ran(store, "st", at=then)
    mine = _plant(store, "network", "st", pid=dead_pid, at=then)
    other_stack = _plant(store, "network", "other", pid=dead_pid, at=then)
    other_layer = _plant(store, "cluster", "st", pid=dead_pid, at=then)
    broken = break_locks(store, "st", "network", force=False, by="ops@here", at=iso(0))
    assert [p.key for p in broken] == [mine] and store.get(mine) is None
    assert store.get(other_stack) is not None and store.get(other_layer) is not None
    (kept,) = [k for k, _s, _m in store.keys(".groundctl/locks/broken/st/")]
    record = json.loads(store.get(kept).body)
    assert record["key"] == mine and record["forced"] is False and json.loads(record["lock_body"])["pid"] == dead_pid


def test_break_refuses_a_live_holder_and_an_unprovable_one_without_force(store):
    live = _plant(store, "network", "st", pid=os.getpid())
    with pytest.raises(Refused, match="never removed"):
        break_locks(store, "st", "network", force=True, by="ops", at=iso(0))
    assert store.get(live) is not None
    elsewhere = _plant(store, "cluster", "st", pid=1, host="build-7")
    with pytest.raises(Refused, match="--pulumi cluster --force"):
        break_locks(store, "st", "cluster", force=False, by="ops", at=iso(0))
    assert store.get(elsewhere) is not None
    break_locks(store, "st", "cluster", force=True, by="ops", at=iso(0))
    assert store.get(elsewhere) is None


def test_a_lock_whose_pid_a_later_process_holds_is_removed(store, newcomer):
    # Days ago a groundctl run's update took Pulumi's lock; its pid now belongs to a process started today.
    # Before, that pid kept the lock "alive": never removed, not even with --force.
    then = time.time() - 3 * DAY
    _groundctl_ran(store, "reused", at=then)
    placed = _plant(store, "network", "reused", pid=newcomer, at=then)
    (judged,) = lock_status(store, "reused").pulumi_locks
    assert judged.holder_state == DEAD and "given again" in judged.reason, judged.reason
    break_locks(store, "reused", "network", force=False, by="ops", at=iso(0))
    assert store.get(placed) is None
    # Unplaced (a `pulumi` run by hand, when no groundctl run held the environment), it is unknown: --force
    # removes it, and the copy says so.
    by_hand = _plant(store, "cluster", "reused", pid=newcomer, at=then - DAY)
    with pytest.raises(Refused, match="--pulumi cluster --force"):
        break_locks(store, "reused", "cluster", force=False, by="ops", at=iso(0))
    (removed,) = break_locks(store, "reused", "cluster", force=True, by="ops", at=iso(1))
    assert removed.holder_state == UNKNOWN and store.get(by_hand) is None
    records = [json.loads(store.get(k).body) for k, _s, _m in store.keys(".groundctl/locks/broken/reused/")]
    assert sorted((r["layer"], r["holder_state"], r["forced"]) for r in records) == [
        ("cluster", UNKNOWN, True), ("network", DEAD, False)]


def test_a_holder_in_another_pid_namespace_under_this_host_name_is_not_removed_without_force(store, dead_pid):
    then = time.time() - 600
    _groundctl_ran(store, "pods", at=then, place=Place(HOST, HERE.boot_id, (HERE.pid_ns or 1) + 1))
    key = _plant(store, "network", "pods", pid=dead_pid, at=then)
    (judged,) = lock_status(store, "pods").pulumi_locks
    assert judged.holder_state == UNKNOWN and "another pid namespace" in judged.reason, judged.reason
    with pytest.raises(Refused, match="--force"):
        break_locks(store, "pods", "network", force=False, by="ops", at=iso(0))
    assert store.get(key) is not None


def test_a_restore_is_refused_while_pulumi_holds_the_stack(store, dead_pid):
    vids = seed(store)
    store.put(layout.stack_key("network", "dev"), b"garbage")
    key = _plant(store, "network", "dev", pid=os.getpid())
    with pytest.raises(Refused, match="overwrite it at its next checkpoint") as refused:
        restore(store, plan_for(store, vids[-1]), lock_factory=lock, run_id="rec", append_record=append)
    assert "Wait for that update" in refused.value.message
    assert store.get(layout.stack_key("network", "dev")).body == b"garbage"  # nothing written
    store.delete(key)
    then = time.time() - 600
    _groundctl_ran(store, "dev", at=then)
    _plant(store, "network", "dev", pid=dead_pid, at=then)
    with pytest.raises(Refused, match=r"lock break dev --pulumi network`, then") as dead:
        refuse_restore_under_lock(store, "network", "dev")
    assert "--force" not in dead.value.message
    for k, _s, _m in list(store.keys(layout.pulumi_locks_prefix("network", "dev"))):
        store.delete(k)
    restore(store, plan_for(store, vids[-1]), lock_factory=lock, run_id="rec", append_record=append)
    assert store.get(layout.stack_key("network", "dev")).body == body(3)


def test_the_stack_locked_message_names_the_command_that_removes_that_lock():
    message = StackLocked("dev", "network", ["alice@build-7 (pid 4242, since 2026-12-02T09:58:01Z)"]).message
    assert "`groundctl lock break dev --pulumi network`" in message and "never `pulumi cancel`" in message


def test_the_cli_shows_breaks_and_refuses(monkeypatch, capsys, store, bucket, emulator_endpoint, tmp_path, dead_pid):
    spec = str(local_spec_with_bucket(tmp_path, bucket))
    then = time.time() - 600
    _groundctl_ran(store, "local", at=then)
    key = _plant(store, "network", "local", pid=dead_pid, at=then)
    ep = ("--endpoint-url", emulator_endpoint)
    code, out, err = groundctl(monkeypatch, capsys, "lock", "status", spec, *ep)
    assert code == 0 and f"ops@{HOST} (pid {dead_pid}" in out and "holder dead" in out and key in out, out + err
    code, _, err = groundctl(monkeypatch, capsys, "lock", "break", spec, *ep)
    assert code == 3 and "--pulumi <layer>" in err and "network" in err  # not "not locked" and nothing else
    code, _, err = groundctl(monkeypatch, capsys, "lock", "break", spec, "--pulumi", "netwrk", *ep)
    assert code == 2 and "'netwrk' is not a layer" in err
    code, out, err = groundctl(monkeypatch, capsys, "lock", "break", spec, "--pulumi", "network", "--json", *ep)
    assert code == 0, err
    assert json.loads(out)["broken"][0]["key"] == key and store.get(key) is None
    code, _, err = groundctl(monkeypatch, capsys, "lock", "break", spec, "--pulumi", "network", *ep)
    assert code == 3 and "holds no lock" in err
