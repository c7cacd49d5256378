"""kill -9 during a restore, after each of its steps: no version is lost and a re-run completes.

The restore runs in a child process (the real guide, the real lock, the real ledger) with a hook that
SIGKILLs the process right after step N. The re-run is what an operator does: `groundctl lock break`
once the dead run's heartbeat has expired, then the same recovery again.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

import tests.test_recovery_scenarios as sc
from bootstrap.records.lock_status import break_lock
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import ledger as led
from recovery.restoring.restore import STEPS

CHILD = r"""
import functools, os, signal, sys
from bootstrap.aws.clients import AwsClients
from bootstrap.aws.objectstore import ObjectStore
import tests.test_recovery_scenarios as sc
endpoint, bucket, env, kill_after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
sc.ENV = env
store = ObjectStore(AwsClients("us-east-1", endpoint, credentials={"aws_access_key_id": "testing",
                    "aws_secret_access_key": "testing"}).client("s3"), bucket)
def hook(n, name):
    if n == kill_after:
        os.kill(os.getpid(), signal.SIGKILL)
svc = sc.services(store, None, None, after_restore_step=hook)
from recovery.guide.flow import run_guide
from recovery.guide.model import GuideOptions
run_guide(GuideOptions(env, sc.LAYER, yes=True), svc)
print("not killed")
"""


@pytest.fixture
def env(monkeypatch):
    name = f"k{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sc, "ENV", name)
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, name))
    return name


@pytest.mark.parametrize("step", [1, 2, 3, 4])
def test_kill_after_each_step_then_rerun_completes(aws, bucket, emulator_endpoint, env, step):
    store = ObjectStore(aws.client("s3"), bucket)
    engine = sc.history(store, ups=2)
    head = led.read_ledger(store, sc.LAYER, env).head
    store.put(sc.KEY, b'{"version": 3, "checkp')  # a truncated write over the good state
    before = sc.all_versions(store)

    child = subprocess.run([sys.executable, "-c", CHILD, emulator_endpoint, bucket, env, str(step)],
                           cwd=str(sc.layout.__file__).rsplit("/bootstrap/", 1)[0], capture_output=True,
                           text=True, timeout=60)
    assert child.returncode == -9, child.stderr[-2000:]
    assert STEPS[step - 1]
    stored = {x[:2] for x in sc.all_versions(store) if not x[2]}
    assert {x[:2] for x in before if not x[2]} <= stored  # nothing the crash touched was lost

    # The dead run's lock stays until its heartbeat expires; then it can be broken without --force.
    if store.get(sc.layout.lock_key(env)) is not None:
        break_lock(store, env, force=False, by="test operator", clock=lambda: time.time() + 3600)
    t = sc.guide(store, aws, engine)
    assert t.outcome == "complete", [c.to_dict() for c in t.conditions]
    assert sc.sha(store.get(sc.KEY).body) == head.sha256
    records = led.read_ledger(store, sc.LAYER, env).records
    assert [r.operation for r in records].count("restore") == 1
    assert led.verify_chain(records).ok
    assert {x[:2] for x in before if not x[2]} <= {x[:2] for x in sc.all_versions(store) if not x[2]}
