"""Messages and output a person can act on (issue 10 §5): the real cause of a credential failure and its
fix, the emulator called the emulator, no Python values or placeholders, one message said once, full
lines without a terminal, reports under .groundctl/ by default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import botocore.exceptions
import pytest

from bootstrap.aws import clients
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from tests.conftest import REPO, local_spec_with_bucket


def local_spec(folder, bucket: str) -> str:
    return str(local_spec_with_bucket(folder, bucket))

PYTHON_VALUES = re.compile(r"\bNone\b|\bTrue\b|\bFalse\b|\(DryRun\)|<env>|\{'|'\}")


def _run(args: list[str], cwd=REPO, unset: tuple[str, ...] = (), **extra) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("GROUNDCTL_ENDPOINT_URL", "COLUMNS", *unset)}
    env.update(PULUMI_CONFIG_PASSPHRASE="messages", **extra)
    return subprocess.run([sys.executable, "-m", "groundctl", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


# -- credentials: the cause and the fix, never "check the network" ---------------------------------------------------


@pytest.mark.parametrize("error, words", [
    (botocore.exceptions.NoCredentialsError(), "no AWS credentials were found"),
    (botocore.exceptions.ProfileNotFound(profile="ops-admin"), "the AWS profile 'ops-admin' is not in your AWS config"),
    (botocore.exceptions.ClientError({"Error": {"Code": "ExpiredToken"}}, "GetCallerIdentity"),
     "your AWS session has expired"),
    (botocore.exceptions.ClientError({"Error": {"Code": "InvalidClientTokenId"}}, "GetCallerIdentity"),
     "AWS did not accept the credentials (InvalidClientTokenId)"),
    (botocore.exceptions.TokenRetrievalError(provider="sso", error_msg="expired"), "your AWS session has expired"),
])
def test_a_credential_failure_names_its_cause_and_fix(error, words):
    def call():
        raise error

    with pytest.raises(clients.CloudError) as err:
        clients.retry_transient(call, what="identify the AWS caller")
    message = err.value.message
    assert words in message and "re-run" in message
    assert "network" not in message and "reach" not in message


def test_an_unknown_profile_is_named_by_the_command(tmp_path):
    proc = _run(["status", "dev"], AWS_PROFILE="no-such-profile", AWS_CONFIG_FILE=os.devnull,
                AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    assert proc.returncode == 4, proc.stderr
    assert "the AWS profile 'no-such-profile' is not in your AWS config" in proc.stderr
    assert "internal error" not in proc.stderr


def test_a_failing_credential_process_is_named_not_called_a_bug(tmp_path):
    config = tmp_path / "config"
    config.write_text("[profile broken]\ncredential_process = /bin/false\n")
    proc = _run(["lock", "status", "dev"], unset=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
                AWS_PROFILE="broken", AWS_CONFIG_FILE=str(config), AWS_SHARED_CREDENTIALS_FILE=os.devnull)
    assert proc.returncode == 4, proc.stderr
    assert "did not return credentials" in proc.stderr and "internal error" not in proc.stderr


def test_the_emulator_is_called_the_emulator():
    proc = _run(["lock", "status", "local", "--endpoint-url", "http://127.0.0.1:9"])
    assert proc.returncode == 4
    assert "the emulator at 127.0.0.1:9 could not be reached" in proc.stderr
    assert "groundctl emulator start" in proc.stderr and "AWS could not" not in proc.stderr
    assert clients.endpoint_name("https://s3.eu-west-1.amazonaws.com") == "AWS"


# -- no Python values, no placeholders -----------------------------------------------------------------------------


def test_state_verify_of_a_stack_without_state_or_ledger_says_so_in_words(tmp_path, aws, emulator_endpoint, bucket):
    spec = local_spec(tmp_path, bucket)
    proc = _run(["state", "verify", spec, "network", "--endpoint-url", emulator_endpoint])
    assert proc.returncode == 1, proc.stderr
    assert "no current state object" in proc.stdout and "no ledger record" in proc.stdout
    # Never deployed (no state, no ledger): the next step creates the layer, naming the environment, not <env>.
    assert "groundctl up local --layers network" in proc.stdout
    assert not PYTHON_VALUES.search(proc.stdout + proc.stderr), proc.stdout + proc.stderr


def test_a_posture_finding_quotes_values_not_python():
    from bootstrap.planning.posture.model import said

    assert [said(None), said(True), said({"tag": "v1"}), said("Suspended")] == [
        "(unset)", "true", '{"tag": "v1"}', "'Suspended'"]


def test_a_plan_file_missing_a_field_is_named_in_words(tmp_path):
    from bootstrap.apply.gate import approved_from_documents
    from bootstrap.kit.errors import BadInput

    with pytest.raises(BadInput) as err:
        approved_from_documents({"plan-dev-network.json": {"layer": "network", "environment": "dev",
                                                           "changes": [{"type": "aws:ec2/vpc:Vpc"}]}}, "dev")
    assert "its field '" in err.value.message and "groundctl plan dev --out DIR" in err.value.message
    assert not PYTHON_VALUES.search(err.value.message) and "KeyError" not in err.value.message


# -- drills: said once, full lines, reports under .groundctl/ ------------------------------------------------------


def test_a_stopped_drill_says_its_reason_once_on_full_lines_and_keeps_its_report_under_dot_groundctl(
        tmp_path, aws, emulator_endpoint):
    bucket = "gl-msg-never-applied"
    spec = local_spec(tmp_path, bucket)
    proc = _run(["drill", "state-loss", spec, "--layer", "network", "--yes", "--endpoint-url", emulator_endpoint],
                cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr  # the preflight's bad input: the bucket does not exist
    text = proc.stdout + proc.stderr
    assert text.count("so nothing of this environment has been deployed") == 1, text
    verdict = next(line for line in proc.stderr.splitlines() if line.startswith("verdict:"))
    assert verdict.endswith("(it creates the bucket).")  # one line: not wrapped at 80 columns in a pipe
    assert not PYTHON_VALUES.search(text), text
    reports = list((tmp_path / ".groundctl" / "drills" / "local").glob("*.json"))
    assert len(reports) == 1 and json.loads(reports[0].read_text())["verdict"]["outcome"] == "failed"
    assert not (tmp_path / "drill-reports").exists()


def test_a_dry_run_verdict_reads_as_words(tmp_path, aws, emulator_endpoint):
    spec = local_spec(tmp_path, "gl-msg-dry-run")
    proc = _run(["drill", "rebuild-cluster", spec, "--dry-run", "--endpoint-url", emulator_endpoint], cwd=tmp_path)
    verdict = next(line for line in proc.stderr.splitlines() if line.startswith("verdict:"))
    assert verdict.startswith("verdict: dry run (the RTO is ")
    assert "(DryRun)" not in verdict and "recovery —" not in verdict
    assert not (tmp_path / ".groundctl").exists()  # a dry run writes files only when --out is given


def test_a_run_record_is_read_from_the_bucket_not_from_a_python_repr(tmp_path, aws, emulator_endpoint, bucket):
    # `status` of a never-applied environment on a real bucket: words, not "None".
    store = ObjectStore(aws.client("s3"), bucket)
    assert store.get(layout.lock_key("local")) is None
    proc = _run(["status", local_spec(tmp_path, bucket), "--endpoint-url", emulator_endpoint])
    assert proc.returncode == 0, proc.stderr
    assert "never applied" in proc.stdout and not PYTHON_VALUES.search(proc.stdout), proc.stdout
