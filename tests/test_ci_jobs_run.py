"""The generated CI workflows and fleet CronJobs can actually run, and give a pull request no more than a plan:

- they install the repository's own pinned, hashed copy of groundctl (never an unhashed release from PyPI),
  and the Pulumi CLI release groundctl pins (bootstrap/engine/versions.py), one version everywhere;
- every job that reaches the flux layer gets its SSH deploy key and known hosts (GitHub secrets; a required,
  never optional, Kubernetes Secret in the CronJobs);
- a pull request's jobs hold the plan role only: no step of the PR workflow names the apply role or claims a
  GitHub environment (the programs assume no role either: tests/test_stack_config.py);
- the merge applies only the plan of a run whose aggregate check succeeded, and that check has one stable name;
- `ci targets` refuses what is not a list of changed paths.

The workflow steps' shell scripts are run for real here with bash, against a stand-in `gh` that answers as the
GitHub API would for each case."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bootstrap.ci.workflows import (APPLY_WORKFLOW, DEFAULT_REQUIREMENTS, DRIFT_WORKFLOW, PR_WORKFLOW,
                                    REHEARSE_WORKFLOW, RESULT_CHECK)
from bootstrap.engine.versions import PULUMI_CLI_PINNED
from recovery.fleet import manifests as fm
from tests.dockerfile import shipped_dockerfile
from tests.ci_workflow import groundctl_lines, pin_groundctl, rendered, step
from tests.conftest import REPO
from tests.test_cli_errors import assert_refused, groundctl
from tests.test_fleet_manifests import spec_files


FLUX_SECRETS = {"GROUNDCTL_FLUX_DEPLOY_KEY": "${{ secrets.GROUNDCTL_FLUX_DEPLOY_KEY }}",
                "GROUNDCTL_FLUX_KNOWN_HOSTS": "${{ secrets.GROUNDCTL_FLUX_KNOWN_HOSTS }}"}


@pytest.fixture
def repo(tmp_path, release_mirror) -> Path:
    """A repository with the shipped specs and a pins lock read from the local release mirror."""
    shutil.copytree(REPO / "environments", tmp_path / "environments")
    release_mirror.lock(tmp_path)
    return tmp_path


def _init(monkeypatch, capsys, repo: Path, *args: str):
    return groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(repo), *args)


# -- what the workflows install ---------------------------------------------------------------------------

def test_without_a_hashed_requirements_file_nothing_is_written(monkeypatch, capsys, repo):
    assert_refused(_init(monkeypatch, capsys, repo), 2, DEFAULT_REQUIREMENTS, "--hash=sha256", "--install .")
    (repo / DEFAULT_REQUIREMENTS).write_text("groundctl==0.1.0\n")
    assert_refused(_init(monkeypatch, capsys, repo), 2, "'groundctl==0.1.0' has no --hash=sha256")
    (repo / DEFAULT_REQUIREMENTS).write_text(f"boto3==1.35.0 --hash=sha256:{'2' * 64}\n")
    assert_refused(_init(monkeypatch, capsys, repo), 2, "does not pin groundctl")
    assert_refused(_init(monkeypatch, capsys, repo, "--install", "groundctl==0.1.0"), 2, "--install",
                   "--require-hashes")
    assert not (repo / ".github").exists()


def test_the_workflows_install_the_pinned_copy_with_hashes_checked(monkeypatch, capsys, repo):
    pin_groundctl(repo)
    code, out, err = _init(monkeypatch, capsys, repo, "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["install"] == DEFAULT_REQUIREMENTS and report["pulumi_version"] == PULUMI_CLI_PINNED
    for name in (PR_WORKFLOW, APPLY_WORKFLOW, DRIFT_WORKFLOW):
        text = (repo / ".github" / "workflows" / name).read_text()
        doc = yaml.safe_load(text)
        assert doc["env"]["GROUNDCTL_INSTALL"] == DEFAULT_REQUIREMENTS
        installs = [s["run"] for job in doc["jobs"].values() for s in job["steps"] if s.get("name") == "Install groundctl"]
        assert installs and set(installs) == {'python -m pip install --require-hashes -r "$GROUNDCTL_INSTALL"'}
        assert "groundctl==" not in text


def test_one_pulumi_version_everywhere(monkeypatch, capsys, repo):
    versions = {re.search(r"--cli-version (\S+)", s["run"])[1] for doc in rendered().values()
                for job in doc["jobs"].values() for s in job["steps"] if s.get("name") == CLI_STEP}
    assert versions == {PULUMI_CLI_PINNED}
    # The fleet image installs the CLI the lock records for groundctl's pin (groundctl pins install --cli).
    assert "groundctl pins install --dir /src --platform linux-amd64 --cli /opt/pulumi/bin" in \
        shipped_dockerfile()
    pin_groundctl(repo)
    assert_refused(_init(monkeypatch, capsys, repo, "--pulumi-version", "3.100.0"), 2, "older than")
    # Another CLI release than the lock's: the workflows would stop at their install step, so none is written.
    assert_refused(_init(monkeypatch, capsys, repo, "--pulumi-version", "3.260.0"), 4,
                   "pulumi 3.260.0 for linux-amd64 (pulumi-v3.260.0-linux-x64.tar.gz) (the lock holds 3.259.0)",
                   "`groundctl pins update`")
    assert not (repo / ".github").exists()


# -- the provider plugins ---------------------------------------------------------------------------------

CLI_STEP = "Install the Pulumi CLI (its release file checked against groundctl-pins.json)"
PLUGIN_STEP = "Install the provider plugins (each release file checked against groundctl-pins.json)"
ENGINE_COMMAND = re.compile(r"groundctl (plan (?!.*--offline)|up |drift |state rehearse )")


def runs_the_engine(s: dict) -> bool:
    """Whether a step runs a groundctl command that needs the engine (a live plan, up, drift or a rehearsal)."""
    return any(ENGINE_COMMAND.match(line) for line in groundctl_lines(s.get("run", "")))


def test_every_job_that_runs_the_engine_installs_the_cli_and_plugins_from_the_lock_first():
    jobs = 0
    for name, doc in rendered().items():
        for job_id, job in doc["jobs"].items():
            steps = job["steps"]
            engine = [i for i, s in enumerate(steps) if runs_the_engine(s)]
            if not engine:
                assert not any(s.get("name") in (CLI_STEP, PLUGIN_STEP) for s in steps), (name, job_id)
                continue
            jobs += 1
            assert job["runs-on"] == "ubuntu-latest"  # linux-amd64: the lock's default platform
            assert not any("uses" in s and "pulumi/actions" in s["uses"] for s in steps)  # its download is unchecked
            cli = next(i for i, s in enumerate(steps) if s.get("name") == CLI_STEP)
            plugins = next(i for i, s in enumerate(steps) if s.get("name") == PLUGIN_STEP)
            assert cli < plugins < engine[0], (name, job_id)
            assert steps[cli]["run"] == (f'groundctl pins install --cli "$RUNNER_TEMP/pulumi-cli" --cli-version '
                                         f'{PULUMI_CLI_PINNED} >> "$GITHUB_PATH"')
            assert steps[plugins]["run"] == "groundctl pins install --plugins"
            # They run whenever the engine step does.
            assert steps[cli].get("if") == steps[plugins].get("if") == steps[engine[0]].get("if")
    assert jobs == 4  # the live plan, the apply, the drift check and the restore rehearsal


def test_the_pull_requests_first_job_runs_the_pins_check():
    detect = rendered()[PR_WORKFLOW]["jobs"]["detect"]["steps"]
    names = [s.get("name") for s in detect]
    check = names.index("The pins lock covers what groundctl installs")
    assert detect[check]["run"] == "groundctl pins check" and names.index("Install groundctl") < check


def _run_install_steps(folder: Path, repo: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """The drift job's CLI and plugin steps, run in order as a runner runs them in the repository's checkout:
    groundctl on PATH, an empty PULUMI_HOME, nothing else installed; GITHUB_PATH's lines added to PATH between
    steps, as the runner does."""
    job = rendered()[DRIFT_WORKFLOW]["jobs"]["drift"]
    github_path = folder / "github-path"
    folder.mkdir(parents=True)
    github_path.write_text("")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "PULUMI_HOME": str(folder / "pulumi-home"),
           "PYTHONPATH": str(REPO),
           "HOME": str(folder), "RUNNER_TEMP": str(folder / "runner-temp"), "GITHUB_PATH": str(github_path)}
    done = _bash(step(job, CLI_STEP)["run"], env, repo)
    if done.returncode != 0:
        return done, env
    env["PATH"] = ":".join([*reversed(github_path.read_text().split()), env["PATH"]])
    return _bash(step(job, PLUGIN_STEP)["run"], env, repo), env


def test_the_install_steps_install_what_the_engine_check_looks_for_and_refuse_another_file(tmp_path):
    from bootstrap.engine import plugins
    from bootstrap.kit.errors import EngineError
    from bootstrap.layers import LAYER_NAMES, STACKS_DIR
    from bootstrap.pins.artifacts import LINUX_AMD64, Want, plugin_name
    from tests.plugin_releases import served

    root = str(STACKS_DIR.parent)
    needs = plugins.command_needs("drift", {layer: plugins.layer_plugins(STACKS_DIR, layer, root)
                                            for layer in LAYER_NAMES}, {})
    assert {p.name for p in needs} == {"aws", "kubernetes"}
    with pytest.raises(EngineError, match="is not installed"):
        plugins.require_plugins(needs, {"PULUMI_HOME": str(tmp_path / "empty"), "PATH": "/usr/bin:/bin"}, LINUX_AMD64)
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "environments", repo / "environments")
    with served(tmp_path / "mirror", real=()) as releases:
        releases.lock(repo)
        done, env = _run_install_steps(tmp_path / "runner", repo)
        assert done.returncode == 0, done.stderr
        plugins.require_plugins(needs, env, LINUX_AMD64)  # what the steps installed is what groundctl looks for
        # A download that is not the file the lock checked fails the step, and nothing is installed.
        aws = next(p for p in needs if p.name == "aws")
        tarball = releases.mirror.file(Want(plugin_name("aws"), aws.version, LINUX_AMD64))
        tarball.write_bytes(tarball.read_bytes() + b"\0")
        done, env = _run_install_steps(tmp_path / "runner-2", repo)
    assert done.returncode == 4 and "but the lock records" in done.stderr and "Nothing was installed" in done.stderr
    with pytest.raises(EngineError, match="the aws resource plugin"):
        plugins.require_plugins(needs, env, LINUX_AMD64)


# -- the flux layer's secrets -----------------------------------------------------------------------------

def test_every_step_that_reaches_the_flux_layer_gets_its_secrets():
    docs = rendered()
    for workflow, job, name in ((PR_WORKFLOW, "plan", "Live plan"), (APPLY_WORKFLOW, "apply", "Apply the approved plan"),
                                (DRIFT_WORKFLOW, "drift", "Drift"), (REHEARSE_WORKFLOW, "rehearse", "Rehearse")):
        env = step(docs[workflow]["jobs"][job], name).get("env") or {}
        assert {k: env.get(k) for k in FLUX_SECRETS} == FLUX_SECRETS, (workflow, name)


def _env_of(cronjob: dict) -> list[dict]:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"]


def test_every_cronjob_of_an_ssh_repository_requires_both_secrets():
    files = spec_files()
    out = fm.render(files, image="registry.example/groundctl@sha256:" + "0" * 64)
    by_env = {f.spec.name: f.spec for f in files}
    jobs = [m for m in out.manifests if m["kind"] == "CronJob"]
    kinds = set()
    for job in jobs:
        spec = by_env[job["metadata"]["labels"]["groundctl/environment"]]
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in _env_of(job) if "valueFrom" in e}
        if spec.flux.repository_url.startswith("ssh://"):
            kinds.add(job["metadata"]["name"].split("-")[0])
            assert refs == {"GROUNDCTL_FLUX_DEPLOY_KEY": {"name": f"{spec.name}-flux-deploy-key", "key": "identity"},
                            "GROUNDCTL_FLUX_KNOWN_HOSTS": {"name": f"{spec.name}-flux-deploy-key",
                                                           "key": "known_hosts"}}, job["metadata"]["name"]
        else:
            assert refs == {}
    assert kinds == {"drift", "drill", "rehearse"}  # drift checks and rehearsals need them as much as drills
    assert any("flux-deploy-key" in n for n in out.notes)


# -- a pull request holds the plan role only --------------------------------------------------------------

def test_no_pull_request_job_can_reach_the_apply_role():
    pr = rendered()[PR_WORKFLOW]
    assert set(pr[True]) == {"pull_request"}  # YAML 1.1 reads the key `on` as true
    text = yaml.safe_dump(pr)
    assert "apply_role" not in text
    for job_id, job in pr["jobs"].items():
        assert "environment" not in job, job_id  # an environment's OIDC subject is what the apply role trusts
        for s in job["steps"]:
            if "configure-aws-credentials" in s.get("uses", ""):
                assert s["with"]["role-to-assume"] == "${{ matrix.plan_role }}"


# -- apply only from a successful plan, behind one stable check -----------------------------------------------

def _bash(script: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], env={**os.environ, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("detect,plan,ok", [("success", "success", True), ("success", "skipped", True),
                                            ("success", "failure", False), ("success", "cancelled", False),
                                            ("failure", "skipped", False)])
def test_the_aggregate_check_passes_only_when_every_plan_did(tmp_path, detect, plan, ok):
    job = rendered()[PR_WORKFLOW]["jobs"]["result"]
    assert job["name"] == RESULT_CHECK and job["if"] == "${{ always() }}" and job["needs"] == ["detect", "plan"]
    done = _bash(job["steps"][0]["run"], {"DETECT": detect, "PLAN": plan}, tmp_path)
    assert (done.returncode == 0) is ok, done.stderr


FAKE_GH = r'''#!/bin/sh
# Answers as the GitHub API would for the case in $GH_RUN and $GH_RESULT (the already-filtered --jq output).
case "$*" in
  *commits/*/pulls*) echo 7 ;;
  *pulls/7*) echo headsha ;;
  "run list"*) echo "$GH_RUN" ;;
  *actions/runs/*/jobs*) echo "$GH_RESULT" ;;
  *) echo "unexpected gh $*" >&2; exit 9 ;;
esac
'''


@pytest.mark.parametrize("run,result,expect", [
    ("123 completed", "success", None),
    ("123 completed", "failure", "did not succeed (groundctl plan result: failure)"),
    ("123 completed", "", "did not succeed (groundctl plan result: missing)"),
    ("123 in_progress", "success", "has not finished"),
    ("", "", "has no groundctl plan run"),
])
def test_the_merge_applies_only_a_successful_plan(tmp_path, run, result, expect):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    outputs = tmp_path / "outputs"
    script = step(rendered()[APPLY_WORKFLOW]["jobs"]["apply"], "Find the approved plan")["run"]
    done = _bash(script, {"PATH": f"{bin_dir}:{os.environ['PATH']}", "GH_RUN": run, "GH_RESULT": result,
                          "GITHUB_SHA": "mergesha", "GITHUB_REPOSITORY": "acme/infra", "ENVIRONMENT": "dev",
                          "GITHUB_OUTPUT": str(outputs), "GH_TOKEN": "x"}, tmp_path)
    if expect is None:
        assert done.returncode == 0, done.stderr
        assert "run_id=123" in outputs.read_text()
    else:
        assert done.returncode == 1 and expect in done.stderr, done.stderr
        assert "nothing was applied" in done.stderr or "never applied" in done.stderr
        assert not outputs.exists() or "run_id" not in outputs.read_text()


@pytest.mark.parametrize("workflow,job,name,needle", [
    (REHEARSE_WORKFLOW, "rehearse", "Rehearse", "- stopped before its report (exit 2): "),
    (DRIFT_WORKFLOW, "drift", "Drift", "Drift check of gone: failed (exit 2): "),
])
def test_a_scheduled_job_that_fails_before_its_report_says_why_in_its_summary(tmp_path, workflow, job, name, needle):
    """The step's script, run with bash, the real groundctl and jq: the environment's spec is gone, so groundctl
    stops before its report; its --json record of why reaches the job summary (it used to print nothing)."""
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "groundctl").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m groundctl "$@"\n')
    (bin_dir / "groundctl").chmod(0o755)
    (tmp_path / "environments").mkdir()
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    script = step(rendered()[workflow]["jobs"][job], name)["run"]
    done = _bash(script, {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ENVIRONMENT": "gone",
                          "PYTHONPATH": str(REPO), "GITHUB_STEP_SUMMARY": str(summary),
                          "GITHUB_OUTPUT": str(outputs)}, tmp_path)
    assert done.returncode == 2, done.stderr
    said = summary.read_text()
    assert needle in said and "No environment spec" in said, said


# -- ci targets ---------------------------------------------------------------------------------------------

def test_a_spec_given_as_the_changed_files_is_bad_input(monkeypatch, capsys, tmp_path):
    assert_refused(groundctl(monkeypatch, capsys, "ci", "targets", "--changed-files", "environments/dev.yaml",
                             "--json"), 2, "is an environment spec, not a list of changed paths")
    document = tmp_path / "changed.txt"
    document.write_text((REPO / "environments" / "dev.yaml").read_text())
    assert_refused(groundctl(monkeypatch, capsys, "ci", "targets", "--changed-files", str(document), "--json"), 2,
                   "is not a list of changed paths", "line ")
    document.write_text("environments/dev.yaml\nREADME.md\n")
    code, out, err = groundctl(monkeypatch, capsys, "ci", "targets", "--changed-files", str(document), "--json")
    assert code == 0, err
    assert [e["environment"] for e in json.loads(out)["include"]] == ["dev"]
