"""Pulumi's own stack locks (issue 18 §2): shown with their holder, judged alive or dead by the proof groundctl
uses for its own lock, removed one stack at a time only when provably dead (a copy kept), and a restore
refused while one is held. The engine tier (test_engine_tier_pulumi_lock.py) shows the same with a real
`pulumi up` killed mid-update."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.engine.errors import StackLocked
from bootstrap.errors import Refused
from bootstrap.records import layout
from bootstrap.records.lock_object import iso
from bootstrap.records.lock_status import lock_status
from bootstrap.records.pulumi_locks import (ALIVE, DEAD, UNKNOWN, break_decision, break_locks, judge, parse,
                                            refuse_restore_under_lock)
from tests.conftest import local_spec_with_bucket
from tests.test_cli_errors import groundctl
from tests.test_restore import append, body, lock, plan_for, seed
from recovery.restore import restore

HOST = socket.gethostname()


@pytest.fixture
def store(aws, bucket) -> ObjectStore:
    return ObjectStore(aws.client("s3"), bucket)


@pytest.fixture
def dead_pid():
    """A pid that existed on this host and is gone now: a process that ran and was reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _plant(store, layer: str, env: str, *, pid: int, host: str = HOST, name: str = "0b7c") -> str:
    key = f"{layout.pulumi_locks_prefix(layer, env)}{name}.json"
    store.put(key, json.dumps({"pid": pid, "username": "ops", "hostname": host,
                               "timestamp": "2026-12-03T15:01:51.123456789Z"}).encode())
    return key


def test_judged_by_the_same_proof_as_groundctls_own_lock():
    lock = parse("network", "k", json.dumps({"pid": 7, "username": "u", "hostname": "h1",
                                              "timestamp": "2026-12-03T15:01:51.123456789+01:00"}).encode())
    assert judge(lock, "h1", lambda pid: False).holder_state == DEAD
    assert judge(lock, "h1", lambda pid: True).holder_state == ALIVE
    other = judge(lock, "h2", lambda pid: False)
    assert other.holder_state == UNKNOWN and "another host (h1)" in other.reason and "no heartbeat" in other.reason
    broken = parse("network", "k", b'{"pid": "seven"}')
    assert judge(broken, "h1", lambda pid: False).holder_state == UNKNOWN and "pid" in broken.unreadable


def test_a_holder_shown_alive_is_never_broken_even_with_force():
    judged = lambda host, alive: judge(parse("n", "k", json.dumps(  # noqa: E731
        {"pid": 7, "username": "u", "hostname": "h1", "timestamp": "2026-01-01T00:00:00Z"}).encode()), host, alive)
    assert break_decision((judged("h1", lambda p: True),), force=True) is not None
    assert break_decision((judged("h1", lambda p: False),), force=False) is None
    assert break_decision((judged("h2", lambda p: False),), force=False) is not None
    assert break_decision((judged("h2", lambda p: False),), force=True) is None


def test_lock_status_shows_the_holder_and_whether_it_is_alive(store, dead_pid):
    _plant(store, "network", "st", pid=dead_pid)
    _plant(store, "cluster", "st", pid=os.getpid())
    by_layer = {p.layer: p for p in lock_status(store, "st").pulumi_locks}
    assert by_layer["network"].holder_state == DEAD and f"pid {dead_pid} is gone" in by_layer["network"].reason
    assert by_layer["cluster"].holder_state == ALIVE
    assert by_layer["network"].hostname == HOST and by_layer["network"].username == "ops"


def test_break_removes_only_that_stacks_dead_lock_and_keeps_a_copy(store, dead_pid):
    mine = _plant(store, "network", "st", pid=dead_pid)
    other_stack = _plant(store, "network", "other", pid=dead_pid)
    other_layer = _plant(store, "cluster", "st", pid=dead_pid)
    broken = break_locks(store, "st", "network", force=False, by="ops@here", at=iso(0), this_host=HOST,
                         alive=lambda pid: False)
    assert [p.key for p in broken] == [mine] and store.get(mine) is None
    assert store.get(other_stack) is not None and store.get(other_layer) is not None
    (kept,) = [k for k, _s, _m in store.keys(".groundctl/locks/broken/st/")]
    record = json.loads(store.get(kept).body)
    assert record["key"] == mine and record["forced"] is False and json.loads(record["lock_body"])["pid"] == dead_pid


def test_break_refuses_a_live_holder_and_an_unprovable_one_without_force(store):
    live = _plant(store, "network", "st", pid=os.getpid())
    with pytest.raises(Refused, match="never removed"):
        break_locks(store, "st", "network", force=True, by="ops", at=iso(0), this_host=HOST, alive=lambda p: True)
    assert store.get(live) is not None
    elsewhere = _plant(store, "cluster", "st", pid=1, host="build-7")
    with pytest.raises(Refused, match="--pulumi cluster --force"):
        break_locks(store, "st", "cluster", force=False, by="ops", at=iso(0), this_host=HOST, alive=lambda p: False)
    assert store.get(elsewhere) is not None
    break_locks(store, "st", "cluster", force=True, by="ops", at=iso(0), this_host=HOST, alive=lambda p: False)
    assert store.get(elsewhere) is None


def test_a_restore_is_refused_while_pulumi_holds_the_stack(store, dead_pid):
    vids = seed(store)
    store.put(layout.stack_key("network", "dev"), b"garbage")
    key = _plant(store, "network", "dev", pid=os.getpid())
    with pytest.raises(Refused, match="overwrite it at its next checkpoint") as refused:
        restore(store, plan_for(store, vids[-1]), lock_factory=lock, run_id="rec", append_record=append)
    assert "Wait for that update" in refused.value.message
    assert store.get(layout.stack_key("network", "dev")).body == b"garbage"  # nothing written
    store.delete(key)
    _plant(store, "network", "dev", pid=dead_pid)
    with pytest.raises(Refused, match="lock break dev --pulumi network"):
        refuse_restore_under_lock(store, "network", "dev", HOST, lambda pid: False)
    for k, _s, _m in list(store.keys(layout.pulumi_locks_prefix("network", "dev"))):
        store.delete(k)
    restore(store, plan_for(store, vids[-1]), lock_factory=lock, run_id="rec", append_record=append)
    assert store.get(layout.stack_key("network", "dev")).body == body(3)


def test_the_stack_locked_message_names_the_command_that_removes_that_lock():
    message = StackLocked("dev", "network", ["alice@build-7 (pid 4242, since 2026-12-02T09:58:01Z)"]).message
    assert "`groundctl lock break dev --pulumi network`" in message and "never `pulumi cancel`" in message


def test_the_cli_shows_breaks_and_refuses(monkeypatch, capsys, store, bucket, emulator_endpoint, tmp_path, dead_pid):
    spec = str(local_spec_with_bucket(tmp_path, bucket))
    key = _plant(store, "network", "local", pid=dead_pid)
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
