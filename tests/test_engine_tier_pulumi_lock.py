"""Engine tier: Pulumi's own stack lock, left by a `pulumi up` killed mid-update (issue 18 §2).

While the update runs its lock is shown alive and is never removed, even with --force. Once the update is
killed (SIGKILL to the pulumi process and its plugins, as a lost machine would), `lock status` shows the
lock's holder (host, pid, time) as dead, a restore of that stack is refused while the lock is there (the
state is not written), `groundctl lock break <env> --pulumi <layer>` removes only that stack's lock and
keeps a copy, and the Pulumi operations after it run.
"""

from __future__ import annotations

import json
import socket

import pytest

from bootstrap.records import layout
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, tier, wait_for  # noqa: F401 - fixture
from tests.test_engine_tier_interrupts import _kill_the_update, _pending, _tree

pytestmark = [pytest.mark.engine, requires_pulumi]


def _pulumi_lock(tier, layer: str):
    code, out, _ = tier.cli("lock", "status", "SPEC", "--json")
    locks = [p for p in json.loads(out)["pulumi_locks"] if p["layer"] == layer] if code == 0 else []
    return locks[0] if locks else None


@pytest.mark.timeout(1500)  # three updates, a kill and two recoveries of a real engine, at a load of 8-10
def test_a_killed_updates_lock_is_shown_refuses_a_restore_and_is_removed_only_when_dead(tier, tmp_path):
    assert tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")["outcome"] == "succeeded"
    tier.spec_path.write_text(tier.spec_path.read_text().replace("az_count: 2", "az_count: 3"))
    run = tier.spawn("up", "SPEC", "--layers", "network", "--yes", "--json",
                     faults={"private-2": "sleep:600", "public-2": "sleep:600"})  # killed long before
    try:
        live = wait_for("Pulumi's lock on network", lambda: _pulumi_lock(tier, "network"), timeout=300)
        assert live["holder_state"] == "alive" and live["pid"] in _tree(run.pid), live
        # A live update's lock is never removed, not even with --force.
        code, _, err = tier.cli("lock", "break", "SPEC", "--pulumi", "network", "--force")
        assert code == 3 and "never removed" in err, err
        assert _pulumi_lock(tier, "network") is not None
        wait_for("the stalled creates pending", lambda: len(_pending(tier, "network")) == 2, timeout=300)
        _kill_the_update(run)
    finally:
        run.communicate(timeout=300)
    assert run.returncode == 4

    dead = _pulumi_lock(tier, "network")
    assert dead["holder_state"] == "dead" and dead["hostname"] == socket.gethostname() and dead["timestamp"]
    assert dead["pid"] == live["pid"] and f"pid {dead['pid']} is gone" in dead["reason"]
    code, out, _ = tier.cli("lock", "status", "SPEC")
    assert f"(pid {dead['pid']}, since {dead['timestamp']})" in " ".join(out.split()) and "holder dead" in out

    # groundctl's `up` stops first, at the pending creates the kill left (tests/test_engine_tier_pending.py).
    code, _, err = tier.cli("up", "SPEC", "--layers", "network", "--yes")
    assert code == 3 and "2 pending operations" in " ".join(err.split()), err
    # An update that gets past that check (an older groundctl, `pulumi up` by hand) takes the lock (previews
    # take none, pkg/backend/diy/backend.go Preview) and stops with the StackLocked message, which names the
    # command that removes this stack's lock.
    code, _, err = tier.cli("up", "SPEC", "--layers", "network", "--yes", env={"ENGINE_TIER_UNGUARDED": "1"})
    assert code == 4 and "groundctl lock break local --pulumi network" in " ".join(err.split()), err

    # The state is damaged by hand: the recovery must restore it, and refuses to while Pulumi holds the stack.
    before = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["Body"].read()
    tier.put_state("network", b"not a state")
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--json", "--out", str(tmp_path / "refused"))
    phases = {c["phase"]: c for c in json.loads(out)["phases"]}
    assert code == 3 and phases["restore"]["status"] == "refused", err + out
    assert "Pulumi holds a lock on the stack network/local" in phases["restore"]["message"]
    assert "groundctl lock break local --pulumi network" in phases["restore"]["message"]
    current = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["Body"].read()
    assert current == b"not a state"  # nothing written

    cluster_before = tier.keys(layout.pulumi_locks_prefix("cluster", "local"))
    broken = tier.cli_json("lock", "break", "SPEC", "--pulumi", "network")
    assert [p["key"] for p in broken["broken"]] == [dead["key"]]
    assert tier.keys(layout.pulumi_locks_prefix("network", "local")) == []
    assert tier.keys(layout.pulumi_locks_prefix("cluster", "local")) == cluster_before
    (kept,) = tier.keys(f"{layout.GROUNDCTL}/locks/broken/local/")
    assert json.loads(json.loads(tier.s3.get_object(Bucket=tier.state_bucket, Key=kept)["Body"].read())[
        "lock_body"])["pid"] == dead["pid"]

    # The next Pulumi operations run: the state goes back as it was, and an update succeeds.
    tier.put_state("network", before)
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--allow-clear-unchecked-creates", "--json",
                              "--out", str(tmp_path / "after"))
    assert "StackLocked" not in out, out
    assert json.loads(out)["outcome"] == "complete" and code == 0, err + out
    assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
    assert _pulumi_lock(tier, "network") is None
