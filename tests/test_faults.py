"""Faults: boto3 routed through a proxy that answers 10% of requests with 503 SlowDown or throttling
(some after the request already happened). Backend bootstrap, the lock and the ledger still complete,
with nothing created twice and no ledger serial duplicated or lost."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from bootstrap.records import layout
from bootstrap.aws.clients import AwsClients
from bootstrap.aws.backend import KEY_NAME, ensure_backend
from bootstrap.kit.errors import LockHeld
from bootstrap.records.locks import EnvironmentLock
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.ledger import append_record, read_ledger, verify_chain
from tests.faultproxy import FaultProxy

CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


@pytest.fixture
def proxy(emulator_endpoint):
    with FaultProxy(emulator_endpoint, fraction=0.10, seed=11, lifetime_seconds=120) as p:
        yield p


@pytest.fixture
def faulty(proxy) -> AwsClients:
    return AwsClients("us-east-1", proxy.endpoint_url, credentials=CREDS)


def test_proxy_injects_the_errors_aws_gives(emulator_endpoint):
    with FaultProxy(emulator_endpoint, fraction=1.0, after_share=0.0, seed=1) as p:
        s3 = AwsClients("us-east-1", p.endpoint_url, credentials=CREDS).client("s3")
        with pytest.raises(Exception) as err:
            s3.list_buckets()
        assert "SlowDown" in str(err.value)
        kms = AwsClients("us-east-1", p.endpoint_url, credentials=CREDS).client("kms")
        with pytest.raises(Exception) as err:
            kms.list_keys()
        assert "ThrottlingException" in str(err.value)
        assert p.stats["fault_before"] == 2 and p.stats["forwarded"] == 0


def test_backend_bootstrap_completes_and_creates_nothing_twice(local_spec, faulty, aws, proxy):
    env = f"flt-{uuid.uuid4().hex[:8]}"
    spec = local_spec.model_copy(update={"name": env, "backend": local_spec.backend.model_copy(
        update={"kms_alias": f"alias/{env}"})})
    first = ensure_backend(spec, faulty)
    second = ensure_backend(spec, faulty)
    assert first.created and second.created == () and second.updated == ()
    assert proxy.faults > 0
    # Exactly one key carries this environment's tags, whatever responses were lost.
    kms = aws.client("kms")
    tagged = []
    for k in kms.list_keys(Limit=1000)["Keys"]:
        tags = {t["TagKey"]: t["TagValue"] for t in kms.list_resource_tags(KeyId=k["KeyId"])["Tags"]}
        if tags.get("groundctl:env") == env and tags.get("groundctl:name") == KEY_NAME:
            tagged.append(k["KeyId"])
    assert len(tagged) == 1
    assert kms.describe_key(KeyId=f"alias/{env}")["KeyMetadata"]["Arn"] == first.kms_key_arn
    s3 = aws.client("s3")
    assert s3.get_bucket_versioning(Bucket=spec.backend.bucket)["Status"] == "Enabled"


def test_lock_contention_under_faults(faulty, aws, bucket, proxy):
    store = ObjectStore(faulty.client("s3"), bucket)
    barrier = threading.Barrier(20)
    won, held, other = [], [], []

    def contender(i):
        lock = EnvironmentLock(store, "flt", f"run-{i}", host="h", pid=i + 1)
        barrier.wait()
        try:
            lock.acquire()
            won.append(lock)
        except LockHeld as exc:
            held.append(exc)
        except Exception as exc:  # pragma: no cover - shown by the assertion
            other.append(exc)

    threads = [threading.Thread(target=contender, args=(i,)) for i in range(20)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert other == [] and len(won) == 1 and len(held) == 19
    assert all(won[0].run_id in e.holder for e in held)
    won[0]._beat()
    assert not won[0].lost.is_set()
    assert won[0].release() is True
    assert ObjectStore(aws.client("s3"), bucket).get(layout.lock_key("flt")) is None
    assert proxy.faults > 0


def test_ledger_appends_under_faults_neither_duplicate_nor_lose_a_serial(faulty, aws, bucket, proxy):
    direct = ObjectStore(aws.client("s3"), bucket)
    store = ObjectStore(faulty.client("s3"), bucket)
    key = layout.stack_key("network", "flt")
    versions = [direct.put(key, json.dumps({"version": 3, "checkpoint": {"latest": {"resources": [{"urn": str(i)}]}}})
                           .encode()) for i in range(20)]
    barrier = threading.Barrier(20)
    results, errors = [], []

    def appender(i):
        barrier.wait()
        try:
            results.append(append_record(store, "network", "flt", operation="up", run_id=f"r{i}",
                                         state_key=key, state_version=versions[i]))
        except Exception as exc:  # pragma: no cover - shown by the assertion
            errors.append(exc)

    threads = [threading.Thread(target=appender, args=(i,)) for i in range(20)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    led = read_ledger(direct, "network", "flt")
    assert [r.serial for r in led.records] == list(range(1, 21)) and not led.problems
    assert sorted(r.version_id for r in led.records) == sorted(versions)
    assert sorted(r.serial for r in results) == list(range(1, 21))
    assert verify_chain(led.records).ok
    assert proxy.stats["fault_after"] > 0


def test_lost_create_key_response_does_not_leave_two_keys(local_spec, emulator_endpoint, aws):
    # CreateKey lands but its answer is lost: the retry must find the key by its tags, not make another.
    env = f"ck-{uuid.uuid4().hex[:8]}"
    spec = local_spec.model_copy(update={"name": env, "backend": local_spec.backend.model_copy(
        update={"kms_alias": f"alias/{env}"})})
    only = lambda m, path, headers, body: headers.get("X-Amz-Target") == "TrentService.CreateKey"  # noqa: E731
    with FaultProxy(emulator_endpoint, fraction=1.0, after_share=1.0, max_faults=1, only=only) as p:
        report = ensure_backend(spec, AwsClients("us-east-1", p.endpoint_url, credentials=CREDS))
        assert p.stats["fault_after"] == 1
    kms = aws.client("kms")
    ours = [k["KeyId"] for k in kms.list_keys(Limit=1000)["Keys"]
            if {t["TagKey"]: t["TagValue"] for t in kms.list_resource_tags(KeyId=k["KeyId"])["Tags"]}
            .get("groundctl:env") == env]
    assert len(ours) == 1 and report.kms_key_arn.endswith(ours[0])


# -- a throttling storm is not an outage of the lock (issue 19 item 4) --------------------------------


def _writes(method, path, headers, body) -> bool:
    return method in ("PUT", "POST", "DELETE")


def _restore_write(method, path, headers, body) -> bool:
    return method == "PUT" and bool(headers.get("x-amz-copy-source"))  # the restore's first write is a copy


def _recover(spec, endpoint: str, deadline: float, *extra: str):
    import os
    import subprocess
    import sys
    import time

    from tests.conftest import REPO, engine_stand_in

    env = {k: v for k, v in os.environ.items() if k != "GROUNDCTL_ENDPOINT_URL"}
    env.update(GROUNDCTL_CLOUD_DEADLINE=str(deadline), **engine_stand_in(Path(str(spec)).parent, ["network"]))
    args = ["recover", str(spec), "network", "--yes", "--json", "--endpoint-url", endpoint, *extra]
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "groundctl", *args], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=240)
    return proc, time.monotonic() - started


def _phases(proc) -> dict:
    assert proc.stdout.startswith("{"), proc.stderr
    return {p["phase"]: p for p in json.loads(proc.stdout)["phases"]}


@pytest.fixture
def lost_state(aws, bucket, tmp_path, monkeypatch):
    """The local spec as a file; its bucket holds three updates of `network`, then the state was deleted."""
    import tests.test_recovery_scenarios as sc
    from tests.conftest import local_spec_with_bucket

    monkeypatch.setattr(sc, "ENV", "local")
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, "local"))
    store = ObjectStore(aws.client("s3"), bucket)
    sc.history(store)
    store.delete(sc.KEY)
    return local_spec_with_bucket(tmp_path, bucket), store


@pytest.mark.timeout(300)
def test_a_storm_shorter_than_the_deadline_is_waited_out_by_the_restore_and_the_lock_release(
        emulator_endpoint, lost_state):
    spec, store = lost_state
    with FaultProxy(emulator_endpoint, fraction=0, storm=_writes, storm_trigger=_restore_write,
                    storm_seconds=8) as proxy:
        proc, took = _recover(spec, proxy.endpoint_url, 20)
        assert proxy.stats["fault_storm"] > 3  # the restore's writes met the storm, more than once
    phases = _phases(proc)
    assert phases["restore"]["achieved"], proc.stdout
    # Only what needs the engine is left (the stand-in CLI answers nothing else): the engine's failure, exit 4.
    assert proc.returncode == 4 and phases["verify"]["attempted"]
    assert store.get(layout.lock_key("local")) is None  # released once the storm was over
    assert took > 8  # it did wait the storm out


@pytest.mark.timeout(300)
def test_after_a_storm_longer_than_the_deadline_the_named_command_works(emulator_endpoint, lost_state):
    import re
    import shlex

    spec, store = lost_state
    # The storm lasts until the first run is over (it spans that run's deadlines, however slow the machine), then
    # ends: the time it would have gone on for is not waited out.
    with FaultProxy(emulator_endpoint, fraction=0, storm=_writes, storm_trigger=_restore_write,
                    storm_seconds=240) as proxy:
        proc, _ = _recover(spec, proxy.endpoint_url, 6)
        proxy.end_storm()
        phases = _phases(proc)
        assert proc.returncode == 4 and not phases["restore"]["achieved"], proc.stdout
        said = " ".join(phases["restore"]["message"].split())
        assert "SlowDown" in said and "throttling" in said, said
        # The lock could not be released in the storm either: the message says so, and what happens to it.
        assert store.get(layout.lock_key("local")) is not None
        assert "lock" in said and "takes it over" in said, said
        named = re.search(r"re-run `(groundctl [^`]+)`", said)
        assert named, said
        assert proxy.storm_over
        # The very command the message names, once the storm is over.
        argv = shlex.split(named.group(1))
        assert argv[1:4] == ["recover", str(spec), "network"], argv
        again, _ = _recover(spec, proxy.endpoint_url, 20)  # a deadline with room for a loaded machine
    again_phases = _phases(again)
    assert again_phases["restore"]["achieved"], again.stderr
    assert again.returncode == 4 and store.get(layout.lock_key("local")) is None


def _storm_proxy(emulator_endpoint, storm, seconds: float) -> FaultProxy:
    return FaultProxy(emulator_endpoint, fraction=0, storm=storm, storm_seconds=seconds)


def _lock_writes(method, path, headers, body) -> bool:
    return method in ("PUT", "DELETE") and "/.groundctl/locks/" in path


def test_the_heartbeat_and_the_release_outlast_a_storm_within_the_deadline(emulator_endpoint, aws, bucket,
                                                                          monkeypatch):
    import time

    from bootstrap.aws import clients

    monkeypatch.setenv(clients.DEADLINE_ENV, "15")
    direct = ObjectStore(aws.client("s3"), bucket)
    with FaultProxy(emulator_endpoint, fraction=0) as calm:  # the lock is taken before the storm
        lock = EnvironmentLock(ObjectStore(AwsClients("us-east-1", calm.endpoint_url, credentials=CREDS)
                                           .client("s3"), bucket), "storm", "run-1", settle_seconds=0)
        lock.acquire()
    # Eight attempts (all there used to be) span about 4 s and at most 7 s of backoff: this storm outlasts them.
    with _storm_proxy(emulator_endpoint, _lock_writes, 8) as proxy:
        lock.store = ObjectStore(AwsClients("us-east-1", proxy.endpoint_url, credentials=CREDS).client("s3"), bucket)
        before = lock.info.heartbeat_at
        time.sleep(0.01)
        lock._beat()  # the storm starts with this beat's write: it is retried until the storm is over
        assert lock.info.heartbeat_at != before and not lock.lost.is_set() and lock.heartbeat_errors == 0
        assert lock.release() is True
        assert proxy.storm_over
    assert direct.get(layout.lock_key("storm")) is None


def test_a_throttled_call_is_retried_until_the_deadline_and_names_the_command_to_re_run(monkeypatch):
    import re
    import time

    import botocore.exceptions

    from bootstrap.aws import clients
    from bootstrap.kit.errors import CloudError

    monkeypatch.setenv(clients.DEADLINE_ENV, "4")
    monkeypatch.setattr(clients, "BUDGET", clients._Budget())  # unanswered calls of earlier tests do not count
    monkeypatch.setattr("sys.argv", ["/usr/bin/groundctl", "up", "dev", "--yes"])
    slow_down = botocore.exceptions.ClientError(
        {"Error": {"Code": "SlowDown"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, "PutObject")
    calls = []

    def throttled_for(seconds: float):
        start = time.monotonic()

        def call():
            calls.append(1)
            if time.monotonic() - start < seconds:
                raise slow_down
            return "written"
        return call

    # Throttled for 0.8 s: a retry lands after it (no backoff wait exceeds 2 s), well inside the 4 s deadline.
    assert clients.retry_transient(throttled_for(0.8), what="write a thing") == "written"
    calls.clear()
    with pytest.raises(CloudError) as err:
        clients.retry_transient(throttled_for(60), what="write a thing")
    assert len(calls) > 1
    said = err.value.message
    assert "SlowDown" in said and "for 4 s" in said and "re-run `groundctl up dev --yes`" in said, said


def _exited_pid() -> int:
    """The pid of a process that has exited: a real pid (a lock naming one past pid_max is unreadable)."""
    import subprocess

    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_a_lock_whose_holder_exited_this_host_is_taken_over_at_once_and_recorded(store_direct):
    from bootstrap.records.lock_status import lock_status

    EnvironmentLock(store_direct, "gone", "run-dead", pid=_exited_pid(), settle_seconds=0).acquire()
    assert lock_status(store_direct, "gone").stale
    taker = EnvironmentLock(store_direct, "gone", "run-next", settle_seconds=0)
    assert taker.acquire().run_id == "run-next"
    (record_key, *_), = list(store_direct.keys(f"{layout.GROUNDCTL}/locks/broken/gone/"))
    record = json.loads(store_direct.get(record_key).body)
    assert record["taken_over"] and record["lock"]["run_id"] == "run-dead" and "gone from this host" in record["reason"]
    assert taker.release() is True


def test_a_lock_held_elsewhere_or_by_a_live_process_is_never_taken_over(store_direct):
    import os

    EnvironmentLock(store_direct, "away", "run-away", host="another-host", pid=_exited_pid(),
                    settle_seconds=0).acquire()
    with pytest.raises(LockHeld):  # another host's processes cannot be probed: its TTL decides, not us
        EnvironmentLock(store_direct, "away", "run-next", settle_seconds=0).acquire()
    EnvironmentLock(store_direct, "live", "run-live", pid=os.getppid(), settle_seconds=0).acquire()
    with pytest.raises(LockHeld):
        EnvironmentLock(store_direct, "live", "run-next", settle_seconds=0).acquire()


def test_the_ttl_is_two_minutes_and_outlasts_two_slow_beats():
    from bootstrap.records.locks import HEARTBEAT_SECONDS, default_ttl

    assert default_ttl(40) == 120
    for deadline in (10, 40, 120, 3600):
        # A beat is a write and its read-back, each retried for up to a deadline, after the interval.
        assert default_ttl(deadline) > HEARTBEAT_SECONDS + 2 * deadline


def test_a_holder_that_cannot_beat_for_longer_than_its_ttl_stops_as_if_it_had_lost_the_lock(store_direct):
    import time

    from bootstrap.kit.errors import CloudError

    lock = EnvironmentLock(store_direct, "mute", "run-1", ttl_seconds=1, heartbeat_seconds=0.1, settle_seconds=0)
    lock.acquire()

    class Throttled:
        def __getattr__(self, name):
            def refused(*args, **kwargs):
                raise CloudError("AWS kept refusing to write (SlowDown)")
            return refused

    lock.store = Throttled()
    lock._beat()
    assert not lock.lost.is_set()  # one missed beat is not a lost lock
    time.sleep(1.2)
    lock._beat()
    assert lock.lost.is_set() and "longer than its TTL" in lock.lost_reason


def test_a_release_that_fails_after_the_work_succeeded_is_a_cloud_error_naming_the_lock(store_direct):
    from bootstrap.kit.errors import CloudError

    class Throttled:
        def __getattr__(self, name):
            def refused(*args, **kwargs):
                raise CloudError("AWS kept refusing to delete the lock (SlowDown) for 40 s (30 attempts). Wait.")
            return refused

    with pytest.raises(CloudError) as err:
        with EnvironmentLock(store_direct, "sticky", "run-1", settle_seconds=0) as lock:
            lock._stop.set()
            lock.store = Throttled()
    said = err.value.message
    assert said.startswith("The run's work is done") and layout.lock_key("sticky") in said
    assert "takes it over at once" in said and "groundctl lock break sticky" in said


@pytest.fixture
def store_direct(aws, bucket) -> ObjectStore:
    return ObjectStore(aws.client("s3"), bucket)
