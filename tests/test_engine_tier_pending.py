"""Engine tier, issue 27 §2: never re-create what a killed update was creating.

An update is killed while it creates two records: one whose create made nothing yet, one whose create made
its object under an ID of its own (as AWS gives each EIP or NAT gateway a new one) and never answered.
Pulumi itself would run the next update regardless (pkg/resource/deploy/deployment_executor.go:183-187 only
warns) and make that second record again beside the first. groundctl's `up`, `plan`, `drift` and `destroy`
refuse instead, naming each pending operation and what resolves it; after the recovery the layer is applied
and every record exists exactly once. A pending delete is resolved by the runbook's targeted refresh.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bootstrap.engine.pending import RESOLVE_RUNBOOK
from bootstrap.engine.workspace import ENFORCED_ENV, backend_url
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import tier, wait_for  # noqa: F401 - fixture
from tests.test_engine_tier_interrupts import _break_pulumi_lock, _kill_the_update, _pending

pytestmark = [pytest.mark.engine, requires_pulumi]

DYNAMIC = "pulumi-python:dynamic:Resource"


def _objects(tier, name: str) -> list[str]:
    """The records bucket's objects of record `name` of the network layer: its own key, or an allocated one."""
    key = tier.record_key("network", name)
    pages = tier.s3.get_paginator("list_objects_v2").paginate(Bucket=tier.records_bucket, Prefix=key)
    return [o["Key"] for page in pages for o in page.get("Contents", [])
            if o["Key"] == key or o["Key"].startswith(key + ".")]


def _ops(tier) -> set[tuple[str, str]]:
    return {(p["type"], p["resource"]["urn"].rsplit("::", 1)[1]) for p in _pending(tier, "network")}


def _az(tier, count: int) -> None:
    text = tier.spec_path.read_text()
    current = next(line for line in text.splitlines() if "az_count:" in line)
    tier.spec_path.write_text(text.replace(current, current.split(":")[0] + f": {count}"))


def _stack_versions(tier) -> list[str]:
    listed = tier.s3.list_object_versions(Bucket=tier.state_bucket, Prefix=tier.stack_key("network"))
    return [v["VersionId"] for v in listed.get("Versions", []) if v["Key"] == tier.stack_key("network")]


def _killed_up(tier, faults: dict, until, *flags: str) -> None:
    run = tier.spawn("up", "SPEC", "--layers", "network", "--yes", *flags, "--json", faults=faults)
    try:
        wait_for("the update caught in the act", until, timeout=180)
        _kill_the_update(run)
    finally:
        run.communicate(timeout=180)
    assert run.returncode == 4
    _break_pulumi_lock(tier, "network")  # runbooks/break-stale-lock.md: the killed update's Pulumi lock


@pytest.mark.timeout(1800)  # two updates, a kill and five refused runs of a real engine on a loaded machine
def test_after_a_killed_create_every_command_refuses_naming_it_and_nothing_changes(tier):
    assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
    _az(tier, 3)
    _killed_up(tier, {"private-2": "sleep:300", "public-2": "allocate-then-sleep:300"},
               lambda: _ops(tier) == {("creating", "private-2"), ("creating", "public-2")}
               and _objects(tier, "public-2"))
    orphan = _objects(tier, "public-2")
    assert len(orphan) == 1 and orphan[0] != tier.record_key("network", "public-2")  # made, never answered
    assert _objects(tier, "private-2") == []
    tier.notes["killed"] = orphan[0]
    versions = _stack_versions(tier)

    code, out, err = tier.cli("up", "SPEC", "--layers", "network", "--yes", "--json")
    message = " ".join(err.split())
    assert code == 3, err + out
    for name in ("private-2", "public-2"):
        assert f"creating {DYNAMIC} '{name}'" in message
    assert f"`groundctl recover {tier.env_name} network`" in message and "nothing was changed" in message
    assert RESOLVE_RUNBOOK not in message  # only creates: recover resolves them all
    record = json.loads(out)
    assert record["outcome"] == "refused" and record["stopped_at"] == "pending", record  # before any layer
    assert _objects(tier, "public-2") == orphan  # Pulumi alone would have made a second one here
    assert _stack_versions(tier) == versions and _ops(tier) == {("creating", "private-2"), ("creating", "public-2")}

    for command in (("plan", "SPEC", "--layers", "network", "--out", str(tier.stacks.parent / "plans")),
                    ("drift", "SPEC", "--layers", "network"),
                    ("destroy", "SPEC", "--layers", "network", "--yes")):
        code, out, err = tier.cli(*command)
        assert code == 3 and "2 pending operations" in " ".join(err.split()), (command, err + out)
    assert _stack_versions(tier) == versions
    assert _objects(tier, "vpc") and _objects(tier, "public-2") == orphan  # the destroy deleted nothing


@pytest.mark.timeout(1800)
def test_after_the_recovery_the_layer_is_applied_and_each_record_exists_once(tier, tmp_path):
    orphan = tier.notes.get("killed")
    if not orphan:
        pytest.skip("needs the killed update of the test before it: run the module whole")
    # The recovery refuses what inventory cannot see (dynamic records); the operator checks by hand, as its
    # refusal says: private-2 made nothing, public-2 made an object nothing tracks, which they delete (a
    # dynamic resource cannot be imported: tests/test_engine_tier_interrupts.py).
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--json", "--out", str(tmp_path / "first"))
    assert code == 3 and {c["phase"]: c["status"] for c in json.loads(out)["phases"]}["pending"] == "refused", err
    tier.s3.delete_object(Bucket=tier.records_bucket, Key=orphan)
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--allow-clear-unchecked-creates", "--json",
                              "--out", str(tmp_path / "rec"))
    assert code == 0 and json.loads(out)["outcome"] == "complete", err + out
    assert _ops(tier) == set()

    assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
    for name in ("vpc", "private-0", "private-1", "private-2", "public-0", "public-1", "public-2"):
        assert _objects(tier, name) == [tier.record_key("network", name)], name
    assert tier.cli_json("drift", "SPEC", "--layers", "network")["drift"] is False
    tier.notes["recovered"] = True


@pytest.mark.timeout(1800)
def test_a_pending_delete_is_refused_with_the_runbook_and_its_refresh_resolves_it(tier):
    if not tier.notes.get("recovered"):
        pytest.skip("needs the environment the test before it recovered: run the module whole")
    _az(tier, 2)
    # public-2's delete finishes at once; private-2's stalls and is killed.
    _killed_up(tier, {"private-2": "delete-sleep:300"}, lambda: _ops(tier) == {("deleting", "private-2")},
               "--allow-destroy")
    assert _ops(tier) == {("deleting", "private-2")} and _objects(tier, "public-2") == []
    code, out, err = tier.cli("up", "SPEC", "--layers", "network", "--yes", "--allow-destroy")
    message = " ".join(err.split())
    assert code == 3 and f"deleting {DYNAMIC} 'private-2'" in message, err + out
    assert RESOLVE_RUNBOOK in message and "groundctl recover" not in message

    # runbooks/resolve-pending-operations.md step 3, as written there: the enforced settings, a targeted
    # refresh that leaves pending creates alone.
    (urn,) = [p["resource"]["urn"] for p in _pending(tier, "network")]
    env = {**os.environ, **tier.env, **ENFORCED_ENV,
           "PULUMI_BACKEND_URL": backend_url(tier.state_bucket, "us-east-1", tier.endpoint)}
    done = subprocess.run(["pulumi", "refresh", "--stack", tier.env_name, "--yes", "--skip-pending-creates",
                           "--target", urn], cwd=tier.stacks / "network", env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _ops(tier) == set()
    assert _objects(tier, "private-2")  # the delete never ran: the refresh kept it in the state...

    record = tier.cli_json("up", "SPEC", "--layers", "network", "--yes", "--allow-destroy")
    assert record["outcome"] == "succeeded", record
    assert _objects(tier, "private-2") == []  # ...and this up deleted it
    assert tier.cli_json("drift", "SPEC", "--layers", "network")["drift"] is False
