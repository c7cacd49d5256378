"""The environment lock against the emulator: contention, heartbeat, loss, status and break."""

from __future__ import annotations

import json
import threading
import time

import pytest

from bootstrap.records import layout
from bootstrap.errors import LockHeld, Refused
from bootstrap.records.lock_object import LockInfo, iso
from bootstrap.records.lock_status import break_lock, lock_status, staleness
from bootstrap.records.locks import EnvironmentLock
from bootstrap.aws.objectstore import ObjectStore


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
    lock = EnvironmentLock(store, "lost", "run-1", ttl_seconds=5, heartbeat_seconds=0.1)
    with lock:
        break_lock(store, "lost", force=True, by="ops")
        EnvironmentLock(store, "lost", "run-2", settle_seconds=0).acquire()
        assert lock.lost.wait(3)
        assert "run-2" in lock.lost_reason
        with pytest.raises(Refused):
            lock.check()
    # the new holder's lock was not removed by the old run's release
    assert LockInfo.parse(store.get(layout.lock_key("lost")).body).run_id == "run-2"


def _old_lock(store, env, *, host, pid, age, ttl=60):
    now = time.time()
    info = LockInfo(env, "alice", host, pid, "run-old", iso(now - age - 10), iso(now - age), ttl)
    store.put(layout.lock_key(env), info.body())
    return info


def test_break_refused_while_heartbeat_fresh(store):
    _old_lock(store, "fresh", host="elsewhere", pid=1, age=5)
    with pytest.raises(Refused) as err:
        break_lock(store, "fresh", force=False, by="bob")
    assert "run-old" in str(err.value) and "--force" in str(err.value)
    assert store.get(layout.lock_key("fresh")) is not None
    st = lock_status(store, "fresh")
    assert st.holder.run_id == "run-old" and st.stale is False


def test_break_refused_when_stale_but_pid_alive_on_this_host(store):
    _old_lock(store, "alive", host="me", pid=4242, age=600)
    with pytest.raises(Refused) as err:
        break_lock(store, "alive", force=False, by="bob", this_host="me", alive=lambda pid: True,
                   age_of=lambda obj, info, now: 600)
    assert "4242" in str(err.value)


def test_break_allowed_when_stale_and_pid_dead_on_this_host(store):
    _old_lock(store, "dead", host="me", pid=4242, age=600)
    info = break_lock(store, "dead", force=False, by="bob", this_host="me", alive=lambda pid: False)
    assert info.run_id == "run-old"
    assert store.get(layout.lock_key("dead")) is None
    records = list(store.keys(".groundctl/locks/broken/dead/"))
    assert len(records) == 1
    rec = json.loads(store.get(records[0][0]).body)
    assert rec["broken_by"] == "bob" and rec["forced"] is False and rec["stale"] is True


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


def test_staleness_is_pure_and_says_why():
    info = LockInfo("e", "a", "h1", 9, "r", iso(0), iso(1000), 300)
    assert staleness(info, 100, "h1", lambda p: True)[0] is False
    stale, why, age = staleness(info, 1000, "h2", lambda p: True)
    assert stale and "another host" in why and age == pytest.approx(1000)
    assert staleness(info, 1000, "h1", lambda p: False)[0] is True
    assert staleness(info, 1000, "h1", lambda p: True)[0] is False
    assert staleness(info, 100, "h2", lambda p: False)[0] is False  # another host's pids mean nothing here


def test_a_same_host_holder_whose_pid_is_gone_is_dead_at_once(store):
    # A Ctrl-C'd or killed run on this host must not block the next one for a whole TTL.
    _old_lock(store, "ctrlc", host="me", pid=4242, age=0)
    st = lock_status(store, "ctrlc", this_host="me", alive=lambda pid: False)
    assert st.stale and "4242 is gone" in st.reason
    info = break_lock(store, "ctrlc", force=False, by="bob", this_host="me", alive=lambda pid: False)
    assert info.pid == 4242 and store.get(layout.lock_key("ctrlc")) is None


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

    from bootstrap.spec_file import ENVIRONMENTS_DIR
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
    from bootstrap.errors import BadInput
    monkeypatch.delenv("GROUNDCTL_ENDPOINT_URL", raising=False)
    res = CliRunner().invoke(app, ["lock", "status", _spec_file(tmp_path, bucket)])
    assert isinstance(res.exception, BadInput)
    assert "groundctl emulator start" in str(res.exception) and "--endpoint-url" in str(res.exception)
