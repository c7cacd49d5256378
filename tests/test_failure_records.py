"""A scheduled run that failed leaves a trace (issue 18 §4): `drift --record` keeps a failed check as a
record with its reason, and a drill refused at its preflight is stored in the bucket, so `drill history`
(and `fleet status`) show them."""

from __future__ import annotations

import json

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.drift import drift_record, failed_drift_record, parse_name, record_name
from tests.test_cli_state_inspect import groundctl
from tests.test_guide import spec_file  # noqa: F401 - fixture

NO_CLI = {"PATH": "/usr/bin:/bin", "PULUMI_CONFIG_PASSPHRASE": "failure-records"}


@pytest.fixture
def store(aws, bucket):
    return ObjectStore(aws.client("s3"), bucket)


def test_a_failed_check_has_its_own_name_and_shape_beside_clean_and_drift():
    clock = lambda: 1_800_000_000.0  # noqa: E731
    rows = [{"layer": "network", "state": "clean", "summary": "no changes", "counts": {}}]
    failed = failed_drift_record("dev", "Pulumi preview of layer 'cluster' failed: AccessDenied.", rows,
                                 clock=clock, check_id="c1")
    assert (failed["outcome"], failed["drift"], failed["reason"]) == ("failed", None, failed["reason"])
    assert [r["layer"] for r in failed["layers"]] == ["network"]  # what it did check before it stopped
    assert record_name(failed).endswith("-c1--failed")
    assert parse_name(record_name(failed)) == {"check_id": "c1", "at": failed["at"], "outcome": "failed",
                                               "drift": None, "drifted_layers": []}
    clean = drift_record("dev", rows, clock=clock, check_id="c2")
    assert clean["outcome"] == "clean" and parse_name(record_name(clean))["outcome"] == "clean"
    drifted = drift_record("dev", [rows[0] | {"state": "drift"}], clock=clock, check_id="c3")
    assert parse_name(record_name(drifted)) | {} == {"check_id": "c3", "at": drifted["at"], "outcome": "drift",
                                                      "drift": True, "drifted_layers": ["network"]}


def test_drift_record_keeps_a_check_that_failed_with_its_reason(store, spec_file, emulator_endpoint):
    r = groundctl("drift", str(spec_file), "--record", "--endpoint-url", emulator_endpoint, env=NO_CLI)
    assert r.returncode == 4, r.stdout + r.stderr
    keys = [k for k, _s, _m in store.keys(".groundctl/drift/local/")]
    # the failed check's record, and the summary it refreshed (sorted after every record)
    assert len(keys) == 2 and keys[0].endswith("--failed.json") and keys[1].endswith("/~summary.json"), keys
    record = json.loads(store.get(keys[0]).body)
    assert record["outcome"] == "failed" and record["drift"] is None
    assert "Pulumi CLI is not installed" in record["reason"]
    assert "failed" in r.stderr and keys[0] in " ".join(r.stderr.split())


def test_a_drill_refused_at_its_preflight_is_stored_and_shown_by_history(store, spec_file, emulator_endpoint,
                                                                          tmp_path):
    r = groundctl("drill", "state-loss", str(spec_file), "--layer", "network", "--yes", "--out", str(tmp_path),
                  "--endpoint-url", emulator_endpoint, env=NO_CLI)
    assert r.returncode == 3, r.stdout + r.stderr  # nothing deployed: the preflight refuses
    keys = [k for k, _s, _m in store.keys(".groundctl/drills/local/")]
    assert len(keys) == 1, keys
    stored = json.loads(store.get(keys[0]).body)
    assert stored["verdict"]["outcome"] == "refused" and stored["verdict"]["failed_phase"] == "preflight"
    h = groundctl("drill", "history", str(spec_file), "--json", "--endpoint-url", emulator_endpoint, env=NO_CLI)
    [row] = json.loads(h.stdout)["drills"]
    assert (row["kind"], row["verdict"], row["reason"]) == ("state-loss", "refused", stored["verdict"]["reason"])
    assert row["message"] == stored["verdict"]["message"]


# -- the next step names the real cause and the command that fixes it --------------------------------------


def test_recover_on_a_never_deployed_layer_says_up_not_import_plan(store, spec_file, emulator_endpoint):
    r = groundctl("recover", str(spec_file), "cluster", "--dry-run", "--json", "--endpoint-url", emulator_endpoint,
                  env=NO_CLI)
    t = json.loads(r.stdout)
    stop = next(c for c in t["phases"] if c["status"] == "refused")
    assert r.returncode == 3 and (stop["phase"], stop["reason"]) == ("candidates", "NeverDeployed"), r.stdout
    assert stop["next_step"].startswith("`groundctl up local --layers cluster` creates it")


def test_rebuild_preflight_on_a_never_deployed_environment_says_up_not_recover(store, spec_file, emulator_endpoint):
    r = groundctl("drill", "rebuild-cluster", str(spec_file), "--dry-run", "--json", "--endpoint-url",
                  emulator_endpoint, env=NO_CLI)
    pre = next(p for p in json.loads(r.stdout)["phases"] if p["name"] == "preflight")
    assert pre["status"] == "refused", r.stdout + r.stderr
    assert "groundctl recover" not in pre["message"]
    assert "backend has never been deployed in local" in pre["message"]
    assert "`groundctl up local --layers backend` creates it" in pre["message"]


def test_state_loss_drill_without_the_cli_names_the_cli_not_the_cluster(store, aws, spec_file, emulator_endpoint,
                                                                         tmp_path, monkeypatch):
    import tests.test_recovery_scenarios as sc

    monkeypatch.setattr(sc, "ENV", "local")
    monkeypatch.setattr(sc, "KEY", sc.layout.stack_key(sc.LAYER, "local"))
    sc.history(store)  # a deployed, verified network layer
    r = groundctl("drill", "state-loss", str(spec_file), "--layer", "network", "--yes", "--json", "--out",
                  str(tmp_path), "--endpoint-url", emulator_endpoint, env=NO_CLI)
    baseline = next(p for p in json.loads(r.stdout)["phases"] if p["name"] == "baseline")
    assert r.returncode == 4 and baseline["status"] == "failed", r.stdout + r.stderr
    assert "cluster" not in baseline["next_step"] and "Flux" not in baseline["next_step"]
    assert "the Pulumi CLI is not on PATH" in baseline["next_step"] and "`pulumi version`" in baseline["next_step"]
    assert "groundctl drill state-loss local --layer network --dry-run" in baseline["next_step"]
