"""Engine tier, issue 37 §1: the rehearsal of a state a real `pulumi up`, killed mid-update, left behind.

The newest state after an interrupted update holds pending operations. The rehearsal used to refuse to preview it
(the engine's pending-operations rule) and reported the layer "cannot be proven restorable": the very state it
exists to prove. Its scratch copy is private, so it previews it, as Pulumi does; the creates the update never
finished are what a recovery reconciles, and any other pending operation makes a recovery refuse: the record
names each, with its kind and URN.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, tier, wait_for  # noqa: F401 - fixture
from tests.test_engine_tier_interrupts import _break_pulumi_lock, _kill_the_update, _pending

pytestmark = [pytest.mark.engine, requires_pulumi]


def _killed_update(tier, faults: dict, stalled: dict, env=None) -> None:
    """`groundctl up --layers network`, its Pulumi processes killed with SIGKILL once the checkpoint holds exactly
    `stalled` ({name: kind}) as its pending operations beyond those it held before."""
    before = {p["resource"]["urn"] for p in _pending(tier, "network")}
    run = tier.spawn("up", "SPEC", "--layers", "network", "--yes", "--json", faults=faults, env=env)
    try:
        wait_for(f"{stalled} pending in the checkpoint", lambda: run.poll() is not None or {
            p["resource"]["urn"].rsplit("::", 1)[1]: p["type"] for p in _pending(tier, "network")
            if p["resource"]["urn"] not in before} == stalled, timeout=120)
        assert run.poll() is None, "the update ended before it was caught in the act"
        _kill_the_update(run)
    finally:
        out, err = run.communicate(timeout=120)
    assert run.returncode == 4, err + out
    _break_pulumi_lock(tier, "network")  # the killed update's, as runbooks/break-stale-lock.md says


def _rehearse(tier, ok=(0,)) -> dict:
    code, out, err = tier.cli("state", "rehearse", "SPEC", "--layers", "network", "--json")
    assert code in ok, f"exit {code}: {err}{out}"
    return next(lay for lay in json.loads(out)["layers"] if lay["layer"] == "network")


def _named(ops: list) -> list:
    return sorted((p["kind"], p["urn"].rsplit("::", 1)[1]) for p in ops)


@pytest.mark.timeout(900)
def test_a_state_left_by_a_killed_update_is_proven_and_what_a_recovery_would_meet_is_recorded(tier):
    code, out, err = tier.cli("up", "SPEC", "--layers", LAYERS, "--yes", "--json")
    assert code == 0, err

    # Killed while creating a third AZ's two records: the newest state holds their pending creates.
    tier.spec_path.write_text(tier.spec_path.read_text().replace("az_count: 2", "az_count: 3"))
    _killed_update(tier, {"private-2": "sleep:120", "public-2": "sleep:120"},
                   {"private-2": "creating", "public-2": "creating"})
    net = _rehearse(tier)
    assert net["outcome"] == "proven" and net["failed_phase"] is None, net
    assert net["version"]["sha256"]  # the newest state, the one the kill left, was restored and previewed
    assert _named(net["pending"]["creates"]) == [("creating", "private-2"), ("creating", "public-2")]
    assert net["pending"]["others"] == []
    preview = net["preview"]
    assert preview["result"] == "no-change" and preview["changes"] == []
    assert "2 create(s) the interrupted update never finished" in preview["summary"]

    # Killed again while updating the VPC's record (the pending creates still there: groundctl's own `up` refuses
    # such a state, so this update is one groundctl does not guard, as an older groundctl or a hand-run Pulumi).
    spec = tier.spec_path.read_text().replace("az_count: 3", "az_count: 2").replace("10.10.0.0/16", "10.11.0.0/16")
    tier.spec_path.write_text(spec)
    _killed_update(tier, {"vpc": "update-sleep:120"}, {"vpc": "updating"}, env={"ENGINE_TIER_UNGUARDED": "1"})
    net = _rehearse(tier, ok=(1,))
    assert (net["outcome"], net["failed_phase"]) == ("failed", "pending"), json.dumps(net, indent=1)
    assert _named(net["pending"]["others"]) == [("updating", "vpc")]
    vpc = next(p["urn"] for p in net["pending"]["others"])
    assert "a recovery of it would refuse" in net["reason"] and f"updating {vpc}" in net["reason"]
    assert net["decrypt"]["result"] == "ok" and net["preview"]["result"] in ("no-change", "drift")
