"""The environment lock against the emulator: contention, heartbeat, loss, status and break."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from bootstrap.records import layout, proc_probe
from bootstrap.kit.errors import LockHeld, Refused
from bootstrap.records.liveness import ALIVE, DEAD, GONE, STALE, UNKNOWN, Place, Process, lock_verdict
from bootstrap.records.lock_object import LockInfo, iso
from bootstrap.records.lock_status import break_lock, lock_status
from bootstrap.records.locks import EnvironmentLock
from bootstrap.aws.objectstore import ObjectStore

HERE = proc_probe.here()
DAY = 86400.0


@pytest.fixture
def store(aws, bucket) -> ObjectStore:
    return ObjectStore(aws.client("s3"), bucket)


def test_twenty_threads_exactly_one_wins_and_losers_name_it(store):
    barrier = threading.Barrier(20)
    won, held = [], []
    mutex = threading.Lock()

    def contender(i: int) -> None:
        lock = EnvironmentLock(store, "dev", f"run-{i:02d}", host="h", pid=1000 + i)
        barrier.wait()
        try:
            lock.acquire()
            with mutex:
                won.append(lock)
        except LockHeld as exc:
            with mutex:
                held.append(exc)

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(held) == 19
    winner = won[0].info
    assert all(winner.run_id in e.holder and e.environment == "dev" for e in held)
    assert json.loads(store.get(layout.lock_key("dev")).body)["run_id"] == winner.run_id
    assert won[0].release() is True
    assert store.get(layout.lock_key("dev")) is None


def test_context_manager_heartbeats_and_releases(store):
    with EnvironmentLock(store, "hb", "run-1", ttl_seconds=5, heartbeat_seconds=0.1) as lock:
        first = lock.info.heartbeat_at
        time.sleep(0.5)
        assert lock.info.heartbeat_at != first
        stored = LockInfo.parse(store.get(layout.lock_key("hb")).body)
        # The heartbeat thread may beat again between the read and the comparison: the stored beat is
        # ours and newer than the first, whichever beat it is.
        assert stored.run_id == "run-1" and stored.heartbeat_at > first
        assert not lock.lost.is_set()
        with pytest.raises(LockHeld) as err:
            EnvironmentLock(store, "hb", "run-2").acquire()
        assert "run-1" in err.value.holder
    assert store.get(layout.lock_key("hb")) is None


def test_released_even_when_the_body_raises(store):
    with pytest.raises(RuntimeError):
        with EnvironmentLock(store, "boom", "run-1"):
            raise RuntimeError("the run failed")
    assert store.get(layout.lock_key("boom")) is None


def test_heartbeat_notices_a_lock_taken_over(store):
    # A beat between the break's read and its delete rightly makes the break refuse (the lock changed): at a load
    # of 10 a 0.1 s heartbeat landed there. One beat in 4 s leaves the break its window; the wait is generous.
    lock = EnvironmentLock(store, "lost", "run-1", ttl_seconds=5, heartbeat_seconds=4)
    with lock:
        break_lock(store, "lost", force=True, by="ops")
        EnvironmentLock(store, "lost", "run-2", settle_seconds=0).acquire()
        assert lock.lost.wait(60)
        assert "run-2" in lock.lost_reason
        with pytest.raises(Refused):
            lock.check()
    # the new holder's lock was not removed by the old run's release
    assert LockInfo.parse(store.get(layout.lock_key("lost")).body).run_id == "run-2"


def _old_lock(store, env, *, host, pid, age, ttl=60, taken=None, place: Place = Place("")):
    now = time.time()
    info = LockInfo(env, "alice", host, pid, "run-old", iso(taken if taken is not None else now - age - 10),
                    iso(now - age), ttl, place.boot_id, place.pid_ns)
    store.put(layout.lock_key(env), info.body())
    return info


def _since_before_me() -> float:
    """A lock time after this process started: the process may be its holder."""
    return proc_probe.process(os.getpid()).started + 1


def _aged(seconds):
    return lambda obj, info, now: seconds


def test_break_refused_while_heartbeat_fresh(store):
    _old_lock(store, "fresh", host="elsewhere", pid=1, age=5)
    with pytest.raises(Refused) as err:
        break_lock(store, "fresh", force=False, by="bob")
    assert "run-old" in str(err.value) and "--force" in str(err.value)
    assert store.get(layout.lock_key("fresh")) is not None
    st = lock_status(store, "fresh")
    assert st.holder.run_id == "run-old" and st.stale is False


def test_a_live_holder_is_never_broken_without_force_even_past_its_ttl(store):
    # Its own process, running since before the lock, in this boot and pid namespace: its heartbeat is late
    # (two TTLs), not gone.
    _old_lock(store, "alive", host=HERE.host, pid=os.getpid(), age=120, taken=_since_before_me(), place=HERE)
    with pytest.raises(Refused) as err:
        break_lock(store, "alive", force=False, by="bob", age_of=_aged(120))
    assert str(os.getpid()) in str(err.value) and "Wait for that run" in str(err.value)
    assert lock_status(store, "alive", age_of=_aged(120)).verdict == ALIVE
    assert store.get(layout.lock_key("alive")) is not None
    break_lock(store, "alive", force=True, by="bob", age_of=_aged(120))
    assert store.get(layout.lock_key("alive")) is None


def test_break_allowed_when_the_holders_pid_is_gone_from_its_place(store, dead_pid):
    _old_lock(store, "dead", host=HERE.host, pid=dead_pid, age=600, place=HERE)
    info = break_lock(store, "dead", force=False, by="bob")
    assert info.run_id == "run-old"
    assert store.get(layout.lock_key("dead")) is None
    records = list(store.keys(".groundctl/locks/broken/dead/"))
    assert len(records) == 1
    rec = json.loads(store.get(records[0][0]).body)
    assert rec["broken_by"] == "bob" and rec["forced"] is False and rec["stale"] is True and rec["verdict"] == DEAD


def test_force_overrides_and_is_recorded(store):
    _old_lock(store, "forced", host="elsewhere", pid=1, age=1)
    break_lock(store, "forced", force=True, by="carol")
    assert store.get(layout.lock_key("forced")) is None
    (key, _, _), = list(store.keys(".groundctl/locks/broken/forced/"))
    rec = json.loads(store.get(key).body)
    assert rec["forced"] is True and rec["broken_by"] == "carol" and rec["lock"]["run_id"] == "run-old"


def test_status_lists_pulumi_stack_locks(store):
    store.put(".pulumi/locks/organization/network/st/0b7c.json",
              json.dumps({"pid": 77, "username": "ci", "hostname": "runner", "timestamp": "2026-01-01T00:00:00Z"}).encode())
    store.put(".pulumi/locks/organization/cluster/st/garbage.json", b"not json")
    st = lock_status(store, "st")
    assert st.holder is None
    by_layer = {p.layer: p for p in st.pulumi_locks}
    assert by_layer["network"].pid == 77 and by_layer["network"].hostname == "runner"
    assert by_layer["cluster"].pid is None
    assert st.to_dict()["pulumi_locks"][0]["key"].startswith(".pulumi/locks/organization/")


# -- the verdict: alive, dead, unknown, stale (issue 27 §3) -----------------------------------------

BOOT, OTHER_BOOT = "c4b6a71f-0913-4811-a305-068e6082ab5e", "0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6"
ME = Place("h1", BOOT, 4026531836)
TAKEN = 1_000_000.0


def _verdict(holder=ME, seen=GONE, age=10.0, ttl=60, here=ME):
    return lock_verdict(holder, 9, TAKEN, here, seen, heartbeat_age=age, ttl=ttl)


def test_the_verdict_is_a_pure_function_of_plain_facts():
    assert _verdict(seen=GONE)[0] == DEAD  # same host, boot and pid namespace; the pid is gone
    assert _verdict(seen=Process(True, TAKEN - 5))[0] == ALIVE
    assert _verdict(seen=Process(True, None))[0] == ALIVE  # running, its start unreadable: may be the holder
    assert _verdict(holder=Place("h2"), age=10)[0] == ALIVE  # elsewhere: a fresh heartbeat is the evidence
    state, why = _verdict(holder=Place("h2", BOOT, 1), age=90)
    assert state == UNKNOWN and "another host (h2)" in why and "--force" in why


def test_a_pid_now_held_by_a_process_started_after_the_lock_is_dead():
    state, why = _verdict(seen=Process(True, TAKEN + 3 * DAY), age=5)
    assert state == DEAD and "given again" in why and "pid 9" in why
    # Within the slack a start time allows, the process may be the holder: alive, never dead.
    assert _verdict(seen=Process(True, TAKEN + 30), age=5)[0] == ALIVE


def test_the_same_host_name_in_another_boot_or_pid_namespace_is_unknown_not_dead():
    for holder, said in ((Place("h1", OTHER_BOOT, ME.pid_ns), "another boot"),
                         (Place("h1", BOOT, ME.pid_ns + 1), "another pid namespace")):
        for seen in (GONE, Process(True, TAKEN - 5), Process(True, TAKEN + DAY)):
            state, why = _verdict(holder=holder, seen=seen, age=90)
            assert state == UNKNOWN and said in why, (holder, seen, why)
            assert _verdict(holder=holder, seen=seen, age=10)[0] == ALIVE  # its heartbeat is fresh
    # A lock that records neither (older groundctl) proves nothing by its pid either.
    assert _verdict(holder=Place("h1"), seen=GONE, age=90)[0] == UNKNOWN


def test_a_heartbeat_several_ttls_old_is_stale_whatever_the_pid_shows():
    for holder, seen in ((ME, Process(True, TAKEN - 5)), (Place("h2"), GONE), (Place("h1"), Process(True, None))):
        state, why = _verdict(holder=holder, seen=seen, age=181, ttl=60)
        assert state == STALE and "more than 3 TTLs" in why
        assert _verdict(holder=holder, seen=seen, age=179, ttl=60)[0] != STALE


def test_a_same_host_holder_whose_pid_is_gone_is_dead_at_once(store, dead_pid):
    # A Ctrl-C'd or killed run on this host must not block the next one for a whole TTL.
    _old_lock(store, "ctrlc", host=HERE.host, pid=dead_pid, age=0, place=HERE)
    st = lock_status(store, "ctrlc")
    assert st.stale and st.verdict == DEAD and f"{dead_pid} is gone" in st.reason
    info = break_lock(store, "ctrlc", force=False, by="bob")
    assert info.pid == dead_pid and store.get(layout.lock_key("ctrlc")) is None


def test_a_lock_whose_pid_a_later_process_holds_is_dead_and_broken(store, newcomer):
    # The pid now belongs to a process started after the lock was taken, days ago, and the heartbeat stopped
    # two TTLs ago: before, a running pid on this host kept this lock "alive" for ever.
    _old_lock(store, "reused", host=HERE.host, pid=newcomer, age=120, taken=time.time() - 3 * DAY, place=HERE)
    st = lock_status(store, "reused", age_of=_aged(120))
    assert st.verdict == DEAD and st.stale and "given again" in st.reason, st.reason
    break_lock(store, "reused", force=False, by="bob", age_of=_aged(120))
    assert store.get(layout.lock_key("reused")) is None


def test_another_pid_namespace_under_this_host_name_is_not_dead_nor_taken_over(store, dead_pid):
    pod = Place(HERE.host, HERE.boot_id, (HERE.pid_ns or 1) + 1)
    _old_lock(store, "pods", host=HERE.host, pid=dead_pid, age=0, place=pod)
    st = lock_status(store, "pods")
    assert (st.verdict, st.stale) == (ALIVE, False) and "another pid namespace" in st.reason, st.reason
    with pytest.raises(LockHeld):
        EnvironmentLock(store, "pods", "run-next", settle_seconds=0).acquire()
    late = lock_status(store, "pods", age_of=_aged(90))
    assert (late.verdict, late.stale) == (UNKNOWN, False), late.reason
    with pytest.raises(Refused, match="--force"):
        break_lock(store, "pods", force=False, by="bob", age_of=_aged(90))
    assert store.get(layout.lock_key("pods")) is not None


def test_force_on_an_unknown_lock_after_its_ttl_breaks_it_and_records_it(store, dead_pid):
    other_boot = Place(HERE.host, OTHER_BOOT, HERE.pid_ns)
    held = _old_lock(store, "unknown", host=HERE.host, pid=dead_pid, age=90, place=other_boot)
    break_lock(store, "unknown", force=True, by="carol", age_of=_aged(90))
    assert store.get(layout.lock_key("unknown")) is None
    (key, _, _), = list(store.keys(".groundctl/locks/broken/unknown/"))
    rec = json.loads(store.get(key).body)
    assert (rec["forced"], rec["stale"], rec["verdict"], rec["broken_by"]) == (True, False, UNKNOWN, "carol")
    assert rec["lock"]["boot_id"] == OTHER_BOOT and json.loads(rec["lock_body"]) == json.loads(held.body())
    # The bucket keeps the broken object's version too, behind the delete marker.
    kept = [v for v in store.versions(layout.lock_key("unknown")) if not v.delete_marker]
    assert [store.get(v.key, v.version_id).body for v in kept] == [held.body()]


def test_a_heartbeat_several_ttls_old_is_stale_and_broken_without_force(store):
    # Its pid runs since before the lock on this host, but nothing has written the lock for 10 TTLs.
    _old_lock(store, "silent", host=HERE.host, pid=os.getpid(), age=600, taken=_since_before_me(), place=HERE)
    st = lock_status(store, "silent", age_of=_aged(600))
    assert (st.verdict, st.stale) == (STALE, True), st.reason
    break_lock(store, "silent", force=False, by="bob", age_of=_aged(600))
    assert store.get(layout.lock_key("silent")) is None


def test_the_lock_records_where_its_holder_runs_and_a_bad_record_is_unreadable(store):
    with EnvironmentLock(store, "placed", "run-1", settle_seconds=0):
        stored = json.loads(store.get(layout.lock_key("placed")).body)
    assert (stored["boot_id"], stored["pid_ns"]) == (HERE.boot_id, HERE.pid_ns)
    from bootstrap.kit.untrusted import Unreadable

    good = LockInfo("e", "a", "h", 1, "r", iso(0), iso(0), 60, BOOT, 7).body()
    assert LockInfo.parse(good).place == Place("h", BOOT, 7)
    for field, bad in (("boot_id", "x" * 5000), ("boot_id", "not-a-uuid"), ("boot_id", 7), ("pid_ns", -1),
                       ("pid_ns", 1 << 40), ("pid_ns", "7"), ("boot_id", BOOT.upper() + "\u001b[2J")):
        body = json.dumps({**json.loads(good), field: bad}).encode()
        with pytest.raises(Unreadable, match=field):
            LockInfo.parse(body)


def test_age_is_judged_by_the_bucket_clock_not_the_holders(store):
    # A live holder on another host whose clock runs 400 s slow writes a heartbeat that looks 400 s old.
    _old_lock(store, "skew", host="elsewhere", pid=1, age=400, ttl=300)
    st = lock_status(store, "skew")
    assert st.stale is False and st.heartbeat_age_seconds < 60, st.reason
    with pytest.raises(Refused):
        break_lock(store, "skew", force=False, by="bob")
    assert store.get(layout.lock_key("skew")) is not None


def test_heartbeat_age_uses_last_modified_against_the_response_date():
    from datetime import datetime, timedelta, timezone

    from bootstrap.aws.objectstore import StoredObject
    from bootstrap.records.lock_status import heartbeat_age

    info = LockInfo("e", "a", "h", 1, "r", iso(0), iso(0), 300)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    obj = StoredObject("k", b"", None, "", t0, t0 + timedelta(seconds=42))
    assert heartbeat_age(obj, info, local_now=10_000.0) == 42
    assert heartbeat_age(StoredObject("k", b"", None, ""), info, local_now=500.0) == 500


# -- the CLI ---------------------------------------------------------------------------------------

def _spec_file(tmp_path, bucket, endpoint="embedded"):
    import yaml

    from bootstrap.spec.spec_file import ENVIRONMENTS_DIR
    data = yaml.safe_load((ENVIRONMENTS_DIR / "local.yaml").read_text())
    data["backend"]["bucket"] = bucket
    data["aws"]["endpoint_url"] = endpoint
    path = tmp_path / "local-test.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_cli_status_and_break(tmp_path, store, bucket, emulator_endpoint, monkeypatch):
    from typer.testing import CliRunner

    from groundctl import app
    monkeypatch.delenv("GROUNDCTL_ENDPOINT_URL", raising=False)
    spec = _spec_file(tmp_path, bucket)
    runner = CliRunner()
    res = runner.invoke(app, ["lock", "status", spec, "--endpoint-url", emulator_endpoint, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["held"] is False

    _old_lock(store, "local", host="elsewhere", pid=5, age=3)
    monkeypatch.setenv("GROUNDCTL_ENDPOINT_URL", emulator_endpoint)
    res = runner.invoke(app, ["lock", "status", spec, "--json"])
    out = json.loads(res.stdout)
    assert out["held"] and out["holder"]["run_id"] == "run-old" and out["stale"] is False

    res = runner.invoke(app, ["lock", "break", spec])
    assert isinstance(res.exception, Refused)
    res = runner.invoke(app, ["lock", "break", spec, "--force", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["broken"]["run_id"] == "run-old"
    assert store.get(layout.lock_key("local")) is None


def test_cli_embedded_spec_without_endpoint_says_what_to_do(tmp_path, bucket, monkeypatch):
    from typer.testing import CliRunner

    from groundctl import app
    from bootstrap.kit.errors import BadInput
    monkeypatch.delenv("GROUNDCTL_ENDPOINT_URL", raising=False)
    res = CliRunner().invoke(app, ["lock", "status", _spec_file(tmp_path, bucket)])
    assert isinstance(res.exception, BadInput)
    assert "groundctl emulator start" in str(res.exception) and "--endpoint-url" in str(res.exception)
