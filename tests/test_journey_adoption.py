"""The adopter's first day, as the README's "Adopting groundctl" list says it, from an empty repository to the first
reviewed plan of a never-deployed environment, with nothing of groundctl patched (issues 35 §3 and 36).

1. An empty repository on "GitHub" (a bare repository with no commit), cloned. The list's blocks run verbatim in
   it, in one shell, with nothing of this machine's Python on PATH (only the placeholders filled in:
   groundctl's checkout, from which its wheel is built, and the repository's `<org>/<repo>`): pip-tools and build
   into a fresh `python3 -m venv`, the wheel built and committed, the requirements compiled with every hash
   against the package registry, groundctl installed from them, `groundctl init`, `spec check`, `pins update
   --no-image` from a local release mirror, `spec roles`, and the commits and pushes of the pull request's branch.
2. GitHub's side: the pull request's merge ref, and the written `groundctl-pr.yml` run from it as a runner runs it
   (tests/workflow_runner.py, tests/journey_actions.py): `pins check`, `ci targets`, in each job a fresh virtual
   environment into which groundctl is installed from the requirements file, the offline plan, the Pulumi CLI and
   the provider plugins installed by `groundctl pins install` from the URLs the lock records, each release file's
   sha256 checked, into an empty PULUMI_HOME; the live plan with the spec's plan role says `not deployed yet`, the
   sticky comment's body (kept in the artifact) says it, and the comment job posts it through `gh`.

What stands in, and why:
- AWS is the emulator (moto, tests/conftest.py). The spec `groundctl init` writes targets AWS (no
  `aws.endpoint_url`), as an adopter's does; the emulator is reached the way the AWS SDKs reach any endpoint:
  `AWS_ENDPOINT_URL`, which the configure-aws-credentials stand-in sets beside the emulator's credentials. No
  file of the repository says where AWS is.
- Release files come from the local mirror (tests/plugin_releases.py), as from a team's artifact proxy, named by
  the `GROUNDCTL_RELEASE_MIRROR` variable `pins update` reads; its CLI tarball holds the real CLI found on PATH,
  its kubernetes plugin's the real plugin built by hand, its aws plugin's a stand-in (none can be had offline;
  nothing here runs it: the environment is not deployed, so no preview runs).
- cosign: `pins update` verifies Flux's checksums file with the real cosign, which needs Sigstore's servers. A
  stand-in that accepts is on the adopter's PATH (tests/test_pins_update.py holds groundctl to cosign's answers).
- `gh` answers as GitHub would (tests/gh_stand_in.py); a `uses:` step is replaced by what its action provides.

Marked `engine` (the real CLI) and `registry` (build, pip-tools and every dependency come from the package
registry: GROUNDCTL_TEST_REGISTRY=1)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import boto3
import pytest

from bootstrap.ci.workflows import DEFAULT_REQUIREMENTS, PR_WORKFLOW
from bootstrap.pins.lockfile import LOCK_FILE
from tests import docs
from tests.conftest import REPO
from tests.journey import CLI_FILES, checkout_copy, clean_env, pinned_cli
from tests.journey_actions import (REPOSITORY, Actions, calls, failures, gh_world, git, real_cli_releases,
                                   registry_journey_marks, run_ok, runner, steps)
from tests.plugin_releases import real_plugin

CLI, NO_CLI = pinned_cli()
ENV, REGION, ACCOUNT = "staging", "eu-west-1", "123456789012"  # the README's example values
BUCKET = f"groundctl-{ENV}-state-{ACCOUNT}"
BRANCH = "adopt-groundctl"

pytestmark = registry_journey_marks(
    CLI, NO_CLI, "builds groundctl's wheel, compiles its requirements and installs them from the package registry")


def readme_list() -> str:
    """The README's adoption blocks, from building groundctl's wheel to pushing the pull request's branch, as one
    script: every block but the ones that follow the review (`groundctl up`, the fleet's manifests)."""
    blocks = docs.sh_blocks(docs.section("README.md", "Adopting groundctl"))
    first = next(i for i, b in enumerate(blocks) if "python -m build --wheel" in b)
    last = next(i for i, b in enumerate(blocks) if "git push -u origin" in b)
    return "".join(blocks[first:last + 1])


def _machine(folder: Path, releases_url: str) -> dict[str, str]:
    """The adopter's shell: a fresh venv's bin (empty until the list installs into it), the cosign stand-in, the
    system's tools; their git identity; this machine's pip settings (its certificates) and nothing else of it."""
    subprocess.run(["python3", "-m", "venv", str(folder / "python")], check=True, timeout=300)
    cosign = folder / "cosign-bin" / "cosign"
    cosign.parent.mkdir()
    cosign.write_text("#!/bin/sh\necho Verified OK >&2\n")
    cosign.chmod(0o755)
    (folder / "home").mkdir()
    (folder / "home" / ".gitconfig").write_text("[user]\n\tname = Ada Adopter\n\temail = ada@example.invalid\n")
    pip = {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    # PIP_NO_COMPILE: byte-compiling pulumi_aws's thousands of modules is all the install would do differently,
    # and minutes of it on a loaded 2-core machine (the runners' installs skip it too: tests/journey_actions.py).
    return clean_env(folder / "home", f"{folder / 'python' / 'bin'}:{cosign.parent}:/usr/bin:/bin",
                     {**pip, "PIP_NO_COMPILE": "1", "GROUNDCTL_RELEASE_MIRROR": releases_url})


@pytest.fixture(scope="module")
def adopted(tmp_path_factory, emulator_endpoint):
    """The README's list run in an empty repository, and GitHub's merge ref of the pull request it pushed."""
    folder = tmp_path_factory.mktemp("adoption")
    with real_cli_releases(folder / "release-mirror", CLI) as releases:
        origin = folder / "github" / "infra.git"
        run_ok(["git", "init", "-q", "--bare", "-b", "main", str(origin)])
        machine = _machine(folder / "adopter", releases.url)
        infra = folder / "adopter" / "infra"
        run_ok(["git", "clone", "-q", str(origin), str(infra)], env=machine)
        checkout = checkout_copy(REPO, folder / "groundctl")
        script = readme_list().replace("/path/to/groundctl", str(checkout)).replace("<org>/<repo>", REPOSITORY)
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=infra, env=machine,
                              capture_output=True, text=True, timeout=3000, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        # GitHub's test merge of the pull request, as its merge ref: the default branch and the pushed branch.
        merger = folder / "github" / "merge"
        run_ok(["git", "clone", "-q", str(origin), str(merger)])
        head = git(merger, "rev-parse", f"origin/{BRANCH}")
        git(merger, "-c", "user.name=GitHub", "-c", "user.email=noreply@github.com", "merge", "-q", "--no-ff",
            "-m", f"Merge {head} into main", f"origin/{BRANCH}")
        git(merger, "push", "-q", "origin", "HEAD:refs/pull/1/merge")
        yield {"folder": folder, "origin": origin, "infra": infra, "machine": machine, "said": done,
               "head": head, "merge": git(merger, "rev-parse", "HEAD"), "emulator": emulator_endpoint}


def test_the_readme_list_starts_the_repository_with_groundctl_installed_from_its_own_requirements(adopted):
    infra, machine = adopted["infra"], adopted["machine"]
    groundctl = Path(machine["PATH"].split(":")[0]) / "groundctl"
    origin = run_ok([str(groundctl.parent / "python"), "-c", "import groundctl; print(groundctl.__file__)"],
                    env=machine, cwd=adopted["folder"]).stdout
    assert origin.startswith(str(groundctl.parent.parent)), origin  # the venv's own install, not this checkout
    said = adopted["said"].stdout + adopted["said"].stderr
    assert "Traceback" not in said
    # What the pull request holds: every file the list wrote, committed on its branch over an empty first commit.
    listed = git(infra, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    for needed in (f"environments/{ENV}.yaml", DEFAULT_REQUIREMENTS, "groundctl-requirements.in", LOCK_FILE,
                   "vendor/groundctl-0.1.0-py3-none-any.whl", f".github/workflows/{PR_WORKFLOW}"):
        assert needed in listed, listed
    assert git(infra, "ls-tree", "-r", "--name-only", "HEAD~1") == ""  # the default branch's empty start
    assert git(infra, "status", "--porcelain") == ""  # nothing the list wrote is left out of the commit
    lock = json.loads((infra / LOCK_FILE).read_text())
    urls = [entry["url"] for entry in lock["artifacts"]]
    assert urls and all(u.startswith(machine["GROUNDCTL_RELEASE_MIRROR"] + "/") for u in urls)  # read from the mirror
    # `spec roles` (step 3) printed the plan role the spec names, for the repository given.
    assert f"arn:aws:iam::{ACCOUNT}:role/groundctl-plan" in said and f"repo:{REPOSITORY}:" in said


def test_the_pull_request_plans_the_never_deployed_environment_with_the_real_cli_and_checked_plugins(adopted):
    s3 = boto3.client("s3", endpoint_url=adopted["emulator"], region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    assert BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}  # never deployed
    gh = gh_world(adopted["folder"])
    actions = Actions(adopted["origin"], 6001, adopted["folder"], ACCOUNT,
                      aws_env={"AWS_ENDPOINT_URL": adopted["emulator"]})
    workflow = adopted["infra"] / ".github" / "workflows" / PR_WORKFLOW
    pr = runner(workflow, {"sha": adopted["merge"], "run_id": 6001, "event_name": "pull_request", "event": {
        "pull_request": {"number": 1, "head": {"sha": adopted["head"], "repo": {"full_name": REPOSITORY}}}}},
        actions, gh)
    pr.run()
    assert pr.result("result") == "success", failures(pr)
    assert [j.matrix["environment"] for j in pr.jobs["plan"]] == [ENV]  # the first pull request touches it
    plan = steps(pr, "plan")
    assert {name: s.outcome for name, s in plan.items() if s.outcome != "success"} == {}, failures(pr)
    assert actions.roles == [f"arn:aws:iam::{ACCOUNT}:role/groundctl-plan"]  # the spec init wrote names it

    job = pr.jobs["plan"][0]
    live = " ".join(plan["Live plan"].stderr.split())
    assert f"not deployed yet: the state bucket {BUCKET} does not exist" in live, live
    assert f"`groundctl up {ENV}`" in live and "Traceback" not in live
    # The CLI and the plugins the job ran with came from the lock's URLs, checked, into the job's empty home.
    cli = job.workspace.parent / "runner-temp" / "pulumi-cli"
    assert all((cli / name).read_bytes() == (CLI / name).read_bytes() for name in CLI_FILES)
    plugins = job.workspace.parent / "home" / ".pulumi" / "plugins"
    installed = sorted(p.name for p in plugins.iterdir() if p.is_dir())
    assert [name.split("-v")[0] for name in installed] == ["resource-aws", "resource-kubernetes"], installed
    kubernetes = real_plugin("kubernetes")
    if kubernetes is not None:
        unpacked = plugins / installed[1] / "pulumi-resource-kubernetes"
        assert unpacked.read_bytes() == kubernetes.read_bytes()  # the real plugin, as the mirror serves it

    # The reviewed plan: the artifact holds it and the sticky comment, which the comment job posted.
    artifact = adopted["folder"] / "artifacts" / "6001" / f"groundctl-plan-{ENV}"
    combined = json.loads((artifact / "live" / f"plan-{ENV}-live.json").read_text())
    assert combined["not_deployed"] is True and combined["has_changes"] is False
    comment = (artifact / "comment.md").read_text()
    assert f"<!-- groundctl:plan:{ENV} -->" in comment and "not deployed yet" in comment
    assert adopted["head"][:12] in comment
    posted = [c for c in calls(gh[1]) if c.get("method") == "POST"]
    assert len(posted) == 1 and posted[0]["endpoint"] == f"repos/{REPOSITORY}/issues/1/comments"
    assert posted[0]["fields"]["body"] == comment
    assert BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}  # a plan creates nothing
