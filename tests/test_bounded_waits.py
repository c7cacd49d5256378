"""Bounded waits (issue 13 item 3): an endpoint that accepts connections and never answers, one that
drips its answer a byte at a time, and one that answers `200` with an empty body. Every command ends
with exit 4 and one paragraph, within a minute; `status` never calls such an environment "never applied".
And on every thread (issue 19 item 1): a read that trickles in a worker thread (the ledger pool, the
guide's ledger reader, the version read-ahead, any pool) ends by the call deadline too.

Real processes (`python -m groundctl`) against small hostile servers on loopback, started here; the commands
against an endpoint that answers at once (an empty 200, a refusal) run through the same front door in this
process (tests/inprocess.py), where a process's start-up would be nearly all of each run's cost.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import botocore.exceptions
import pytest

from bootstrap.aws import clients
from bootstrap.kit.errors import BadInput, CloudError
from tests.conftest import REPO, local_spec_with_bucket
from tests.faultproxy import FaultProxy
from tests.inprocess import run_main


class _Hostile:
    """A TCP server on loopback whose every connection is handled by `serve(conn)`; stopped on exit."""

    def __init__(self, serve):
        self._serve = serve
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._conns: list[socket.socket] = []
        self.first_contact: float | None = None  # monotonic: when the command's first request reached us
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            if self.first_contact is None:
                self.first_contact = time.monotonic()
            self._conns.append(conn)
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn):
        try:
            self._serve(conn, self._stop)
        except OSError:
            pass

    def __enter__(self):
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for conn in self._conns:
            conn.close()
        self._sock.close()


def _silent(conn, stop):
    stop.wait(120)  # accepts, reads nothing, answers nothing


def _drip(conn, stop):
    conn.recv(65536)
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\nX-Slow: " + b"a" * 10_000
    for byte in answer:  # one byte a second: no socket read ever waits long enough to time out
        if stop.wait(1.0):
            return
        conn.sendall(bytes([byte]))


def _empty_200(conn, stop):
    while not stop.is_set():
        if not conn.recv(65536):
            return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")


# What seven groundctl processes started side by side may take before their first call on a loaded machine.
STARTUP_ALLOWANCE = 60


def _env(env_extra: dict | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GROUNDCTL_ENDPOINT_URL", clients.DEADLINE_ENV)}
    env.update(PULUMI_CONFIG_PASSPHRASE="bounded-waits", **(env_extra or {}))
    return env


def _run(args: list[str], env_extra: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "groundctl", *args], capture_output=True, text=True, cwd=REPO,
                          env=_env(env_extra), timeout=120)
    return proc, time.monotonic() - started


def _run_in_process(args: list[str], env_extra: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """`_run` through the front door in this process (tests/inprocess.py): for an endpoint that answers at once,
    where a process's start-up would be nearly all of the run's cost."""
    started = time.monotonic()
    proc = run_main(args, _env(env_extra))
    return proc, time.monotonic() - started


def _one_paragraph(proc: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


COMMANDS = [
    ["lock", "status", "local"],
    ["status", "local"],
    ["plan", "local"],
    ["drift", "local"],
    ["up", "local", "--yes"],
    ["destroy", "local", "--yes"],
    ["state", "versions", "local", "network"],
]


def _access_denied(conn, stop):
    body = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message>'
            b'<RequestId>bw</RequestId></Error>')
    while not stop.is_set():
        if not conn.recv(65536):
            return
        conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)


@pytest.fixture(scope="session")
def silent_lock_status():
    """`lock status` against a silent endpoint at the default deadline, started by this module's first test and
    waited for by a test marked `last` (run after every other test, or of this file on an xdist worker): its 40 s
    of waiting overlaps the rest of the suite, or of the file, instead of adding to its time."""
    server = _Hostile(_silent).__enter__()
    pool = ThreadPoolExecutor(1)
    run = pool.submit(lambda: (*_run(["lock", "status", "local", "--endpoint-url", server.url]), time.monotonic()))
    yield server, run
    pool.shutdown(wait=True)
    server.__exit__(None, None, None)


def _every_command(url: str, env_extra: dict | None = None):
    # Side by side: each command is its own process, so the wall time stays that of the slowest.
    with ThreadPoolExecutor(len(COMMANDS)) as pool:
        runs = pool.map(lambda c: _run([*c, "--endpoint-url", url], env_extra), COMMANDS)
        return list(zip(COMMANDS, runs))


def _every_command_in_process(url: str):
    # One after another on the main thread (the front door installs signal handlers): each answer is immediate.
    return [(c, _run_in_process([*c, "--endpoint-url", url])) for c in COMMANDS]


@pytest.mark.timeout(300)
def test_a_dripping_endpoint_trips_the_call_deadline_in_every_command(silent_lock_status):
    # A byte a second never trips a read timeout; only the deadline over the whole call ends it.
    with _Hostile(_drip) as server:
        results = _every_command(server.url, {clients.DEADLINE_ENV: "3"})
    for command, (proc, took) in results:
        assert proc.returncode == 4, (command, proc.returncode, proc.stderr)
        # One deadline, the slack and seven side-by-side start-ups: at a load of 30 those took 33 s. The drip never
        # ends, so a call the deadline did not stop would run into the 120 s subprocess timeout instead.
        assert took < 3 + clients.BUDGET_SLACK + STARTUP_ALLOWANCE, (command, took)
        assert "did not finish answering within 3 s" in _one_paragraph(proc), command


@pytest.mark.timeout(300)
def test_an_empty_200_is_a_broken_endpoint_not_an_empty_environment_in_every_command():
    with _Hostile(_empty_200) as server:
        results = _every_command_in_process(server.url)
    for command, (proc, _) in results:
        assert proc.returncode == 4, (command, proc.returncode, proc.stdout, proc.stderr)
        line = _one_paragraph(proc)
        assert "not as S3 does" in line or "not an AWS response" in line, (command, line)
        assert "never applied" not in proc.stdout, command


@pytest.mark.timeout(300)
def test_an_endpoint_that_refuses_every_request_is_a_cloud_failure_not_a_bug():
    with _Hostile(_access_denied) as server:
        results = _every_command_in_process(server.url)
    for command, (proc, _) in results:
        assert proc.returncode == 4, (command, proc.returncode, proc.stderr)
        line = _one_paragraph(proc)  # a HEAD's 403 has no body: its code is the status
        assert ("AccessDenied" in line or "403" in line) and "internal error" not in proc.stderr, command


def test_an_answer_gives_the_endpoint_its_budget_back(monkeypatch):
    monkeypatch.setenv(clients.DEADLINE_ENV, "1")
    monkeypatch.setattr(clients, "BUDGET", clients._Budget())
    clients.BUDGET.charge(1 + clients.BUDGET_SLACK - 0.5)  # scattered timeouts earlier in a long run
    assert clients.retry_transient(lambda: "answered", what="read a thing") == "answered"
    assert clients.BUDGET.left(1) == 1 + clients.BUDGET_SLACK


def test_a_call_left_unanswered_spends_the_process_budget(monkeypatch):
    monkeypatch.setenv(clients.DEADLINE_ENV, "1")
    monkeypatch.setattr(clients, "BUDGET", clients._Budget())
    calls = []

    def unanswered():
        calls.append(time.monotonic())
        time.sleep(0.3)
        raise botocore.exceptions.ReadTimeoutError(endpoint_url="http://127.0.0.1:9")

    with pytest.raises(CloudError) as first:
        clients.retry_transient(unanswered, what="read a thing")
    assert "did not answer within 1 s" in first.value.message
    tried = len(calls)
    assert 1 < tried <= 4  # retried, but only inside the one-second deadline
    clients.BUDGET.charge(clients.BUDGET_SLACK + 1)  # later calls, also unanswered, used up the rest
    with pytest.raises(CloudError) as later:
        clients.retry_transient(unanswered, what="read another thing")
    assert len(calls) == tried  # not tried again: the endpoint had its chance
    assert "was not tried again" in later.value.message


@pytest.mark.parametrize("value", ["soon", "0", "-5", "100000"])
def test_a_bad_deadline_setting_is_bad_input(monkeypatch, value):
    monkeypatch.setenv(clients.DEADLINE_ENV, value)
    with pytest.raises(BadInput) as err:
        clients.call_deadline()
    assert clients.DEADLINE_ENV in err.value.message and "between 1 and 3600" in err.value.message


@pytest.mark.last
@pytest.mark.timeout(120)
def test_lock_status_against_a_silent_endpoint_ends_within_a_minute_at_the_default_deadline(silent_lock_status):
    server, run = silent_lock_status
    proc, took, ended = run.result(timeout=110)
    assert proc.returncode == 4, proc.stderr
    # Timed from its first request, not its start: at a load of 10 the interpreter's start-up and imports
    # alone can take seconds, which is the machine's, not a wait of groundctl's.
    assert server.first_contact is not None
    waited = ended - server.first_contact
    assert waited < 60, (waited, took)
    line = _one_paragraph(proc)
    assert "did not" in line and "--endpoint-url" in line, line


# -- every thread (issue 19 item 1) ------------------------------------------------------------------


def _get_of(fragment: str):
    """The proxy's pick: GETs of one object (not listings) whose path holds `fragment`."""
    return lambda method, path, headers, body: (method == "GET" and fragment in path and "list-type" not in path
                                                and "?versions" not in path)


# Which reads trickle, and the commands that make them on a worker thread: ledger records are read on the
# ledger's pool (status, state verify, state versions) or the guide's background reader (recover); state
# versions are downloaded by the read-ahead pool (state versions, recover).
WORKER_READS = [
    ("ledger records, the whole answer", _get_of("/.groundctl/ledger/"), "head",
     [["status", "{spec}"], ["state", "verify", "{spec}", "network"], ["state", "versions", "{spec}", "network"],
      ["recover", "{spec}", "network", "--dry-run"]]),
    ("state versions, the body", _get_of("versionId="), "body",
     [["state", "versions", "{spec}", "network"], ["recover", "{spec}", "network", "--dry-run"]]),
]


@pytest.fixture
def local_history(aws, bucket, tmp_path, monkeypatch):
    """The local spec as a file whose bucket holds three updates of `network` with their ledger records."""
    import tests.test_recovery_scenarios as sc
    from bootstrap.aws.objectstore import ObjectStore

    monkeypatch.setattr(sc, "ENV", "local")
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, "local"))
    sc.history(ObjectStore(aws.client("s3"), bucket))
    return local_spec_with_bucket(tmp_path, bucket)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("what,pick,drip,commands", WORKER_READS, ids=[w[0] for w in WORKER_READS])
def test_a_read_trickling_in_a_worker_thread_ends_by_the_deadline(emulator_endpoint, local_history, what, pick,
                                                                  drip, commands):
    deadline = 4
    with FaultProxy(emulator_endpoint, fraction=0, trickle=pick, trickle_from=drip) as proxy:
        with ThreadPoolExecutor(len(commands)) as pool:
            runs = list(pool.map(lambda c: _run([a.replace("{spec}", str(local_history)) for a in c]
                                                + ["--endpoint-url", proxy.endpoint_url],
                                                {clients.DEADLINE_ENV: str(deadline)}), commands))
        assert proxy.stats["trickled"] >= len(commands)  # each command did reach a trickling read
    where = proxy.endpoint_url.split("//")[1]
    for command, (proc, took) in zip(commands, runs):
        assert proc.returncode == 4, (command, proc.returncode, proc.stderr)
        # `recover` reports it as the failed phase's finding; the other commands as their one `error:` paragraph.
        said = " ".join((proc.stdout + proc.stderr).split()) if command[0] == "recover" else _one_paragraph(proc)
        assert "Traceback" not in proc.stderr and "internal error" not in said, (command, said)
        assert f"did not finish answering within {deadline} s" in said and where in said, (command, said)
        # Cut by the deadline (the message says so), not by the trickle's end, which is minutes away; the
        # bound is loose because start-ups of several processes side by side are slow on a loaded machine.
        assert took < 60, (command, took)


def _trickling_get(store, key: str, results: dict, name: str) -> None:
    started = time.monotonic()
    try:
        store.get(key)
        results[name] = ("answered", time.monotonic() - started)
    except CloudError as exc:
        results[name] = (exc.message, time.monotonic() - started)


def test_a_trickled_read_is_cut_on_any_thread_and_only_that_read(aws, bucket, emulator_endpoint, monkeypatch):
    """A pool worker and a plain thread are each cut at the deadline, while a read of a healthy object on a
    third thread, over the same client, is answered: the cut ends one call, not its neighbours."""
    from bootstrap.aws.objectstore import ObjectStore

    monkeypatch.setenv(clients.DEADLINE_ENV, "2")
    monkeypatch.setattr(clients, "BUDGET", clients._Budget())
    direct = ObjectStore(aws.client("s3"), bucket)
    # A trickle lasts a second per byte: the slow object must drip for far longer than the 2 s deadline, or its
    # last byte races the watchdog (a 2-byte body ends at 2 s plus the round trip, and a loaded machine lost it).
    direct.put("slow/a.json", b'{"pad": "' + b"x" * 60 + b'"}')
    direct.put("fine/b.json", b"{}")
    with FaultProxy(emulator_endpoint, fraction=0, trickle=_get_of("/slow/"), trickle_from="body") as proxy:
        store = ObjectStore(clients.AwsClients("us-east-1", proxy.endpoint_url, credentials={
            "aws_access_key_id": "testing", "aws_secret_access_key": "testing"}).client("s3"), bucket)
        results: dict = {}
        plain = threading.Thread(target=_trickling_get, args=(store, "slow/a.json", results, "thread"), daemon=True)
        plain.start()
        with ThreadPoolExecutor(2) as pool:
            pool.submit(_trickling_get, store, "slow/a.json", results, "pool")
            pool.submit(_trickling_get, store, "fine/b.json", results, "healthy")
        plain.join(timeout=30)
    assert results["healthy"][0] == "answered"
    for name in ("thread", "pool"):
        message, took = results[name]
        assert "did not finish answering within 2 s" in message, (name, message)
        assert took < 2 + 5, (name, took)  # cut at its deadline, not at the end of the trickle


def test_a_pool_thread_with_a_budget_of_its_own_is_not_charged_for_another_threads_stuck_endpoint(monkeypatch):
    """What fleet status's pool uses per environment: one stuck environment spends its own budget, not the fleet's."""
    monkeypatch.setenv(clients.DEADLINE_ENV, "1")
    monkeypatch.setattr(clients, "BUDGET", clients._Budget())
    results: dict = {}

    def stuck():
        with clients.separate_budget():
            clients._budget().charge(1 + clients.BUDGET_SLACK)  # its endpoint left calls unanswered
            try:
                clients.retry_transient(lambda: "answered", what="read a stuck thing")
            except CloudError as exc:
                results["stuck"] = exc.message

    def healthy():
        with clients.separate_budget():
            results["healthy"] = clients.retry_transient(lambda: "answered", what="read a healthy thing")

    with ThreadPoolExecutor(2) as pool:
        pool.submit(stuck).result()
        pool.submit(healthy).result()
    assert "was not tried again" in results["stuck"] and results["healthy"] == "answered"
    assert clients.BUDGET.spent == 0  # the process's own budget was never charged


def test_a_failure_before_any_request_is_reported_as_itself_even_past_the_deadline(monkeypatch):
    """At a load of 4, finding no credentials took a starved run past a 2 s deadline: the call had sent nothing, so
    the deadline shut nothing, and the failure is the missing credentials, not an endpoint that did not answer."""
    monkeypatch.setenv(clients.DEADLINE_ENV, "1")
    monkeypatch.setattr(clients, "BUDGET", clients._Budget())

    def slow_to_find_none():
        ends = time.monotonic() + 1.5
        while time.monotonic() < ends:  # local work past the deadline, no connection made
            time.sleep(0.05)
        raise botocore.exceptions.NoCredentialsError()

    with pytest.raises(Exception) as failed:
        clients.retry_transient(slow_to_find_none, what="identify the AWS caller")
    text = getattr(failed.value, "message", str(failed.value))
    assert "accepted the connection" not in text and "did not finish answering" not in text, text
    assert "credentials" in text.lower(), text
