"""A never-deployed environment under CI (README "Pull requests on GitHub Actions", runbooks/create-environment.md
"Under CI"): an environment is created once, by hand, with its apply role; CI plans and applies from then on.

- the pull request's live plan of an environment whose state bucket does not exist answers "not deployed yet"
  with that next step, exit 0 (the check passes), and its sticky comment says so;
- the merge's `up --plan-dir` of that environment refuses before it writes anything (no bucket, no key, no lock):
  a reviewed plan never creates an environment, so the bucket it would have previewed against must exist first.

The real CLI, in a subprocess, against the emulator with a bucket that does not exist; the engine is the stand-in
that passes the engine check (tests/conftest.py), since nothing here gets as far as a preview."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, engine_stand_in

pytestmark = pytest.mark.emulator


def _spec(tmp_path: Path) -> tuple[Path, str]:
    data = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    data["backend"]["bucket"] = bucket = f"gl-never-{uuid.uuid4().hex[:12]}"
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, bucket


def _groundctl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if k != "GROUNDCTL_ENDPOINT_URL"}, "PYTHONPATH": str(REPO),
           "COLUMNS": "200", **engine_stand_in(tmp_path, ["backend", "network", "cluster", "flux"])}
    return subprocess.run([sys.executable, "-m", "groundctl", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)


def _buckets(aws) -> set[str]:
    return {b["Name"] for b in aws.client("s3").list_buckets()["Buckets"]}


def test_the_first_plan_says_not_deployed_yet_with_the_next_step_and_passes(tmp_path, aws, emulator_endpoint):
    spec, bucket = _spec(tmp_path)
    out = tmp_path / "plans" / "local"
    proc = _groundctl(tmp_path, "plan", str(spec), "--out", str(out / "live"), "--endpoint-url", emulator_endpoint)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"local: not deployed yet: the state bucket {bucket} does not exist." in said
    assert "Next: create local once, by hand, with its apply role: `groundctl up local`" in said
    assert "runbooks/create-environment.md" in said and "Traceback" not in said
    combined = json.loads((out / "live" / "plan-local-live.json").read_text())
    assert combined["not_deployed"] is True and combined["summary"].startswith("not deployed yet: the state bucket")
    assert combined["has_changes"] is False
    layers = {p["layer"]: p for p in combined["layers"]}
    assert [n for n, p in layers.items() if p["not_deployed"]] == ["backend", "network", "cluster"]
    assert "no Kubernetes API" in layers["flux"]["skipped_reason"]  # skipped for its own reason, as always here
    assert bucket not in _buckets(aws)  # a plan creates nothing

    # The PR job's next step: the sticky comment says it, in its verdict row.
    comment = _groundctl(tmp_path, "ci", "comment", "local", "--plan-dir", str(out), "--commit", "0" * 40)
    assert comment.returncode == 0, comment.stderr
    row = next(line for line in comment.stdout.splitlines() if line.startswith("| live plan"))
    assert "ℹ️ not deployed yet: the state bucket" in row and "`groundctl up local`" in row


def test_the_merge_of_a_never_deployed_environment_is_refused_before_anything_is_written(
        tmp_path, aws, emulator_endpoint):
    spec, bucket = _spec(tmp_path)
    plans = tmp_path / "approved"
    assert _groundctl(tmp_path, "plan", str(spec), "--out", str(plans), "--endpoint-url",
                      emulator_endpoint).returncode == 0
    proc = _groundctl(tmp_path, "up", str(spec), "--plan-dir", str(plans), "--yes", "--json", "--endpoint-url",
                      emulator_endpoint)
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())
    assert f"The state bucket {bucket} of 'local' does not exist" in said
    assert "Create it once, by hand, with its apply role: run `groundctl up local` first" in said
    record = json.loads(proc.stdout)
    assert record["stopped_at"] == "state-bucket" and record["outcome"] == "failed"
    # The approved plans are read first, in a phase of their own (a refused --plan-dir is where a run stops).
    assert [p["name"] for p in record["phases"]] == ["plan-dir", "account", "engine", "state-bucket"]
    assert bucket not in _buckets(aws)  # no bucket, so no key, lock or run record either
