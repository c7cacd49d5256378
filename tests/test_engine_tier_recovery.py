"""Engine tier, issue 18: a verification whose preview fails reads as failed (never as drift), and a pending
delete left by a killed update is never dropped by clearing pending creates.

The record programs (tests/engine_programs) take faults from ENGINE_TIER_FAULTS: "read-fail" makes a
refresh's read of one record fail, "delete-sleep:<s>" stalls a delete so the update can be killed in it.
"""

from __future__ import annotations

import json

import pytest

from bootstrap.kit.errors import Refused
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, tier, wait_for  # noqa: F401 - fixture
from tests.test_engine_tier_interrupts import _break_pulumi_lock, _kill_the_update, _pending

pytestmark = [pytest.mark.engine, requires_pulumi]

READ_FAILS = {"ENGINE_TIER_FAULTS": json.dumps({"vpc": "read-fail"})}


def test_a_verification_whose_preview_fails_is_a_failure_with_the_engines_error(tier, tmp_path):
    assert tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")["outcome"] == "succeeded"
    tier.notes["deployed"] = True

    # The recovery's verification: the state is current and recorded, so it goes straight to the
    # `preview --refresh --expect-no-changes`, whose refresh of `vpc` fails.
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--json", "--out", str(tmp_path / "rec"),
                              env=READ_FAILS)
    t = json.loads(out)
    verify = {c["phase"]: c for c in t["phases"]}["verify"]
    assert code == 4 and t["outcome"] == "incomplete", err + out
    assert (verify["status"], verify["reason"], verify["exit_code"]) == ("failed", "VerificationFailed", 4)
    assert "injected failure reading record vpc" in verify["message"]
    assert "plan" not in verify["details"]  # no plan of "changes" made up from a refresh that never finished

    # The state-loss drill's baseline is the same preview: it fails (exit 4), it is not "drift".
    code, out, err = tier.cli("drill", "state-loss", "SPEC", "--layer", "network", "--yes", "--json",
                              "--out", str(tmp_path / "drill"), env=READ_FAILS)
    report = json.loads(out)
    baseline = next(p for p in report["phases"] if p["name"] == "baseline")
    assert code == 4, err + out
    assert baseline["status"] == "failed" and baseline["reason"] != "BaselineDrift"
    assert "injected failure reading record vpc" in baseline["message"]
    assert next(p for p in report["phases"] if p["name"] == "delete-state")["attempted"] is False

    # Without the fault the same verification is clean: the failure was the read, nothing else.
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--json", "--out", str(tmp_path / "ok"))
    assert code == 0 and json.loads(out)["outcome"] == "complete", err + out


def _ops(tier) -> set[tuple[str, str]]:
    return {(p["type"], p["resource"]["urn"].rsplit("::", 1)[1]) for p in _pending(tier, "network")}


def _killed_up(tier, az_count: int, faults: dict, until, *flags: str, unguarded: bool = False) -> None:
    """`up` with `az_count` zones, killed (with everything it started) once `until()` holds; `unguarded`: an
    update groundctl's pending-operations check does not stop (an older groundctl, `pulumi up` by hand)."""
    text = tier.spec_path.read_text()
    current = next(line for line in text.splitlines() if "az_count:" in line)
    tier.spec_path.write_text(text.replace(current, current.split(":")[0] + f": {az_count}"))
    run = tier.spawn("up", "SPEC", "--layers", "network", "--yes", *flags, "--json", faults=faults,
                     env={"ENGINE_TIER_UNGUARDED": "1"} if unguarded else None)
    try:
        wait_for(f"the update with {az_count} zones caught in the act", until, timeout=120)
        _kill_the_update(run)
    finally:
        run.communicate(timeout=120)
    assert run.returncode == 4
    _break_pulumi_lock(tier, "network")  # the killed update's Pulumi lock (runbooks/break-stale-lock.md)


def test_a_pending_delete_left_by_a_killed_update_is_never_dropped_by_clearing_pending_creates(tier, tmp_path):
    if not tier.notes.get("deployed"):
        pytest.skip("needs the environment the test before it deployed: run the module whole")
    # 1. Killed while creating private-2: a pending create (every later update carries it forward).
    _killed_up(tier, 3, {"private-2": "sleep:120"}, lambda: ("creating", "private-2") in _ops(tier))
    # 2. Killed while deleting private-1 (fewer zones): a pending delete beside the carried pending create.
    # groundctl now refuses that update (tests/test_engine_tier_pending.py); one it cannot stop makes it.
    _killed_up(tier, 1, {"private-1": "delete-sleep:120"}, lambda: ("deleting", "private-1") in _ops(tier),
               "--allow-destroy", unguarded=True)
    assert {("creating", "private-2"), ("deleting", "private-1")} <= _ops(tier)
    before = tier.checkpoint("network")
    creates = [p["resource"]["urn"] for p in before["checkpoint"]["latest"]["pending_operations"]
               if p["type"] == "creating"]

    # The engine boundary, told about every pending create: Pulumi's refresh --clear-pending-creates would
    # drop the pending delete with them (before the fix it did, and the test failed here).
    with pytest.raises(Refused) as refused:
        tier.engine().clear_pending_creates("network", creates)
    assert "deleting" in refused.value.message and "private-1" in refused.value.message
    assert tier.checkpoint("network") == before  # nothing changed

    # The guided recovery refuses at the same point, dry run or not, and says what to do.
    for extra in (("--dry-run",), ("--yes", "--allow-clear-unchecked-creates")):
        code, out, err = tier.cli("recover", "SPEC", "network", *extra, "--json", "--out", str(tmp_path / extra[0]))
        t = json.loads(out)
        stop = next(c for c in t["phases"] if c["status"] == "refused")
        assert code == 3 and (stop["phase"], stop["reason"]) == ("pending", "OtherPendingOperations"), err + out
        assert "pulumi refresh" in stop["next_step"]
        assert "private-1" in [o["urn"].rsplit("::", 1)[1] for o in stop["details"]["operations"]
                               if o["type"] == "deleting"]
    assert ("deleting", "private-1") in _ops(tier)
