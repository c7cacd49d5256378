"""The reviewed plan is bound to what the reviewer saw (issue 37 §2): the plan job posts each layer's digests (its
fingerprint, its saved plan's sha256, how many planned values are unknown) in the sticky comment and the check's
output, and the merge job refuses an artifact whose digests differ from those posted for the pull request's last
commit, or whose planned values are less known than the plan shown to the reviewer.

The attack this closes: the plan files and the saved plan edited together and consistently (every planned value
made unknown, which Pulumi accepts for any value: pkg/resource/deploy/plan.go:38-43) pass the digest chain inside
the artifact. The workflows' own command lines run here in order, as in tests/test_ci_merge.py; the step that reads
the comment back runs in bash against the stand-in `gh` (tests/gh_stand_in.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bootstrap.ci import binding
from bootstrap.ci.workflows import APPLY_WORKFLOW, PR_WORKFLOW
from bootstrap.planning.knowledge import UNKNOWN, knowledge
from tests.ci_workflow import rendered, step
from tests.conftest import REPO
from tests.test_ci_merge import _job, repo, run_step  # noqa: F401 - fixtures
from tests.test_cli_errors import groundctl

pytestmark = pytest.mark.emulator

HEAD = "c0ffee" + "0" * 34  # the pull request's last commit
BIND = "Check the plan against the digests posted for review"


def _planned(root: Path, run_step) -> str:
    """The pull request's plan job: the live plan, its digests (the check's output), the sticky comment."""
    plan, env = _job(root, PR_WORKFLOW, "plan"), {"ENVIRONMENT": "local", "PLAN_DIR": "plans/local"}
    for name in ("Spec check", "Offline plan and posture rules (no credentials)", "Live plan"):
        code, _, err = run_step(plan, name, env)
        assert code == 0, (name, err)
    code, shown, err = run_step(plan, "Digests of the reviewed plan", env)
    assert code == 0, err
    assert "| `network` |" in shown and "planned values unknown until apply" in shown
    code, _, err = run_step(plan, "Write the sticky comment",
                            {**env, "HEAD_SHA": HEAD, "LIVE_NOTE": "", "RUN_URL": "https://github.example/runs/9"})
    assert code == 0, err
    return (root / "plans/local/comment.md").read_text()


def _tamper(live: Path, layer: str, edit) -> None:
    """Edit a layer's saved plan with `edit`, then every plan file naming it, consistently: the chain inside the
    artifact still holds."""
    import hashlib

    saved = live / f"pulumi-plan-local-{layer}.json"
    doc = json.loads(saved.read_text())
    edit(doc)
    saved.write_text(json.dumps(doc))
    digest = hashlib.sha256(saved.read_bytes()).hexdigest()
    for path in live.glob("plan-local-*.json"):
        plan = json.loads(path.read_text())
        for item in plan.get("layers", [plan]):
            if item.get("layer") == layer and item.get("saved_plan"):
                item["saved_plan"]["sha256"] = digest
        path.write_text(json.dumps(plan))


def _all_unknown(doc: dict) -> None:
    for resource in doc["resourcePlans"].values():
        adds = resource["goal"]["inputDiff"].get("adds", {})
        for key in adds:
            adds[key] = UNKNOWN


def test_an_artifact_made_less_known_after_the_review_is_refused_before_anything_is_applied(
        repo, run_step, monkeypatch, capsys):  # noqa: F811 - fixtures
    root, engine, endpoint = repo
    assert groundctl(monkeypatch, capsys, "ci", "init", "--install", ".")[0] == 0
    assert groundctl(monkeypatch, capsys, "up", "local", "--yes", env=endpoint)[0] == 0
    subnet = next(r for r in engine.desired["network"] if r.type == "aws:ec2/subnet:Subnet")
    subnet.inputs["cidr"] = "10.10.1.0/24"  # the pull request
    comment = _planned(root, run_step)
    # The reviewer sees every layer's digests; the merge job reads them back from the same comment.
    reviewed = binding.posted(comment, "local")
    assert reviewed.commit == HEAD and reviewed.layers["network"].unknown == 0
    assert reviewed.layers["network"].values > 0 and "#### Digests of the reviewed plan" in comment
    shutil.copytree(root / "plans/local", root / "approved")  # the artifact, downloaded
    (root / "reviewed-comment.md").write_text(comment)  # as the bind step fetches it
    apply = _job(root, APPLY_WORKFLOW, "apply")

    code, _, err = run_step(apply, BIND, {"ENVIRONMENT": "local", "HEAD": HEAD})
    assert code == 0, err  # the artifact reviewed

    # After the review, the saved plan's values made unknown and the plan files made to agree with it.
    _tamper(root / "approved/live", "network", _all_unknown)
    from bootstrap.apply.runner import approved_plans

    assert approved_plans(root / "approved/live", "local")["network"].saved_plan_text  # the chain inside holds
    subnet.inputs["cidr"] = "10.10.9.0/24"  # what the forger wants applied instead
    before = len(engine.calls)
    code, _, err = run_step(apply, BIND, {"ENVIRONMENT": "local", "HEAD": HEAD})
    assert code == 3, err
    message = " ".join(err.split())
    assert "is not the plan reviewed on the pull request" in message and "network:" in message
    total = reviewed.layers["network"].values
    assert f"leaves {total} of {total} planned values unknown, the plan shown to the reviewer 0 of {total}" in message
    assert "Nothing was applied" in message and engine.calls[before:] == []
    (root / "up.log").write_text(err)  # the step tees groundctl's error there; `up` never ran
    code, summary, _ = run_step(apply, "Run record and reason in the job summary", {"ENVIRONMENT": "local",
                                                                                   "EXIT_CODE": "3"})
    assert code == 0 and "stopped before the run started (exit 3)" in summary
    assert "is not the plan reviewed on the pull request" in summary.split("**Why:** ", 1)[1]


@pytest.mark.parametrize("case", ["value", "commit", "no-digests", "no-comment", "layer-dropped"])
def test_an_artifact_that_is_not_the_one_posted_is_refused(repo, run_step, monkeypatch, capsys, case):  # noqa: F811
    root, engine, endpoint = repo
    assert groundctl(monkeypatch, capsys, "ci", "init", "--install", ".")[0] == 0
    assert groundctl(monkeypatch, capsys, "up", "local", "--yes", env=endpoint)[0] == 0
    next(r for r in engine.desired["network"] if r.type == "aws:ec2/subnet:Subnet").inputs["cidr"] = "10.10.1.0/24"
    comment = _planned(root, run_step)
    shutil.copytree(root / "plans/local", root / "approved")
    head, expect = HEAD, ""
    if case == "value":  # as many unknowns as reviewed, another value: the digests differ
        def other_value(doc):
            for resource in doc["resourcePlans"].values():
                for key in resource["goal"]["inputDiff"].get("adds", {}):
                    resource["goal"]["inputDiff"]["adds"][key] = "0" * 64
        _tamper(root / "approved/live", "network", other_value)
        expect = "network: its saved plan's sha256 differ from the digests posted for review"
    elif case == "commit":  # the comment describes an earlier push
        head, expect = "d" * 40, "not of the pull request's last commit dddddddddddd"
    elif case == "no-digests":  # a comment without them (an older groundctl's, or a plan that failed)
        comment = "\n".join(line for line in comment.splitlines() if "groundctl:digests" not in line)
        expect = "it holds no digests of a reviewed plan"
    elif case == "layer-dropped":
        for path in (root / "approved/live").glob("plan-local-network*"):
            path.unlink()
        doc = json.loads((root / "approved/live/plan-local-live.json").read_text())
        doc["layers"] = [lay for lay in doc["layers"] if lay["layer"] != "network"]
        (root / "approved/live/plan-local-live.json").write_text(json.dumps(doc))
        expect = ("the artifact holds plans of backend, cluster, flux, the digests posted name backend, cluster, "
                  "flux, network")
    if case == "no-comment":
        expect = "No sticky plan comment of the workflow was found"
    else:
        (root / "reviewed-comment.md").write_text(comment)
    code, _, err = run_step(_job(root, APPLY_WORKFLOW, "apply"), BIND, {"ENVIRONMENT": "local", "HEAD": head})
    assert code == 3, err
    assert expect in " ".join(err.split()), err


def test_the_bind_step_reads_only_the_workflows_own_comment(tmp_path):
    """Anyone may comment on a pull request, and a comment can start with the marker: the step takes the one the
    workflow's bot posted, and a forged one posted before it is never read."""
    world, calls = tmp_path / "gh-world.json", tmp_path / "gh-calls.jsonl"
    marker = "<!-- groundctl:plan:dev -->"
    world.write_text(json.dumps({"repository": "acme/infra", "issues": [], "commit_pulls": {}, "pulls": {},
                                 "runs": [], "run_jobs": {}, "comments": {"7": [
                                     {"id": 11, "body": f"{marker}\nforged digests", "user": {"login": "mallory"}},
                                     {"id": 12, "body": f"{marker}\nthe bot's digests",
                                      "user": {"login": "github-actions[bot]"}}]}}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests" / "gh_stand_in.py"}" "$@"\n')
    # groundctl itself is not what this checks: a stand-in keeps the comment it was given.
    (bin_dir / "groundctl").write_text('#!/bin/sh\nwhile [ "$1" != --comment ]; do shift; done\ncp "$2" given.md\n')
    for name in ("gh", "groundctl"):
        (bin_dir / name).chmod(0o755)
    script = step(rendered()[APPLY_WORKFLOW]["jobs"]["apply"], BIND)["run"]
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "ENVIRONMENT": "dev",
                                            "PR": "7", "HEAD": HEAD, "GITHUB_REPOSITORY": "acme/infra",
                                            "GITHUB_OUTPUT": str(tmp_path / "outputs"), "GH_TOKEN": "x",
                                            "GH_STAND_IN_WORLD": str(world), "GH_STAND_IN_LOG": str(calls)})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "given.md").read_text() == f"{marker}\nthe bot's digests\n"
    assert "exit_code=0" in (tmp_path / "outputs").read_text()


def test_the_knowledge_of_a_saved_plan_counts_values_and_names_only_where_the_unknown_ones_are():
    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}
    doc = {"manifest": {}, "resourcePlans": {
        "urn:a": {"goal": {"inputDiff": {"adds": {"cidr": "10.0.0.0/16", "tags": {"Name": UNKNOWN, "env": "dev"},
                                                  "token": secret, "zones": [UNKNOWN, "b"]}}}, "steps": ["create"]},
        "urn:b": {"goal": {"inputDiff": {"updates": {"size": 3}}}, "steps": ["update"]},
        "urn:c": {"steps": ["delete"]}}}
    known = knowledge(json.dumps(doc))
    assert known.values == 7 and known.unknown == ("urn:a tags.Name", "urn:a zones[0]")
    assert known.summary() == "2 of 7 planned values unknown" and "10.0.0.0" not in repr(known)
    assert knowledge(json.dumps({"version": 1, "plan": doc})) == known  # the versioned envelope
    assert knowledge(json.dumps({"manifest": {}})).values == 0  # a plan with no resource
