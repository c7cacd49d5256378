"""One truth about the roles (bootstrap/roles.py): the plan role writes nothing (a pull request's code runs with
it), the record role writes the records scheduled checks keep and nothing else, the apply role changes the
environment. The README and runbooks/run-on-a-schedule.md carry the same table; the generated IAM statements
grant exactly those writes; every workflow job and CronJob assumes the role the table says, by the subject it
names; and what `drift --record` really writes is inside the record role's rights."""

from __future__ import annotations

import fnmatch
import json

import pytest

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.ci.workflows import APPLY_WORKFLOW, DRIFT_WORKFLOW, PR_WORKFLOW, REHEARSE_WORKFLOW
from bootstrap.records.layout import drift_prefix
from bootstrap.roles import BY_NAME, ROLES, describe, policy, policy_template, table
from bootstrap.spec import load_spec
from recovery.fleet import manifests as fm
from tests.ci_workflow import rendered, step
from tests.conftest import REPO
from tests.test_cli_errors import groundctl as groundctl_in_process
from tests.test_cli_state_inspect import groundctl
from tests.test_fleet_manifests import FLEET, IMAGE, pod_of, spec_files
from tests.test_guide import spec_file  # noqa: F401 - fixture

READS = ("s3:Get", "s3:List", "kms:Decrypt", "kms:Describe")


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


@pytest.mark.parametrize("doc", ["docs/roles.md", "runbooks/run-on-a-schedule.md"])
def test_the_readme_and_the_runbook_carry_the_roles_table(doc):
    lines, want = _lines((REPO / doc).read_text()), _lines(table())
    starts = [i for i, line in enumerate(lines) if line == want[0]]
    assert any(lines[i:i + len(want)] == want for i in starts), f"{doc} does not hold bootstrap.roles.table()"


@pytest.mark.parametrize("doc", ["docs/roles.md", "runbooks/run-on-a-schedule.md"])
def test_the_readme_and_the_runbook_give_the_record_roles_exact_statements(doc):
    lines, want = _lines((REPO / doc).read_text()), _lines(json.dumps(policy_template("record"), indent=2))
    starts = [i for i, line in enumerate(lines) if line == want[0]]
    assert any(lines[i:i + len(want)] == want for i in starts), f"{doc} does not hold the record role's policy"
    assert '"arn:aws:s3:::<bucket>/.groundctl/rehearsals/<env>/*"' in want and '"kms:Decrypt",' in want


def _actions(doc: dict) -> list[tuple[str, object]]:
    return [(a, s["Resource"]) for s in doc["Statement"] for a in s["Action"]]


def test_the_plan_role_reads_and_writes_nothing():
    spec = load_spec("dev")
    actions = _actions(policy("plan", spec))
    assert actions and all(a.startswith(READS) for a, _ in actions), actions
    assert BY_NAME["plan"].writes == () and BY_NAME["plan"].fleet_service_account == ""


def test_the_record_role_adds_writes_to_its_records_only():
    spec = load_spec("dev")
    plan, record = _actions(policy("plan", spec)), _actions(policy("record", spec))
    assert record[:len(plan)] == plan  # the plan role's reads, unchanged
    writes = [(a, r) for a, r in record[len(plan):] if not a.startswith(READS)]
    bucket = spec.backend.bucket
    assert writes == [("s3:PutObject", [f"arn:aws:s3:::{bucket}/{drift_prefix('dev')}*",
                                        f"arn:aws:s3:::{bucket}/.groundctl/rehearsals/dev/*"]),
                      ("kms:GenerateDataKey", f"arn:aws:kms:eu-west-1:{spec.aws.account_id}:key/*")]
    described = {r["role"]: r for r in describe(spec)}
    assert [f"arn:aws:s3:::{bucket}/{w}" for w in described["record"]["writes"]] == writes[0][1]
    assert described["apply"]["policy"]["Statement"]  # its own: tests/test_roles_iam.py


def test_spec_roles_prints_what_the_module_says(monkeypatch, capsys):
    code, out, err = groundctl_in_process(monkeypatch, capsys, "spec", "roles", "dev", "--repo", "acme/infra",
                                          "--branch", "trunk", "--json")
    assert code == 0, err
    roles = {r["role"]: r for r in json.loads(out)["roles"]}
    assert roles == {r["role"]: r for r in json.loads(json.dumps(describe(load_spec("dev"), repo="acme/infra",
                                                                          branch="trunk")))}
    assert roles["plan"]["github_subject"] == "repo:acme/infra:pull_request"
    assert roles["record"]["github_subject"] == "repo:acme/infra:ref:refs/heads/trunk"
    assert roles["record"]["fleet_subject"] == "system:serviceaccount:groundctl:dev-record"
    assert roles["apply"]["github_subject"] == "repo:acme/infra:environment:dev"


def _credentials(job: dict) -> str:
    return next(s["with"]["role-to-assume"] for s in job["steps"] if "configure-aws-credentials" in s.get("uses", ""))


def test_each_workflow_job_assumes_the_role_the_table_names_by_its_subject():
    docs = rendered()
    pr, apply, drift = docs[PR_WORKFLOW], docs[APPLY_WORKFLOW], docs[DRIFT_WORKFLOW]
    # The pull request's job: subject `pull_request`, the plan role.
    assert set(pr[True]) == {"pull_request"} and _credentials(pr["jobs"]["plan"]) == "${{ matrix.plan_role }}"
    # The scheduled drift runs on the default branch (subject `ref:refs/heads/<branch>`): the record role.
    assert set(drift[True]) == {"schedule", "workflow_dispatch"}
    assert _credentials(drift["jobs"]["drift"]) == "${{ matrix.record_role }}"
    assert "environment" not in drift["jobs"]["drift"]
    # So does the scheduled restore rehearsal, on its own schedule; never a pull request's plan role.
    rehearse = docs[REHEARSE_WORKFLOW]
    assert set(rehearse[True]) == {"schedule", "workflow_dispatch"}
    assert rehearse[True]["schedule"] == [{"cron": "43 4 * * *"}]
    assert _credentials(rehearse["jobs"]["rehearse"]) == "${{ matrix.record_role }}"
    assert "environment" not in rehearse["jobs"]["rehearse"]
    run = step(rehearse["jobs"]["rehearse"], "Rehearse")["run"]
    assert 'groundctl state rehearse "$ENVIRONMENT" --record --json' in run
    detect = step(rehearse["jobs"]["detect"], "Every environment with a record role")["run"]
    assert "--needs record-role" in detect
    # The merge's apply runs in the GitHub environment named after the groundctl one: the apply role.
    assert apply["jobs"]["apply"]["environment"] == "${{ matrix.environment }}"
    assert _credentials(apply["jobs"]["apply"]) == "${{ matrix.apply_role }}"
    assert [r.name for r in ROLES] == ["plan", "record", "apply"]


def test_each_cronjob_runs_with_the_role_the_table_names():
    out = fm.render(spec_files(), image=IMAGE)
    accounts = {m["metadata"]["name"]: m["metadata"]["annotations"][fm.IRSA_ANNOTATION]
                for m in out.manifests if m["kind"] == "ServiceAccount"}
    for job in (m for m in out.manifests if m["kind"] == "CronJob"):
        env = job["metadata"]["labels"]["groundctl/environment"]
        spec = load_spec(env, base=FLEET)
        role = "record" if job["metadata"]["name"].startswith(("drift-", "rehearse-")) else "apply"
        account = pod_of(job)["serviceAccountName"]
        assert account == BY_NAME[role].fleet_service_account.format(env=env)
        assert accounts[account] == getattr(spec.aws, f"{role}_role_arn")


@pytest.fixture
def store(aws, bucket):
    return ObjectStore(aws.client("s3"), bucket)


def test_what_drift_record_writes_is_inside_the_record_role_and_a_plan_writes_nothing(store, spec_file,
                                                                                      emulator_endpoint):
    env = {"PATH": "/usr/bin:/bin", "PULUMI_CONFIG_PASSPHRASE": "roles"}
    before = {k for k, _s, _m in store.keys("")}
    r = groundctl("plan", str(spec_file), "--endpoint-url", emulator_endpoint, env=env)
    assert r.returncode == 4, r.stdout + r.stderr  # no CLI here: it stops at the engine check
    assert {k for k, _s, _m in store.keys("")} == before
    r = groundctl("drift", str(spec_file), "--record", "--endpoint-url", emulator_endpoint, env=env)
    assert r.returncode == 4, r.stdout + r.stderr
    written = {k for k, _s, _m in store.keys("")} - before
    allowed = [w.format(env="local") for w in BY_NAME["record"].writes]
    assert written and all(any(fnmatch.fnmatchcase(k, p) for p in allowed) for k in written), written


def test_what_a_recorded_rehearsal_writes_is_inside_the_record_role(store, spec_file, emulator_endpoint):
    """A scheduled rehearsal that cannot run (no Pulumi CLI here) still records that it failed: that record, and
    nothing else, is written, inside the record role's rights (the engine tier proves the same of a rehearsal
    that ran: tests/test_engine_tier_rehearsal.py)."""
    env = {"PATH": "/usr/bin:/bin", "PULUMI_CONFIG_PASSPHRASE": "roles"}
    before = {k for k, _s, _m in store.keys("")}
    r = groundctl("state", "rehearse", str(spec_file), "--record", "--endpoint-url", emulator_endpoint, env=env)
    assert r.returncode == 4, r.stdout + r.stderr
    written = {k for k, _s, _m in store.keys("")} - before
    allowed = [w.format(env="local") for w in BY_NAME["record"].writes]
    assert written and all(any(fnmatch.fnmatchcase(k, a) for a in allowed) for k in written), written
    assert allowed[1].startswith(".groundctl/rehearsals/local/")
    # the record, and the environment's summary it adds itself to (in the drift prefix the role also writes)
    assert {k.rsplit("/", 2)[-2] for k in written} == {"local"} and ".groundctl/drift/local/~summary.json" in written
