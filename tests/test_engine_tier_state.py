"""Engine tier: Pulumi's real objects in the state bucket, read, placed and restored by groundctl.

Two applies of the stand-in layers give every kind of copy Pulumi's DIY backend writes (S3 versions
of the checkpoint, `.bak`, history checkpoints, backups); the tests then damage the current
checkpoint in the ways the recovery is designed for, and after every restore the real engine must
load the stack (Pulumi's own integrity check) and preview no changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess

import pytest

from bootstrap.engine.workspace import backend_url
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import tier  # noqa: F401 - fixture

pytestmark = [pytest.mark.engine, requires_pulumi]


def _sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def _pulumi(tier, layer: str, *args: str, stack: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, **tier.env, "PULUMI_BACKEND_URL": backend_url(tier.state_bucket, "us-east-1", tier.endpoint)}
    return subprocess.run(["pulumi", *args, "--stack", stack or tier.env_name], cwd=tier.stacks / layer, env=env,
                          capture_output=True, text=True, timeout=180)


def _phases(transcript: dict) -> dict:
    return {p["phase"]: p for p in transcript["phases"]}


def _recover(tier, tmp_path, *flags: str) -> tuple[int, dict]:
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--json", "--out", str(tmp_path), *flags)
    assert code != 70 and out, err
    return code, json.loads(out)


@pytest.fixture(scope="module")
def history(tier):
    """Two recorded applies of network: serials 1 and 2."""
    assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
    tier.spec_path.write_text(tier.spec_path.read_text().replace("az_count: 2", "az_count: 3"))
    assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
    return tier


def test_pulumi_objects_are_candidates_with_lineage_and_serial_and_the_ledger_matches_them(history, tmp_path):
    tier = history
    keys = tier.keys(".pulumi/")
    assert tier.stack_key("network") + ".bak" in keys
    assert sum(k.startswith(".pulumi/history/network/local/") and k.endswith(".checkpoint.json") for k in keys) == 2
    assert sum(k.startswith(".pulumi/backups/network/local/") for k in keys) == 2
    report = tier.cli_json("state", "versions", "SPEC", "network")
    rows = report["candidates"]
    assert {r["source"] for r in rows} == {"current", "version", "bak", "history", "backup"}
    ledger = {r.serial: r for r in __import__("bootstrap.records.ledger", fromlist=["read_ledger"]).read_ledger(
        tier.store, "network", "local").records}
    assert sorted(ledger) == [1, 2] and len({r.lineage for r in ledger.values()}) == 1
    lineage = ledger[1].lineage
    # Every copy Pulumi wrote names the stack's lineage (the program exports it) once groundctl set it.
    assert all(r["lineage"] == lineage for r in rows if r["verdict"] == "integral" and r["lineage"])
    current = next(r for r in rows if r["source"] == "current")
    assert current["serial"] == 2 and current["sha256"] == ledger[2].sha256
    # The ledger holds exactly the bytes and the S3 version Pulumi wrote at the end of each apply.
    for serial, rec in ledger.items():
        body = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"),
                                  VersionId=rec.version_id)["Body"].read()
        assert _sha(body) == rec.sha256
        copies = {r["source"] for r in rows if r["sha256"] == rec.sha256}
        assert {"version", "history", "backup"} <= copies | {"version"} and "history" in copies, (serial, copies)
        assert all(r["serial"] == serial for r in rows if r["sha256"] == rec.sha256)
    mid = [r for r in rows if r["serial"] == "-" and r["verdict"] == "integral" and r["source"] == "version"]
    assert mid and all(r["placement"]["status"] in ("between", "after-head", "before-first") for r in mid)


def test_the_state_loss_drill_passes_for_real(history, tmp_path):
    tier = history
    code, out, err = tier.cli("drill", "state-loss", "SPEC", "--layer", "network", "--yes", "--json",
                              "--out", str(tmp_path))
    assert code == 0, err + out
    report = json.loads(out)
    assert report["verdict"]["passed"] is True and report["verdict"]["within_rto"] is True
    phases = {p["name"]: p for p in report["phases"]}
    assert list(phases) == ["preflight", "baseline", "delete-state", "recover", "verify"]
    assert all(p["status"] == "achieved" and p["seconds"] >= 0 for p in phases.values())
    guide = {p["phase"]: p["reason"] for p in phases["recover"]["details"]["guide_phases"]}
    assert guide["assess"] == "StateDeleted" and guide["verify"] == "NoChanges"  # the real engine's refresh preview
    assert report["recovery_point"]["loses_nothing"] is True
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".md", ".json", ".svg")) and any(
        p.suffix == ".md" for p in tmp_path.iterdir())
    exported = _pulumi(tier, "network", "stack", "export")  # Pulumi itself loads the restored stack
    assert exported.returncode == 0 and len(json.loads(exported.stdout)["deployment"]["resources"]) == 9


def _assert_pulumi_loads_it_and_sees_no_changes(tier, transcript: dict):
    """Pulumi's own reading of the restored checkpoint: the recovery's last phase was the real engine's
    `preview --refresh --expect-no-changes`, and `pulumi stack export` (its integrity check) loads it."""
    assert _phases(transcript)["verify"]["reason"] == "NoChanges"
    exported = _pulumi(tier, "network", "stack", "export")
    assert exported.returncode == 0, exported.stderr
    assert len(json.loads(exported.stdout)["deployment"]["resources"]) == 9


def test_a_truncated_current_checkpoint_is_replaced_by_the_ledger_head(history, tmp_path):
    tier = history
    good = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["Body"].read()
    tier.put_state("network", good[: len(good) // 2])
    assert _pulumi(tier, "network", "stack", "export").returncode != 0  # Pulumi cannot load it either
    code, t = _recover(tier, tmp_path)
    phases = _phases(t)
    assert code == 0 and t["outcome"] == "complete", phases
    assert phases["assess"]["reason"] == "StateUnreadable"
    chosen = phases["choose"]["details"]["chosen"]
    head = tier.ledger_serials("network")[-1] - 1  # the restore itself is the newest record now
    assert chosen["serial"] == head and phases["verify"]["reason"] == "NoChanges"
    assert _sha(tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["Body"].read()) == _sha(good)
    _assert_pulumi_loads_it_and_sees_no_changes(tier, t)


def test_an_older_state_written_over_the_head_is_rolled_forward_to_the_head(history, tmp_path):
    """A forged serial: the current checkpoint holds serial 1's state, written after serial N was recorded."""
    tier = history
    from bootstrap.records.ledger import read_ledger

    records = read_ledger(tier.store, "network", "local").records
    first = records[0]
    old = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"),
                             VersionId=first.version_id)["Body"].read()
    tier.put_state("network", old)
    code, out, err = tier.cli("state", "verify", "SPEC", "network", "--json")
    assert code == 1 and "rollback" in [p["code"] for p in json.loads(out)["problems"]]
    code, t = _recover(tier, tmp_path)
    phases = _phases(t)
    assert t["outcome"] == "complete", phases
    assert phases["choose"]["details"]["chosen"]["serial"] == records[-1].serial
    _assert_pulumi_loads_it_and_sees_no_changes(tier, t)


def test_a_checkpoint_of_a_foreign_lineage_is_passed_over_or_refused(history, tmp_path):
    tier = history
    body = json.loads(tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["Body"].read())
    stack_res = next(r for r in body["checkpoint"]["latest"]["resources"] if r["type"] == "pulumi:pulumi:Stack")
    lineage = stack_res["outputs"]["groundctl_lineage"]
    stack_res["outputs"]["groundctl_lineage"] = "99999999-9999-4999-8999-999999999999"
    tier.put_state("network", json.dumps(body).encode())
    code, t = _recover(tier, tmp_path)
    phases = _phases(t)
    assert t["outcome"] == "complete", phases
    assert phases["choose"]["details"]["chosen"]["lineage"] == lineage
    _assert_pulumi_loads_it_and_sees_no_changes(tier, t)


def test_pulumi_import_with_the_document_groundctl_writes(history, tmp_path):
    """As far as dynamic resources allow: groundctl's `state import-plan` names every resource of the
    stack (type, logical name, id) in the `pulumi import --file` format, and Pulumi accepts the document
    and plans one import per entry. The import itself cannot finish: a dynamic resource's provider is
    pickled into its inputs (`__provider`), and an import has no inputs, so Pulumi's dynamic provider
    host fails with KeyError: '__provider' on every Read (pulumi/dynamic/__main__.py, get_provider).
    Real provider types (aws) import by id alone; their ids are covered by tests/test_import_ids.py."""
    tier = history
    exported = _pulumi(tier, "network", "stack", "export")
    assert exported.returncode == 0, exported.stderr
    state = json.loads(exported.stdout)
    state_file = tmp_path / "network-local.json"
    state_file.write_text(exported.stdout)
    doc = tmp_path / "import.json"
    code, out, err = tier.cli("state", "import-plan", str(state_file), "--out", str(doc), "--json", endpoint=False)
    assert code == 0, err
    plan = json.loads(doc.read_text())
    wanted = [{"type": r["type"], "name": r["urn"].rsplit("::", 1)[1], "id": r["id"]}
              for r in state["deployment"]["resources"] if r["type"] == "pulumi-python:dynamic:Resource"]
    assert plan["resources"] == wanted and len(wanted) == 7

    assert _pulumi(tier, "network", "stack", "init", "--secrets-provider", "passphrase", stack="adopted").returncode == 0
    imp = _pulumi(tier, "network", "import", "--file", str(doc), "--yes", "--generate-code=false", "--protect=false",
                  stack="adopted")
    assert imp.returncode != 0
    for entry in wanted:  # Pulumi read the document: one import step per entry, each refused by the host
        assert f"pulumi-python:dynamic:Resource {entry['name']} import error" in imp.stdout
    assert imp.stdout.count("KeyError: '__provider'") >= len(wanted)
    adopted = _pulumi(tier, "network", "stack", "export", stack="adopted")
    assert [r for r in json.loads(adopted.stdout)["deployment"].get("resources") or []
            if r["type"] != "pulumi:pulumi:Stack"] == []
    assert _pulumi(tier, "network", "stack", "rm", "--yes", "--force", stack="adopted").returncode == 0


def test_a_forged_ledger_serial_naming_an_older_pulumi_version_is_refused(history, tmp_path):
    """A forged serial: a well-chained new ledger record that names serial 1's S3 version as the head."""
    import dataclasses

    from bootstrap.records import layout
    from bootstrap.records.ledger import read_ledger

    tier = history
    records = read_ledger(tier.store, "network", "local").records
    forged = dataclasses.replace(records[0], serial=records[-1].serial + 1, previous_sha256=records[-1].sha256)
    tier.store.put(layout.ledger_key("network", "local", forged.serial), forged.to_json())
    before = tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["VersionId"]
    code, t = _recover(tier, tmp_path)
    choose = _phases(t)["choose"]
    assert code == 3 and choose["reason"] == "TamperedLedger", choose
    assert "--allow-tampered-ledger" in choose["next_step"]
    assert tier.s3.get_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))["VersionId"] == before
