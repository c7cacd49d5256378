"""The workflows' own command lines, run in order through the front door, against the test emulator with the
in-memory engine: a pull request is planned and its plan kept; main moves on; the merge job's `up --plan-dir
<approved> --yes` refuses the stale plan and its summary says why, with the run record; a fresh plan applies.

Only the GitHub side is played by the test (the changed-file list, the artifact upload and download); every
groundctl command is taken verbatim from the rendered workflows, with the step's variables filled in.
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.ci.workflows import APPLY_WORKFLOW, PR_WORKFLOW, WORKFLOW_DIR
from tests.ci_workflow import argv, groundctl_lines
from tests.conftest import REPO
from tests.fakes.engine import FakeResource, InMemoryEngine, declare_standard
from tests.test_cli_errors import groundctl

pytestmark = pytest.mark.emulator

ACCOUNT = "123456789012"


@pytest.fixture
def repo(tmp_path, aws, emulator_endpoint, monkeypatch, release_mirror):
    """A repository holding environments/local.yaml (with both OIDC roles) as the working directory, the test
    emulator as its endpoint (GROUNDCTL_ENDPOINT_URL, as an operator would export it), and the in-memory
    engine behind every groundctl command."""
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["backend"]["bucket"] = f"gl-{uuid.uuid4().hex[:16]}"
    spec["aws"].update(plan_role_arn=f"arn:aws:iam::{ACCOUNT}:role/groundctl-plan",
                       apply_role_arn=f"arn:aws:iam::{ACCOUNT}:role/groundctl-apply")
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "local.yaml").write_text(yaml.safe_dump(spec))
    release_mirror.lock(tmp_path)
    engine = InMemoryEngine("local", store=ObjectStore(aws.client("s3"), spec["backend"]["bucket"]))
    declare_standard(engine)
    monkeypatch.setattr("bootstrap.target.pulumi_engine", lambda ctx: engine)
    monkeypatch.setattr("bootstrap.target.require_pulumi", lambda: None)
    monkeypatch.chdir(tmp_path)
    return tmp_path, engine, {"GROUNDCTL_ENDPOINT_URL": emulator_endpoint}


def _job(repo: Path, workflow: str, job: str) -> dict:
    return yaml.safe_load((repo / WORKFLOW_DIR / workflow).read_text())["jobs"][job]


@pytest.fixture
def run_step(repo, monkeypatch, capsys):
    """Run the one groundctl command of a workflow step, with the job's and the step's variables."""
    endpoint = repo[2]

    def run(job: dict, name: str, env: dict) -> tuple[int, str, str]:
        s = next(s for s in job["steps"] if s.get("name") == name)
        (line,) = groundctl_lines(s["run"])
        return groundctl(monkeypatch, capsys, *argv(line, env), env=endpoint)

    return run


def test_the_merge_job_refuses_a_stale_plan_and_says_why_in_the_summary(repo, run_step, monkeypatch, capsys):
    root, engine, endpoint = repo
    code, _, err = groundctl(monkeypatch, capsys, "ci", "init", "--install", ".")
    assert code == 0, err
    code, _, err = groundctl(monkeypatch, capsys, "up", "local", "--yes", env=endpoint)  # it exists before the PR
    assert code == 0, err

    # -- the pull request: it adds a subnet; its workflow plans and keeps the plan --------------------------
    engine.desired["network"].append(FakeResource("aws:ec2/subnet:Subnet", "private-b", {"name": "private-b"}))
    (root / "changed-files.txt").write_text("environments/local.yaml\n")
    detect = _job(root, PR_WORKFLOW, "detect")
    code, out, err = run_step(detect, "Which environments the change touches", {})
    assert code == 0, err
    (target,) = json.loads(out)["include"]
    assert target["environment"] == "local" and target["plan_role"].endswith(":role/groundctl-plan")

    plan = _job(root, PR_WORKFLOW, "plan")
    env = {"ENVIRONMENT": "local", "PLAN_DIR": "plans/local"}
    assert plan["env"]["PLAN_DIR"] == "plans/${{ matrix.environment }}"
    for step in ("Spec check", "Offline plan and posture rules (no credentials)", "Live plan"):
        code, _, err = run_step(plan, step, env)
        assert code == 0, (step, err)
    code, _, err = run_step(plan, "Write the sticky comment",
                             {**env, "HEAD_SHA": "b" * 40, "RUN_URL": "https://github.example/acme/infra/actions/runs/9",
                              "LIVE_NOTE": ""})
    assert code == 0, err
    comment = (root / "plans/local/comment.md").read_text()
    assert comment.startswith("<!-- groundctl:plan:local -->") and "1 to create" in comment and "✅ PASS" in comment
    shutil.copytree(root / "plans/local", root / "approved")  # upload, then download into `approved`

    # -- meanwhile, main moves on: another change lands first ------------------------------------------------
    engine.desired["network"].append(FakeResource("aws:ec2/subnet:Subnet", "private-c", {"name": "private-c"}))

    # -- the merge job ---------------------------------------------------------------------------------------
    apply = _job(root, APPLY_WORKFLOW, "apply")
    before = len(engine.calls)
    code, out, err = run_step(apply, "Apply the approved plan", {"ENVIRONMENT": "local"})
    assert code == 3, err  # refused by a rule; nothing changed
    (root / "run-record.json").write_text(out)
    (root / "up.log").write_text(err)
    record = json.loads(out)
    assert record["outcome"] == "refused" and record["stopped_at"] == "network/gate"
    assert {lay["layer"]: lay["achieved"] for lay in record["layers"]}["network"] == "refused"
    assert [c for c in engine.calls[before:] if c[0] == "up"] == []
    names = {r.name for r in engine.state["network"]}
    assert "private-b" not in names and "private-c" not in names

    code, summary, err = run_step(apply, "Run record and reason in the job summary",
                                   {"ENVIRONMENT": "local", "EXIT_CODE": "3"})
    assert code == 0, err
    assert summary.startswith("## groundctl up `local`: ⛔ refused")
    why = summary.split("**Why:** ", 1)[1].split("\n", 1)[0]
    assert "stale" in why and "the plan in approved/live/" in why and "groundctl plan local" in why
    assert f"run `{record['run_id']}`" in summary and "stopped at `network/gate`" in summary
    assert json.loads(summary.split("````json\n", 1)[1].split("\n````", 1)[0]) == record

    # -- re-planned and reviewed again, the same merge job applies it ----------------------------------------
    shutil.rmtree(root / "plans")
    code, _, err = run_step(plan, "Live plan", env)
    assert code == 0, err
    shutil.rmtree(root / "approved")
    shutil.copytree(root / "plans/local", root / "approved")
    code, out, err = run_step(apply, "Apply the approved plan", {"ENVIRONMENT": "local"})
    assert code == 0, err
    (root / "run-record.json").write_text(out)
    (root / "up.log").write_text(err)
    assert {r.name for r in engine.state["network"]} >= {"private-b", "private-c"}
    assert {lay["layer"]: lay["applied_with"] for lay in json.loads(out)["layers"]}["network"] == "reviewed-plan"
    code, summary, _ = run_step(apply, "Run record and reason in the job summary",
                                 {"ENVIRONMENT": "local", "EXIT_CODE": "0"})
    assert summary.startswith("## groundctl up `local`: ✅ succeeded") and "**Why:**" not in summary


def test_a_value_changed_between_the_pull_request_and_the_merge_is_refused_naming_resource_and_field(
        repo, run_step, monkeypatch, capsys):
    root, engine, endpoint = repo
    assert groundctl(monkeypatch, capsys, "ci", "init", "--install", ".")[0] == 0
    assert groundctl(monkeypatch, capsys, "up", "local", "--yes", env=endpoint)[0] == 0
    subnet = next(r for r in engine.desired["network"] if r.type == "aws:ec2/subnet:Subnet")
    subnet.inputs["cidr"] = "10.10.1.0/24"  # the pull request
    plan, env = _job(root, PR_WORKFLOW, "plan"), {"ENVIRONMENT": "local", "PLAN_DIR": "plans/local"}
    code, _, err = run_step(plan, "Live plan", env)
    assert code == 0, err
    assert (root / "plans/local/live/pulumi-plan-local-network.json").is_file()  # in the artifact's folder
    shutil.copytree(root / "plans/local", root / "approved")
    subnet.inputs["cidr"] = "10.10.9.0/24"  # before the merge: same resource, same field, another value

    apply = _job(root, APPLY_WORKFLOW, "apply")
    code, out, err = run_step(apply, "Apply the approved plan", {"ENVIRONMENT": "local"})
    assert code == 3, err
    (root / "run-record.json").write_text(out)
    (root / "up.log").write_text(err)
    assert json.loads(out)["stopped_at"] == "network/up"
    assert next(r for r in engine.state["network"] if r.name == subnet.name).inputs.get("cidr") is None
    code, summary, _ = run_step(apply, "Run record and reason in the job summary",
                                {"ENVIRONMENT": "local", "EXIT_CODE": "3"})
    why = summary.split("**Why:** ", 1)[1].split("\n", 1)[0]
    assert f"refused it at {subnet.name} (urn:pulumi:local::network::aws:ec2/subnet:Subnet::{subnet.name})" in why
    assert "a value of cidr other than the approved plan's" in why and "10.10." not in summary


def test_no_approved_plan_is_refused_and_the_summary_says_why(repo, run_step, monkeypatch, capsys):
    root, engine, _ = repo
    assert groundctl(monkeypatch, capsys, "ci", "init", "--install", ".")[0] == 0
    apply = _job(root, APPLY_WORKFLOW, "apply")
    # The runner's checkout is the repository (no .git here: the commit is the one GitHub names).
    sha = "c0ffee" + "1" * 34
    monkeypatch.setenv("GITHUB_SHA", sha)
    # The download found no artifact (the pull request had no live plan): nothing is applied.
    code, out, err = run_step(apply, "Apply the approved plan", {"ENVIRONMENT": "local"})
    assert code == 2 and not [c for c in engine.calls if c[0] == "up"]
    record = json.loads(out)
    # Refused before any other phase: the record names the phase, was never stored, and carries the commit.
    assert record["stopped_at"] == "plan-dir" and record["stored"] is False and record["git_commit"] == sha
    (root / "run-record.json").write_text(out)
    (root / "up.log").write_text(err)
    code, summary, _ = run_step(apply, "Run record and reason in the job summary", {"ENVIRONMENT": "local",
                                                                                   "EXIT_CODE": "2"})
    assert code == 0 and "❌ failed" in summary
    why = summary.split("**Why:** ", 1)[1].split("\n", 1)[0]
    assert why.startswith("stopped at plan-dir: --plan-dir approved/live is not a directory"), why
    assert "stopped at `plan-dir`" in summary and f"commit `{sha[:12]}`" in summary
    assert ".groundctl/runs/" not in summary and "The run record was not stored in the state bucket" in summary


def test_a_start_that_fails_is_a_record_in_the_summary(repo, run_step, monkeypatch, capsys):
    """`up --json` that stops before its run (here: a spec that is not a valid spec) prints its
    reason as a record, which the summary shows (it used to print nothing, and the summary said 'no error')."""
    root, engine, _ = repo
    assert groundctl(monkeypatch, capsys, "ci", "init", "--install", ".")[0] == 0
    (root / "environments" / "local.yaml").write_text("name: local\nbackend: [not, a, mapping]\n")
    apply = _job(root, APPLY_WORKFLOW, "apply")
    code, out, err = run_step(apply, "Apply the approved plan", {"ENVIRONMENT": "local"})
    assert code == 2 and "error: " in err
    record = json.loads(out)
    assert record["stopped_before_report"] is True and record["command"] == "up" and record["environment"] == "local"
    assert record["exit_code"] == 2 and record["message"] and record["message"] in " ".join(err.split())
    (root / "run-record.json").write_text(out)
    (root / "up.log").write_text("")  # the reason must come from the record itself
    code, summary, _ = run_step(apply, "Run record and reason in the job summary", {"ENVIRONMENT": "local",
                                                                                   "EXIT_CODE": "2"})
    assert code == 0 and "stopped before the run started (exit 2)" in summary
    assert summary.split("**Why:** ", 1)[1].split("\n", 1)[0] == record["message"]
