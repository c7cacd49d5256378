"""Engine tier, issue 37 §3: `plan` and `drift` under a read-only role on a state bucket no Pulumi command has
opened yet (a first `up` that stopped after making the bucket, before its first layer).

Every Pulumi command writes `.pulumi/meta.yaml` on its first use of a bucket (pkg/backend/diy/backend.go:330,
meta.go:151-169): under the plan or record role, which may not write there, the real CLI failed with AccessDenied
and so did `plan` and `drift`. They now answer "not deployed yet" before any Pulumi command runs. The read-only
role is played by the test proxy in front of the emulator, which refuses every write to the state bucket as S3
refuses a role without s3:PutObject.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, make_tier, tier_environment
from tests.faultproxy import FaultProxy

pytestmark = [pytest.mark.engine, requires_pulumi]

DENIED = (403, "application/xml", b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code>"
          b"<Message>Access Denied</Message></Error>")
READS = ("GET", "HEAD")


@pytest.fixture
def read_only(tmp_path, emulator_endpoint):
    """A tier whose state bucket exists (versioned, as `up`'s backend phase makes it) and holds nothing, reached
    through a proxy that refuses every write to it."""
    with FaultProxy(emulator_endpoint, fraction=0.0, lifetime_seconds=3600, max_requests=100_000) as proxy:
        tier = make_tier(tmp_path, proxy.endpoint_url)
        tier.s3.create_bucket(Bucket=tier.state_bucket)
        tier.s3.put_bucket_versioning(Bucket=tier.state_bucket, VersioningConfiguration={"Status": "Enabled"})
        bucket = f"/{tier.state_bucket}"
        # Objects only: a drift check on an emulator converges the bucket's own settings first (its backend phase,
        # which against AWS is a check that the bucket exists).
        proxy.answer = lambda m, p, headers, b: DENIED if m not in READS and p.startswith(bucket + "/") else None
        with tier_environment(tier):
            yield tier, proxy


def _writes(proxy, tier) -> list:
    return [(m, p) for m, p, _t in proxy.log if m not in READS and p.startswith(f"/{tier.state_bucket}/")]


@pytest.mark.timeout(600)
def test_plan_and_drift_on_a_bucket_no_pulumi_command_opened_answer_not_deployed_yet(read_only, tmp_path):
    tier, proxy = read_only
    code, out, err = tier.cli("plan", "SPEC", "--layers", LAYERS, "--json", "--out", str(tmp_path / "plans"))
    assert code == 0, err + out
    doc = json.loads(out)
    assert doc["not_deployed"] is True, doc
    assert "AccessDenied" not in err + out
    code, out, err = tier.cli("plan", "SPEC", "--layers", LAYERS, "--out", str(tmp_path / "plans2"))
    assert code == 0 and "not deployed yet" in " ".join(err.split()) and "no Pulumi command has run" in \
        " ".join(err.split()), err

    code, out, err = tier.cli("drift", "SPEC", "--layers", LAYERS, "--json")
    assert code == 1, err + out  # as for any layer that is not deployed: it differs from its declaration
    rows = json.loads(out)["layers"]
    assert [(r["layer"], r["state"]) for r in rows] == [("network", "not deployed"), ("cluster", "not deployed")]
    assert "AccessDenied" not in err
    assert _writes(proxy, tier) == []  # no write was even tried: no Pulumi command ran
    assert tier.keys("") == []


@pytest.mark.timeout(600)
def test_the_real_cli_is_what_writes_the_metadata_and_a_bucket_it_opened_is_asked_as_before(read_only, tmp_path):
    """Why the answer must come before Pulumi: the real CLI's first command on the bucket is a write."""
    import os
    import subprocess

    from bootstrap.engine.workspace import backend_url

    tier, proxy = read_only
    env = {**os.environ, "PULUMI_BACKEND_URL": backend_url(tier.state_bucket, "us-east-1", tier.endpoint)}
    done = subprocess.run(["pulumi", "stack", "ls", "--non-interactive"], cwd=tier.stacks / "network", env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode != 0 and ".pulumi/meta.yaml" in done.stderr + done.stdout, done.stderr
    assert ("PUT", f"/{tier.state_bucket}/.pulumi/meta.yaml") in [(m, p.split("?")[0]) for m, p in
                                                                   _writes(proxy, tier)]
    # Once a Pulumi command has opened the bucket (under the apply role), the plan asks Pulumi again.
    proxy.answer = None
    assert subprocess.run(["pulumi", "stack", "ls", "--non-interactive"], cwd=tier.stacks / "network", env=env,
                          capture_output=True, text=True, timeout=180).returncode == 0
    assert tier.keys(".pulumi/") == [".pulumi/meta.yaml"]
    code, out, err = tier.cli("plan", "SPEC", "--layers", LAYERS, "--json", "--out", str(tmp_path / "plans"))
    assert code == 0, err + out
    layers = json.loads(out)["layers"]
    assert [(lay["layer"], lay["not_deployed"]) for lay in layers] == [("network", True), ("cluster", True)]
    assert all("organization/" in lay["skipped_reason"] for lay in layers)  # Pulumi's answer, stack by stack
    assert "no Pulumi command has run" not in out
