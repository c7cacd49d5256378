"""Ctrl-C and SIGTERM at random moments (issue 10 §3): never a traceback, never a lock left behind,
the run record closed as interrupted, exit 130. Real processes (`python -m groundctl`), the test's
emulator as the AWS endpoint so the lock and the run record outlive the interrupted process."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bootstrap.records import layout
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.locks import EnvironmentLock
from tests.conftest import REPO, STAND_IN_FAILURE, engine_stand_in, local_spec_with_bucket

MOMENTS = 20


def _env_with_stand_in_engine(folder) -> dict:
    # A CLI that answers only `version`: `up` passes the engine check, writes the bucket, key, lock and run
    # record, then stops at the first engine step: the whole run takes a few seconds, and every interrupt
    # lands in groundctl's own code.
    env = {k: v for k, v in os.environ.items() if k != "GROUNDCTL_ENDPOINT_URL"}
    env.update(engine_stand_in(folder, ["backend", "network", "cluster", "flux"]))
    return env


def _spec(tmp_path, bucket: str) -> str:
    return str(local_spec_with_bucket(tmp_path, bucket))


def _groundctl_has_taken_over(pid: int) -> bool:
    """groundctl installs its SIGINT and SIGTERM handlers on its first line; before that the interpreter is still
    starting (a signal there is Python's own, which no line of groundctl has run to handle). Python catches
    SIGINT from its start, SIGTERM only once groundctl's handler is in: read from the kernel's view of the process."""
    try:
        with open(f"/proc/{pid}/status") as status:
            caught = next(line.split()[1] for line in status if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


def _interrupt(cmd: list[str], delay: float, sig: int, env: dict, ready=None) -> subprocess.CompletedProcess:
    """The command, signalled `delay` seconds after groundctl took over from the starting interpreter (which
    takes ~0.1 s alone and seconds at a load of 30), and after `ready()` holds when it is given."""
    proc = subprocess.Popen([sys.executable, "-m", "groundctl", *cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, env={**env, "PYTHONFAULTHANDLER": "1"})
    waited = time.monotonic() + 60
    while proc.poll() is None and not _groundctl_has_taken_over(proc.pid) and time.monotonic() < waited:
        time.sleep(0.005)
    while ready is not None and proc.poll() is None and not ready() and time.monotonic() < waited:
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        # Still running a minute after its signal: what the kernel says of its signals, then every thread's
        # stack (the faulthandler the environment turns on prints them on SIGABRT), for the failure to show.
        try:
            with open(f"/proc/{proc.pid}/status") as status:
                signals = "".join(line for line in status if line.startswith(("Sig", "Shd")))
        except OSError:
            signals = "(gone)"
        proc.send_signal(signal.SIGABRT)
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"{cmd} ran on a minute after {signal.Signals(sig).name} ({delay:.2f} s in)\n{signals}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


@pytest.mark.timeout(600)
def test_up_interrupted_at_random_moments(tmp_path, aws, emulator_endpoint):
    rng = random.Random(1234)
    bucket = f"gl-int-{rng.randrange(16 ** 8):08x}"
    spec = _spec(tmp_path, bucket)
    env = _env_with_stand_in_engine(tmp_path)
    cmd = ["up", spec, "--yes", "--endpoint-url", emulator_endpoint]
    started = time.monotonic()
    whole = subprocess.run([sys.executable, "-m", "groundctl", *cmd], capture_output=True, text=True, cwd=REPO,
                           env=env, timeout=120)
    span = time.monotonic() - started
    assert whole.returncode == 4 and STAND_IN_FAILURE in whole.stderr, whole.stderr  # the first engine step
    store = ObjectStore(aws.client("s3"), bucket)
    runs = f"{layout.GROUNDCTL}/runs/local/"
    seen_interrupted = 0
    for i in range(MOMENTS):
        # From groundctl's first line to the end of the run.
        delay = rng.uniform(0.1, span)
        sig = signal.SIGTERM if i % 4 == 3 else signal.SIGINT
        ready = None
        if i % 5 == 4:
            # Most of a run is its imports; every fifth moment is inside the run itself, once its record is written.
            before = len(list(store.keys(runs)))
            ready, delay = (lambda before=before: len(list(store.keys(runs))) > before), 0.0
        r = _interrupt(cmd, delay, sig, env, ready)
        assert "Traceback" not in r.stderr, (delay, r.stderr)
        if r.returncode in (4, -sig):
            # The run had already ended (a signal during interpreter shutdown takes the default action).
            assert STAND_IN_FAILURE in r.stderr, (delay, r.returncode, r.stderr)
        else:
            assert r.returncode == 130, (delay, r.returncode, r.stderr)
        if r.returncode == 130:
            assert r.stderr.strip().splitlines()[-1].startswith("Interrupted;"), r.stderr
        assert store.get(layout.lock_key("local")) is None, (delay, sig, r.stderr)
    for key, _s, _m in store.keys(runs):
        record = json.loads(store.get(key).body)
        assert record["outcome"] != "running", record
        seen_interrupted += record["outcome"] == "interrupted"
    assert seen_interrupted >= 1


@pytest.mark.timeout(600)
def test_emulator_start_interrupted_at_random_moments():
    rng = random.Random(99)
    moments = [(rng.uniform(0.1, 2.5), signal.SIGTERM if i % 4 == 3 else signal.SIGINT) for i in range(MOMENTS)]
    # A few at a time: a started emulator only waits for its signal, so four side by side still take their
    # signals from the start-up into the serving (this seed's moments run from 0.47 s to 2.35 s; alone the
    # emulator serves from ~0.4 s), in a quarter of the time.
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda m: _interrupt(["emulator", "start"], m[0], m[1], dict(os.environ)), moments))
    for (delay, sig), r in zip(moments, runs):
        assert r.returncode == 130, (delay, sig, r.returncode, r.stderr)
        assert "Traceback" not in r.stderr and r.stderr.strip().splitlines()[-1].startswith("Interrupted"), r.stderr


def test_an_interrupt_between_the_write_and_the_read_back_leaves_no_lock(aws, bucket):
    from bootstrap.kit import interrupts

    store = ObjectStore(aws.client("s3"), bucket)
    lock = EnvironmentLock(store, "mid", "run-1", settle_seconds=0)
    real_get = store.get

    def get_after_signal(key, *a, **kw):
        # The conditional write has landed; the signal arrives before the read-back.
        interrupts.on_signal(signal.SIGINT, None)
        return real_get(key, *a, **kw)

    previous = signal.getsignal(signal.SIGINT)
    try:
        interrupts.install()
        store.get = get_after_signal
        with pytest.raises(KeyboardInterrupt):
            with lock:
                pytest.fail("the body must not run: the interrupt is raised as the lock is taken")
    finally:
        store.get = real_get
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert store.get(layout.lock_key("mid")) is None


def test_a_failure_that_follows_an_interrupt_is_reported_as_the_interrupt(monkeypatch, capsys):
    # A signal can cut an import or a clean-up in half; what then fails (a half-imported module) is the
    # interrupt's doing, not a bug: exit 130, never "internal error" (70).
    import groundctl
    import groundctl.cli
    from bootstrap.kit import interrupts

    def command(**_):
        try:
            interrupts.on_signal(signal.SIGINT, None)
        except KeyboardInterrupt:
            pass  # as if caught by a half-done import's machinery
        raise AttributeError("partially initialized module 'botocore.client'")

    monkeypatch.setattr(groundctl.cli, "command", lambda: command)  # the click command the front door runs
    monkeypatch.setattr(interrupts, "received", False)
    monkeypatch.setattr(sys, "argv", ["groundctl", "status", "local"])
    previous = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    try:
        with pytest.raises(SystemExit) as done:
            groundctl.main()
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
    err = capsys.readouterr().err
    assert done.value.code == 130 and err.startswith("Interrupted;") and "internal error" not in err


def test_a_signal_raised_into_a_callback_that_swallows_it_is_raised_again_where_the_run_unwinds():
    # The final shuffled run's hang: SIGINT landed in importlib's module-lock weakref callback, whose
    # exceptions Python prints as "Exception ignored" and drops, and `emulator start` served on.
    import weakref

    from bootstrap.kit import interrupts

    class Held:
        pass

    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook
    try:
        interrupts.install()
        held = Held()
        ref = weakref.ref(held, lambda _ref: interrupts.on_signal(signal.SIGINT, None))
        with pytest.raises(KeyboardInterrupt, match="SIGINT"):
            del held  # the callback raises, Python drops it; the hook sends SIGINT again, to the main thread
            threading.Event().wait(60)  # as `emulator start` waits: the signal must cut the wait, not time it out
        assert ref() is None
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
        sys.unraisablehook = previous[2]
        interrupts.received, interrupts._last = False, None


def test_a_signal_whose_interrupt_was_lost_still_ends_the_wait_for_one():
    from bootstrap.kit import interrupts

    try:
        interrupts.received, interrupts._last = True, signal.SIGTERM  # its handler ran; its exception went nowhere
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            interrupts.wait_for_signal()
    finally:
        interrupts.received, interrupts._last = False, None


def test_an_unraisable_error_that_is_not_an_interrupt_is_still_printed(capsys):
    from bootstrap.kit import interrupts

    class Broken:
        def __del__(self):
            raise ValueError("a real bug in a finaliser")

    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.unraisablehook
    try:
        interrupts.install()
        Broken()
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
        sys.unraisablehook = previous[2]
    assert "a real bug in a finaliser" in capsys.readouterr().err
