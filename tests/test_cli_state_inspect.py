"""`groundctl state inspect` and `groundctl state versions`, run as an operator runs them (subprocess)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time

import pytest
import yaml

from bootstrap.records import layout
from bootstrap.aws.objectstore import ObjectStore
from tests.conftest import REPO, STATES
from tests.test_state_integrity import base_resources, build_state

CANARY = "canary-secret-7f3a9c1e"


def groundctl(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "groundctl", *args]
    full_env = {k: v for k, v in os.environ.items() if k != "GROUNDCTL_ENDPOINT_URL"}
    full_env.update(env or {})
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60, env=full_env)


def test_inspect_an_integral_export():
    r = groundctl("state", "inspect", str(STATES / "aws-subnet-group.json"))
    assert r.returncode == 0, r.stderr
    assert "Integrity: OK" in r.stdout and "aws:ec2/subnet:Subnet" in r.stdout and "Traceback" not in r.stderr


def test_inspect_json_of_a_failing_checkpoint_exits_1():
    r = groundctl("state", "inspect", str(STATES / "checkpoint-v3.json"), "--json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["integral"] is False and report["resources"] == 30
    assert {f["code"] for f in report["findings"]} == {"parent-after-child"}
    assert report["resources_by_type"]["aws:lambda/function:Function"] == 3


def test_inspect_a_file_that_is_not_a_state_exits_2(tmp_path):
    junk = tmp_path / "notes.json"
    junk.write_text('{"hello": "world"}')
    r = groundctl("state", "inspect", str(junk))
    assert r.returncode == 2 and "not a readable Pulumi state" in r.stderr and "Traceback" not in r.stderr
    r = groundctl("state", "inspect", str(tmp_path / "absent.json"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_inspect_compressed_with_stack_pending_and_lineage(tmp_path):
    pending = [{"type": "creating", "resource": {"urn": "urn:pulumi:dev::network::aws:ec2/eip:Eip::nat",
                                                 "type": "aws:ec2/eip:Eip", "custom": True}}]
    f = tmp_path / "dev.json.gz"
    f.write_bytes(gzip.compress(build_state(base_resources("lin-42"), pending=pending)))
    r = groundctl("state", "inspect", str(f), "--stack", "organization/network/dev", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert (report["compression"], report["lineage"], report["integral"]) == ("gzip", "lin-42", True)
    assert report["pending_operations"][0]["type"] == "creating" and "import" in report["pending_operations"][0]["meaning"]
    r = groundctl("state", "inspect", str(f), "--stack", "organization/network/prod")
    assert r.returncode == 1 and "stack-mismatch" in r.stdout and "Pending operations" in r.stdout


def test_inspect_never_prints_resource_values(tmp_path):
    rs = base_resources()
    rs[2]["outputs"] = {"password": CANARY}
    rs[2]["inputs"] = {"password": CANARY}
    f = tmp_path / "export.json"
    f.write_bytes(build_state(rs, export=True))
    for args in ((), ("--json",)):
        r = groundctl("state", "inspect", str(f), *args)
        assert r.returncode == 0 and CANARY not in r.stdout + r.stderr


def test_inspect_shows_hostile_names_as_written(tmp_path):
    rs = base_resources()
    rs.append({"urn": "urn:pulumi:dev::network::x:y:Z::[bold]\x1b[31mred", "type": "x:y:Z", "custom": False,
               "id": "i-1"})
    f = tmp_path / "odd.json"
    f.write_bytes(build_state(rs))
    r = groundctl("state", "inspect", str(f))
    assert r.returncode == 1 and "[bold]" in r.stdout and "\x1b[31m" not in r.stdout


# -- versions -------------------------------------------------------------------------------------


@pytest.fixture
def spec_file(tmp_path, bucket):
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["backend"]["bucket"] = bucket
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_versions_lists_candidates_with_verdicts(aws, bucket, spec_file, emulator_endpoint):
    store = ObjectStore(aws.client("s3"), bucket)
    key = layout.stack_key("network", "local")
    good = build_state(base_resources("lin-9"), stack="organization/network/local")
    store.put(key, good)
    store.put(key + ".bak", good)
    store.put(key, good[:60])
    r = groundctl("state", "versions", str(spec_file), "network", "--json", "--endpoint-url", emulator_endpoint)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert [(c["source"], c["verdict"]) for c in out["candidates"]] == [
        ("current", "unreadable"), ("bak", "integral"), ("version", "integral")]
    assert out["candidates"][1]["lineage"] == "lin-9" and out["candidates"][1]["serial"] == "-"
    assert out["downloads"] == 2  # the .bak and the older version hold the same bytes
    r = groundctl("state", "versions", str(spec_file), "network", env={"GROUNDCTL_ENDPOINT_URL": emulator_endpoint,
                                                                       "COLUMNS": "200"})
    assert r.returncode == 0 and "unreadable" in r.stdout and "integral" in r.stdout


def test_versions_puts_each_candidate_on_the_ledger(aws, bucket, spec_file, emulator_endpoint):
    from bootstrap.records.ledger import append_record

    store = ObjectStore(aws.client("s3"), bucket)
    key = layout.stack_key("network", "local")
    first = build_state(base_resources("lin-9"), stack="organization/network/local")
    store.put(key, first)
    append_record(store, "network", "local", operation="up", run_id="r1", lineage="lin-9", settle_seconds=0)
    mid = build_state(base_resources("lin-9")[:1], stack="organization/network/local")
    time.sleep(1.1)  # S3 times have one-second resolution; a copy from the record's second is put before it
    store.put(key, mid)  # written by a later, interrupted update, never recorded
    r = groundctl("state", "versions", str(spec_file), "network", "--json", "--endpoint-url", emulator_endpoint)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["candidates"]
    assert [(c["source"], c["serial"]) for c in rows] == [("current", "-"), ("version", 1)]
    assert rows[0]["placement"]["status"] == "after-head" and rows[0]["placement"]["after_serial"] == 1
    assert rows[1]["placement"]["status"] == "ledgered"


def test_versions_of_an_embedded_environment_needs_a_running_emulator(spec_file):
    r = groundctl("state", "versions", str(spec_file), "network")
    assert r.returncode == 2 and "groundctl emulator start" in r.stderr


def test_versions_of_an_unknown_layer(spec_file, emulator_endpoint):
    r = groundctl("state", "versions", str(spec_file), "nope", "--endpoint-url", emulator_endpoint)
    assert r.returncode == 2 and "is not a layer" in r.stderr
