"""The adopter's journey through the generated workflows, run as a runner runs them, with nothing pre-seeded.

A fresh infrastructure repository gets groundctl's wheel (built from this checkout), a hashed requirements file
naming it and every dependency, and the workflows `groundctl ci init` writes. Its environment `journey` is born
by hand, once, as the README says (runbooks/create-environment.md, "Under CI"). Then, read from the written files
and run step by step (tests/workflow_runner.py; the actions' stand-ins in tests/journey_actions.py):

0. the repository's pins lock, written by `groundctl pins update` from a local release mirror in the publishers'
   formats (the CLI's tarball holds the real CLI found on PATH; the kubernetes plugin's the real plugin when built);
1. a pull request's plan workflow: its first job runs `groundctl pins check`; its plan job installs groundctl
   into a fresh virtual environment from the requirements file, the pinned CLI and the provider plugins from the
   lock with `groundctl pins install` (each release file's sha256 checked; an empty PULUMI_HOME before it), plans
   with the plan role, writes the sticky comment's body and keeps the plans as the artifact; the comment job
   posts that body through `gh`; the one required check passes;
2. the merge's apply workflow: it finds that run through `gh`, downloads its artifact and applies it with the
   apply role, the change reaching the environment;
3. the scheduled drift workflow, after a change made outside groundctl: `drift --record` with the record role
   finds it and writes its record, and the drift issue is opened through `gh`.

What stands in, and why: a `uses:` step is replaced by what its action provides (a checkout; a fresh virtual
environment for setup-python; AWS credentials of the emulator for configure-aws-credentials; a folder for the
artifact actions). Release files come from the local mirror, as from a team's artifact proxy. `gh` records its calls
and answers as GitHub would (tests/gh_stand_in.py); jq is the real one. AWS is the emulator, so the spec names its
endpoint and the stacks' secrets use a passphrase (an AWS environment's use its KMS key). The aws plugin cannot be
had offline: its tarball holds a stand-in binary (tests/plugin_releases.py), and the layer programs are the engine
tier's stand-ins (dynamic-provider records in the emulator's S3), each importing its SDK as the real layer does, so
groundctl's engine check asks for the plugins the step must supply.

Marked `engine` (the real CLI) and `registry` (the wheel's build and its dependencies come from the package
registry: GROUNDCTL_TEST_REGISTRY=1)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from pathlib import Path

import boto3
import pytest
import yaml

from bootstrap.ci.workflows import APPLY_WORKFLOW, DEFAULT_REQUIREMENTS, DRIFT_WORKFLOW, PR_WORKFLOW, RESULT_CHECK
from recovery.evidence import summary
from tests.conftest import REPO
from tests.journey import PROGRAMS, checkout_copy, pinned_cli, stand_in_stacks
from tests.journey_actions import (REPOSITORY, Actions, calls, failures, git, real_cli_releases,
                                   registry_journey_marks, run_ok, runner, steps)
from tests.journey_actions import gh_world as new_gh_world
from tests.plugin_releases import install, stand_in_cli
from tests.workflow_runner import Runner

CLI, NO_CLI = pinned_cli()
ENV = "journey"
ACCOUNT = "123456789012"
PASSPHRASE = "journey-passphrase-Wq48"
ROLES = {r: f"arn:aws:iam::{ACCOUNT}:role/groundctl-{r}" for r in ("plan", "record", "apply")}
SEAM = "GROUNDCTL_JOURNEY_STACKS"

pytestmark = registry_journey_marks(
    CLI, NO_CLI, "builds groundctl's wheel and installs its dependencies from the package registry")

# The engine tier's stand-ins, read by the venv's groundctl in place of the layer programs (the engine's
# stacks_dir seam), only in the `groundctl` process itself.
SEAM_MODULE = f'''import os, sys
if os.environ.get("{SEAM}") and os.path.basename(sys.argv[0] if sys.argv else "") == "groundctl":
    from pathlib import Path
    from bootstrap.engine import automation

    class JourneyEngine(automation.PulumiEngine):
        def __init__(self, *args, **kwargs):
            kwargs["stacks_dir"] = Path(os.environ["{SEAM}"])
            super().__init__(*args, **kwargs)

    automation.PulumiEngine = JourneyEngine
'''



def _requirements(tmp: Path, infra: Path) -> None:
    """groundctl's wheel from this checkout, committed at vendor/, and every dependency pinned with its hash, from
    a folder of wheels the runners install from (`--no-index --find-links`, as a company mirror would be)."""
    source = checkout_copy(REPO, tmp / "groundctl-checkout")
    run_ok([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(infra / "vendor"), str(source)])
    wheel, = (infra / "vendor").glob("groundctl-*.whl")
    # GROUNDCTL_TEST_WHEELHOUSE keeps the downloaded wheels between runs (pip adds only what is missing).
    wheels = Path(os.environ.get("GROUNDCTL_TEST_WHEELHOUSE") or tmp / "wheelhouse")
    run_ok([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(wheels), str(wheel)])
    (wheels / wheel.name).unlink(missing_ok=True)
    lines = ["--no-index", f"--find-links {wheels}",
             f"./vendor/{wheel.name} --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}"]
    for dep in sorted(wheels.glob("*.whl")):
        name, version = dep.name.split("-")[:2]
        lines.append(f"{name}=={version} --hash=sha256:{hashlib.sha256(dep.read_bytes()).hexdigest()}")
    (infra / DEFAULT_REQUIREMENTS).write_text("\n".join(lines) + "\n")


@pytest.fixture
def releases(tmp_path):
    """The local release mirror, its CLI tarball holding the real CLI, served while the test runs."""
    with real_cli_releases(tmp_path / "release-mirror", CLI) as mirror:
        yield mirror


@pytest.fixture
def world(tmp_path, emulator_endpoint, monkeypatch, capsys, releases):
    """The adopter's repository after `ci init`, and the environment it describes, born by hand."""
    infra = tmp_path / "infra"
    (infra / "environments").mkdir(parents=True)
    s3 = boto3.client("s3", endpoint_url=emulator_endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    state, records = f"jn-{uuid.uuid4().hex[:16]}", f"jnr-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=records)
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["name"] = ENV
    spec["aws"].update(endpoint_url=emulator_endpoint, **{f"{r}_role_arn": arn for r, arn in ROLES.items()})
    spec["backend"].update(bucket=state, kms_alias=f"alias/{state}")
    (infra / "environments" / f"{ENV}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    _requirements(tmp_path, infra)
    from tests.test_cli_errors import groundctl

    # The pins lock, from the mirror (Flux's signature is cosign's to check: tests/test_pins_update.py).
    code, out, err = groundctl(monkeypatch, capsys, "pins", "update", "--dir", str(infra), "--no-image",
                               "--no-verify-signatures", env={"GROUNDCTL_RELEASE_MIRROR": releases.url})
    assert code == 0, err
    code, out, err = groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(infra))
    assert code == 0, err
    git(infra, "init", "-q", "-b", "main")
    git(infra, "add", "-A")
    git(infra, "-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-qm", "groundctl under CI")
    stacks = stand_in_stacks(tmp_path / "stacks")
    extra = {"PULUMI_CONFIG_PASSPHRASE": PASSPHRASE, "ENGINE_TIER_RECORDS_BUCKET": records, SEAM: str(stacks),
             "PYTHONPATH": str(PROGRAMS)}
    _born_by_hand(tmp_path / "operator", infra, stacks, extra, monkeypatch, capsys)
    return {"infra": infra, "s3": s3, "state": state, "records": records, "extra": extra, "folder": tmp_path}


def _born_by_hand(home: Path, infra: Path, stacks: Path, extra: dict, monkeypatch, capsys) -> None:
    """An operator's first `groundctl up journey --yes` with the apply role, from the repository (the README's
    one-time bootstrap). The stand-in backend declares no AWS resource, so the adoption of the bucket and key
    (an import through the aws plugin) is left out."""
    from bootstrap.apply import setup
    from tests.engine_programs.tier import install_stacks_dir
    from tests.test_cli_errors import groundctl

    cli = stand_in_cli(home / "installer")
    env = {"PULUMI_HOME": str(home / ".pulumi"), "PULUMI_SKIP_UPDATE_CHECK": "true"}
    from bootstrap.pins.repository import read_lock

    install(cli, read_lock(infra)[0], {**os.environ, **env})
    for k, v in {**extra, **env, "ENGINE_TIER_STACKS": str(stacks), "AWS_ACCESS_KEY_ID": "testing",
                 "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.syspath_prepend(str(PROGRAMS))
    monkeypatch.chdir(infra)
    decide = setup.decide
    monkeypatch.setattr(setup, "decide", lambda *a, **k: setup.Setup(decide(*a, **k).create_stack, None))
    from bootstrap.engine import automation

    monkeypatch.setattr(automation, "PulumiEngine", automation.PulumiEngine)
    install_stacks_dir(stacks)
    code, out, err = groundctl(monkeypatch, capsys, "up", ENV, "--yes")
    assert code == 0, out + err


def _runner(world: dict, name: str, github: dict, gh: tuple[Path, Path]) -> tuple[Runner, Actions]:
    actions = Actions(world["infra"], github["run_id"], world["folder"], ACCOUNT,
                      site_files={"groundctl_journey_seam.py": SEAM_MODULE,
                                  "groundctl_journey_seam.pth": "import groundctl_journey_seam\n"})
    return runner(world["infra"] / ".github" / "workflows" / name, github, actions, gh, world["extra"]), actions


def test_a_pull_request_plan_its_merge_applies_it_and_the_nightly_drift_check_records(world):
    infra = world["infra"]
    base = git(infra, "rev-parse", "HEAD")
    # The pull request: a new Kubernetes version for the environment, and GitHub's merge commit of it.
    git(infra, "checkout", "-q", "-b", "bump")
    spec = infra / "environments" / f"{ENV}.yaml"
    data = yaml.safe_load(spec.read_text())
    assert data["cluster"]["kubernetes_version"] == "1.31"
    data["cluster"]["kubernetes_version"] = "1.32"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    git(infra, "-c", "user.name=a", "-c", "user.email=a@example.invalid", "commit", "-qam", "cluster 1.32")
    head = git(infra, "rev-parse", "HEAD")
    git(infra, "checkout", "-q", "main")
    git(infra, "-c", "user.name=a", "-c", "user.email=a@example.invalid", "merge", "-q", "--no-ff", "-m",
        "Merge pull request #7", "bump")
    merge = git(infra, "rev-parse", "HEAD")
    gh = gh_world, gh_log = new_gh_world(world["folder"])

    # 1. The pull request's plan workflow.
    pr, pr_actions = _runner(world, PR_WORKFLOW, {
        "sha": merge, "run_id": 5001, "event_name": "pull_request",
        "event": {"pull_request": {"number": 7, "head": {"sha": head, "repo": {"full_name": REPOSITORY}}}}},
        gh)
    pr.run()
    assert pr.result("result") == "success", failures(pr)
    plan = steps(pr, "plan")
    assert plan["Live plan"].outcome == "success", failures(pr)
    assert pr_actions.roles == [ROLES["plan"]]
    live = pr.jobs["plan"][0].workspace / "plans" / ENV / "live"
    operations = {layer: {c["name"]: c["operation"] for c in json.loads(
        (live / f"plan-{ENV}-{layer}.json").read_text())["changes"]} for layer in ("backend", "network", "cluster")}
    assert operations["cluster"]["cluster"] == "update"  # the reviewed change, and nothing else
    assert {op for layer in ("backend", "network") for op in operations[layer].values()} == {"same"}
    posted = [c for c in calls(gh_log) if c.get("method") == "POST"]
    assert len(posted) == 1 and posted[0]["endpoint"] == f"repos/{REPOSITORY}/issues/7/comments"
    comment = (pr.jobs["plan"][0].workspace / "plans" / ENV / "comment.md").read_text()
    assert posted[0]["fields"]["body"] == comment and f"<!-- groundctl:plan:{ENV} -->" in comment
    assert "cluster" in comment and head[:12] in comment
    assert f"<!-- groundctl:digests:{ENV} " in comment and "#### Digests of the reviewed plan" in comment

    # 2. The merge's apply workflow, from the pull request's artifact.
    state = json.loads(gh_world.read_text())
    state["commit_pulls"][merge] = [{"number": 7, "merged_at": "2026-12-04T18:00:00Z"}]
    state["pulls"]["7"] = {"number": 7, "head": {"sha": head}}
    state["runs"] = [{"databaseId": 5001, "status": "completed", "headSha": head, "workflow": PR_WORKFLOW,
                      "event": "pull_request"}]
    state["run_jobs"]["5001"] = [{"name": RESULT_CHECK, "conclusion": pr.result("result")}]
    gh_world.write_text(json.dumps(state))
    apply, apply_actions = _runner(world, APPLY_WORKFLOW, {
        "sha": merge, "run_id": 5002, "event_name": "push", "event": {"before": base}}, gh)
    apply.run()
    assert apply.result("apply") == "success", failures(apply)
    # The artifact was checked against the digests the plan job posted for the pull request's last commit.
    assert steps(apply, "apply")["Check the plan against the digests posted for review"].outcome == "success"
    assert apply_actions.roles == [ROLES["apply"]]
    record = json.loads((apply.jobs["apply"][0].workspace / "run-record.json").read_text())
    assert record["outcome"] == "succeeded" and record["stopped_at"] is None, record
    # Every job of both runs kept pip's downloads under one key: the hash of the requirements file they install.
    key = hashlib.sha256((infra / DEFAULT_REQUIREMENTS).read_bytes()).hexdigest()
    assert pr_actions.caches and apply_actions.caches and {
        c.rsplit("-", 1)[1] for c in pr_actions.caches + apply_actions.caches} == {key}
    cluster = world["s3"].get_object(Bucket=world["records"], Key=f"{ENV}/cluster/cluster")
    assert json.loads(cluster["Body"].read())["version"] == "1.32"
    assert ENV in apply.jobs["apply"][0].summary

    # 3. The nightly drift check, after a change made outside groundctl: drift, recorded, and the issue opened.
    world["s3"].put_object(Bucket=world["records"], Key=f"{ENV}/network/vpc", Body=b'{"cidr": "10.99.0.0/16"}')
    drift, drift_actions = _runner(world, DRIFT_WORKFLOW, {"sha": merge, "run_id": 5003, "event_name": "schedule"},
                                   gh)
    drift.run()
    assert drift.result("drift") == "success", failures(drift)
    assert drift_actions.roles == [ROLES["record"]]
    report = json.loads((drift.jobs["drift"][0].workspace / "drift.json").read_text())
    assert report["drift"] is True and {r["layer"]: r["state"] for r in report["layers"]} == {
        "backend": "clean", "network": "drift", "cluster": "clean", "flux": "skipped"}, report
    kept = {o["Key"] for o in world["s3"].list_objects_v2(Bucket=world["state"], Prefix=f".groundctl/drift/{ENV}/")
            .get("Contents", [])}
    # drift --record wrote its record, and the environment's summary beside it (recovery/evidence/summary.py)
    assert summary.key(ENV) in kept and len(kept - {summary.key(ENV)}) == 1, kept
    opened = [c for c in calls(gh_log) if c["argv"][:2] == ["issue", "create"]]
    assert len(opened) == 1 and opened[0]["title"] == f"groundctl: drift in {ENV}" and "network" in opened[0]["body"]
    assert all(c["token"] for c in calls(gh_log))  # every call with the job's GH_TOKEN
