"""The pure decisions behind the workflows: touched environments, the sticky comment and its cut at a layer
boundary under GitHub's 65,536-character limit, the merge job's summary and the drift issue body."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from bootstrap.ci.comment import GITHUB_COMMENT_LIMIT, Block, PlanInputs, fit, github_length, marker, plan_comment
from bootstrap.ci.reports import drift_issue, drift_title, up_summary
from bootstrap.ci.touched import CiEnvironment, select, touched
from bootstrap.planning import offline_render
from bootstrap.planning.plan import Plan, ResourceChange
from bootstrap.planning.render import plan_files
from tests.conftest import REPO
from tests.test_cli_errors import assert_refused, groundctl

ENVS = [CiEnvironment("dev", "eu-west-1", "111111111111", plan_role="arn:aws:iam::111111111111:role/plan",
                      apply_role="arn:aws:iam::111111111111:role/apply"),
        CiEnvironment("local", "us-east-1", "123456789012", extra_files=("manifests/flux-v2.4.0.yaml",)),
        CiEnvironment("prod", "eu-west-1", "222222222222", plan_role="arn:aws:iam::222222222222:role/plan"),
        CiEnvironment("broken", spec_error="environments/broken.yaml is not a valid environment spec")]


# -- touched environments -------------------------------------------------------------------------------


@pytest.mark.parametrize("changed,expected", [
    (["environments/dev.yaml"], ["dev"]),
    (["environments/dev.yaml", "environments/prod.yaml", "README.md"], ["dev", "prod"]),
    (["./environments/prod.yaml"], ["prod"]),
    (["README.md", "runbooks/create-environment.md", "environments/README.md"], []),
    (["environments/gone.yaml"], []),  # deleted in the change: nothing left to plan
    (["environments/old/dev.yaml"], []),  # only files directly in environments/ are specs
    (["manifests/flux-v2.4.0.yaml"], ["local"]),  # a file the spec names
    (["stacks/network/__main__.py"], ["broken", "dev", "local", "prod"]),
    (["pyproject.toml"], ["broken", "dev", "local", "prod"]),
    (["bootstrap/planning/render.py", "environments/dev.yaml"], ["broken", "dev", "local", "prod"]),
    ([], []),
])
def test_touched_environments(changed, expected):
    names, why = touched(changed, ENVS)
    assert names == expected
    assert why


def test_selection_by_role_keeps_broken_specs_so_their_job_fails_loudly():
    everyone = [e.environment for e in ENVS]
    assert [e.environment for e in select(ENVS, everyone, None).include] == ["broken", "dev", "local", "prod"]
    plan = select(ENVS, everyone, "plan")
    assert [e.environment for e in plan.include] == ["broken", "dev", "prod"]
    assert plan.skipped == (("local", "its spec names no aws.plan_role_arn, so CI has no role to plan it with"),)
    apply = select(ENVS, ["dev", "prod"], "apply")
    assert [e.environment for e in apply.include] == ["dev"] and apply.skipped[0][0] == "prod"
    matrix = apply.matrix()
    assert matrix["count"] == 1 and matrix["include"][0]["apply_role"].endswith(":role/apply")
    assert "extra_files" not in matrix["include"][0]


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    shutil.copytree(REPO / "environments", tmp_path / "environments")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_targets_command_reads_a_change_and_the_specs(repo, monkeypatch, capsys):
    (repo / "changed.txt").write_text("environments/dev.yaml\nenvironments/local.yaml\ndocs/x.md\n")
    code, out, err = groundctl(monkeypatch, capsys, "ci", "targets", "--changed-files", "changed.txt",
                               "--needs", "plan-role", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["count"] == 1 and doc["include"][0]["environment"] == "dev"
    assert doc["include"][0]["plan_role"] == "arn:aws:iam::111111111111:role/groundctl-plan"
    assert doc["skipped"][0]["environment"] == "local" and "local: not included" in err
    # A spec that no longer validates is still a target: its spec check must fail in the job.
    data = yaml.safe_load((repo / "environments" / "dev.yaml").read_text())
    data["network"]["az_count"] = "two"
    (repo / "environments" / "dev.yaml").write_text(yaml.safe_dump(data))
    code, out, _ = groundctl(monkeypatch, capsys, "ci", "targets", "--changed-files", "changed.txt", "--json")
    rows = {r["environment"]: r for r in json.loads(out)["include"]}
    assert code == 0 and "az_count" in rows["dev"]["spec_error"] and rows["local"]["spec_error"] == ""


def test_targets_refuses_what_it_cannot_use(repo, monkeypatch, capsys):
    (repo / "changed.txt").write_text("environments/Bad_Name.yaml\n")
    assert_refused(groundctl(monkeypatch, capsys, "ci", "targets", "--changed-files", "changed.txt"), 2,
                   "environments/Bad_Name.yaml", "Rename it")
    assert_refused(groundctl(monkeypatch, capsys, "ci", "targets"), 2, "--changed-files FILE", "--all")
    assert_refused(groundctl(monkeypatch, capsys, "ci", "targets", "--all", "--needs", "admin"), 2, "plan-role")
    assert_refused(groundctl(monkeypatch, capsys, "ci", "targets", "--all", "--dir", str(repo / "nope")), 2,
                   "holds no environments/ folder")


# -- the sticky comment ---------------------------------------------------------------------------------


def _plan(layer: str, n: int, *, name_len: int = 120, deletes: int = 0) -> Plan:
    changes = []
    for i in range(n):
        name = f"{layer}-{i:05d}-" + "x" * name_len
        op = "delete" if i < deletes else "create"
        changes.append(ResourceChange(f"urn:pulumi:dev::{layer}::aws:ec2/subnet:Subnet::{name}",
                                      "aws:ec2/subnet:Subnet", op, diff_keys=("cidrBlock", "tags")))
    return Plan(layer, "dev", tuple(changes))


def _live(plans: list[Plan]) -> tuple[dict, str]:
    files = plan_files(plans)
    return json.loads(files["plan-dev-live.json"]), files["plan-dev-live.md"]


def test_a_plan_too_long_for_github_is_cut_at_a_layer_boundary_with_a_pointer():
    plans = [_plan("backend", 5), _plan("network", 150, deletes=3), _plan("cluster", 400), _plan("flux", 400)]
    live_doc, live_md = _live(plans)
    assert len(live_md) > 2 * GITHUB_COMMENT_LIMIT  # really too long
    body = plan_comment(PlanInputs("dev", live_doc=live_doc, live_md=live_md, artifact_name="groundctl-plan-dev",
                                   artifact_url="https://github.example/acme/infra/actions/runs/7#artifacts",
                                   commit="0123456789abcdef"))
    assert github_length(body) <= GITHUB_COMMENT_LIMIT
    assert body.startswith(marker("plan", "dev") + "\n")
    # Risky changes come first and survive the cut whole.
    risky = live_doc["risky_count"]  # the 3 deletes, and every backend change
    assert risky == 8 and body.index(f"Risky changes ({risky})") < body.index("<details>")
    assert body.count("**delete**") == 3
    # Cut between layers: every section that is kept is whole, and each left-out layer is named.
    assert body.count("<details>") == body.count("</details>") == 2
    sections = [s for s in live_md.split("<details>")[1:]]
    assert ("<details>" + sections[0].rstrip()) in body and ("<details>" + sections[1].rstrip()) in body
    assert "<code>network</code>" in sections[1] and "<code>cluster</code>" not in body
    note = body[body.index("✂️"):]
    assert "`cluster` (live plan)" in note and "`flux` (live plan)" in note and "`network`" not in note
    assert "the artifact [`groundctl-plan-dev`](https://github.example/acme/infra/actions/runs/7#artifacts)" in note
    assert "65,536-character" in note
    assert body.rstrip().endswith("updated in place on every push</sub>")


def test_a_plan_that_fits_is_left_whole():
    live_doc, live_md = _live([_plan("backend", 5), _plan("network", 8)])
    body = plan_comment(PlanInputs("dev", live_doc=live_doc, live_md=live_md))
    assert "✂️" not in body and body.count("<details>") == 2
    for section in live_md.split("<details>")[1:]:
        assert section.rstrip() in body


def test_when_even_the_risky_list_is_too_long_it_is_cut_at_a_line():
    plans = [_plan("network", 3000, deletes=3000, name_len=40)]  # 3,000 risky rows: the head alone overflows
    live_doc, live_md = _live(plans)
    body = plan_comment(PlanInputs("dev", live_doc=live_doc, live_md=live_md, artifact_name="a"))
    assert github_length(body) <= GITHUB_COMMENT_LIMIT and "the rest of the list above" in body
    kept_rows = [ln for ln in body.splitlines() if ln.startswith("| network | ")]
    assert 100 < len(kept_rows) < 3000 and all(ln.endswith("|") for ln in kept_rows)  # whole rows only


def _offline_doc(failed: bool) -> dict:
    rules = [{"id": "state-bucket-versioned", "layer": "backend", "types": [], "reason": "a lost state needs its history",
              "status": "fail" if failed else "pass", "checked": 1, "not_applicable": [],
              "failures": [{"resource": "state-bucket", "message": "versioning is off"}] if failed else []}]
    return {"kind": offline_render.KIND, "version": 1, "environment": "dev", "production": False,
            "passed": not failed, "failed_rules": ["state-bucket-versioned"] if failed else [],
            "layer_order": ["backend"],
            "layers": {"backend": {"resource_count": 1, "outputs": {"bucket_name": "b"}, "secret_outputs": [],
                                   "resources": [{"type": "aws:s3/bucket:Bucket", "name": "state-bucket", "urn": "u",
                                                  "protect": True, "key_properties": {"bucket": "b"}, "inputs": {}}]}},
            "rules": rules, "findings": []}


def test_a_failing_posture_rule_leads_the_comment_and_offline_layers_are_collapsed():
    doc = _offline_doc(failed=True)
    body = plan_comment(PlanInputs("dev", offline_doc=doc, offline_md=offline_render.markdown(doc),
                                   live_note="the spec names no aws.plan_role_arn"))
    assert "❌ FAIL" in body and "not run: the spec names no aws.plan_role_arn" in body
    assert body.index("Failing posture rules") < body.index("<details>")
    assert "versioning is off" in body.split("<details>")[0]
    assert "<summary>Offline plan: <code>backend</code> (1 resources)</summary>" in body
    assert "<summary>Posture rules (offline)</summary>" in body
    passing = plan_comment(PlanInputs("dev", offline_doc=_offline_doc(False),
                                      offline_md=offline_render.markdown(_offline_doc(False))))
    assert "✅ PASS" in passing and "Failing posture rules" not in passing


def test_missing_plan_files_still_give_a_comment_that_says_so():
    body = plan_comment(PlanInputs("dev"))
    assert "did not run" in body and "not run: see the job log" in body and len(body) < 2000


@settings(max_examples=200, deadline=None)
@given(head=st.integers(0, 3000), sizes=st.lists(st.integers(0, 2000), max_size=12), limit=st.integers(400, 9000))
def test_fit_never_exceeds_the_limit_and_keeps_whole_blocks_in_order(head, sizes, limit):
    blocks = [Block(f"b{i}", f"[{i}:" + "y" * n + "]\n") for i, n in enumerate(sizes)]
    head_text = "".join(f"h{i:04d}\n" for i in range(head // 6))
    text = fit(head_text, blocks, "TAIL\n", lambda left: f"CUT {len(left)}\n", limit)
    assert github_length(text) <= limit
    whole = head_text + "".join(b.text for b in blocks) + "TAIL\n"
    if len(whole) <= limit:
        assert text == whole
        return
    if text.startswith(head_text):
        kept = [b for b in blocks if b.text in text]
        assert text == head_text + "".join(b.text for b in kept) + f"CUT {len(blocks) - len(kept)}\n" + "TAIL\n"
        assert kept == blocks[:len(kept)]
    elif limit > 100:
        assert text.endswith("TAIL\n") and "CUT" in text


def test_characters_outside_the_basic_plane_count_twice():
    """GitHub may count UTF-16 units: 600 padlocks are 1,200 of them, too many for a limit of 1,000."""
    assert github_length("🔒" * 600) == 1200 and github_length("✅") == 1
    text = fit("head\n", [Block("locks", "🔒" * 600), Block("b", "b" * 10)], "", lambda left: "CUT\n", 1000)
    assert text == "head\nCUT\n"
    protected = Plan("cluster", "dev", tuple(ResourceChange(f"urn:pulumi:dev::cluster::aws:eks/cluster:Cluster::c{i}",
                                                           "aws:eks/cluster:Cluster", "update", protected=True)
                                            for i in range(100)))
    live_doc, live_md = _live([protected, _plan("network", 400, name_len=60)])
    body = plan_comment(PlanInputs("dev", live_doc=live_doc, live_md=live_md), limit=40_000)
    assert body.count("🔒") == 100 and "`network` (live plan)" in body  # the padlocks kept, the next layer cut
    assert len(body) < github_length(body) <= 40_000


# -- the merge job's summary and the drift issue -------------------------------------------------------


RECORD = {"run_id": "r-123", "environment": "dev", "command": "up", "outcome": "refused",
          "stopped_at": "network/gate", "git_commit": "a" * 40,
          "message": "stopped at network/gate: The network layer was not applied: the plan in approved/live/network.json "
                     "is stale: it was approved with fingerprint 0123456789ab, a fresh preview has ba9876543210",
          "layers": [{"layer": "backend", "attempted": "up", "achieved": "unchanged", "serial": 4,
                      "fingerprint": "f" * 64, "message": "no changes"},
                     {"layer": "network", "attempted": "up", "achieved": "refused", "serial": None,
                      "fingerprint": "e" * 64, "message": "The network layer | was not applied"}],
          "phases": [], "stored": True}


def test_the_merge_summary_shows_the_reason_the_layers_and_the_record():
    text = up_summary("dev", RECORD, "▸ network: preview\nerror: The network layer was not applied: the plan in "
                                     "approved/live/network.json is stale\n", plan_dir="approved/live", exit_code=3)
    assert text.startswith("## groundctl up `dev`: ⛔ refused")
    assert "**Why:** stopped at network/gate" in text and "stale" in text
    assert "run `r-123`" in text and "stopped at `network/gate`" in text and "approved plan `approved/live`" in text
    assert "`.groundctl/runs/dev/r-123.json`" in text
    assert "The network layer \\| was not applied" in text  # a pipe in a message cannot break the table
    assert "**groundctl said:**" not in text  # the log repeats the record's reason: shown once
    fenced = text.split("````json\n", 1)[1].split("\n````", 1)[0]
    assert json.loads(fenced) == RECORD


def test_the_merge_summary_says_the_record_is_in_the_bucket_only_when_it_was_stored():
    unstored = up_summary("dev", dict(RECORD, stored=False), "")
    assert ".groundctl/runs/" not in unstored and "in the state bucket" in unstored
    assert "The run record was not stored in the state bucket" in unstored
    assert "the copy below is the only one" in unstored
    silent = up_summary("dev", {k: v for k, v in RECORD.items() if k != "stored"}, "")  # an older groundctl's record
    assert "in the state bucket" not in silent
    assert "commit `aaaaaaaaaaaa`" in silent


def test_the_merge_summary_of_a_start_that_failed_shows_its_reason_from_the_record():
    from groundctl.failed_start import document

    doc = document(["up", "dev", "--plan-dir", "approved/live", "--yes", "--json"],
                   "No environment spec at environments/dev.yaml.", 2, "failed")
    assert doc["command"] == "up" and doc["environment"] == "dev" and doc["stopped_before_report"] is True
    text = up_summary("dev", doc, "")
    assert text.startswith("## groundctl up `dev`: ❌ stopped before the run started (exit 2)")
    assert "**Why:** No environment spec at environments/dev.yaml." in text and "state bucket" not in text
    assert document(["up", "dev", "--yes"], "whatever", 2, "failed") is None  # no --json: nothing on stdout


def test_the_merge_summary_without_a_record_shows_what_groundctl_said():
    text = up_summary("dev", None, "error: commit abc is not a merged pull request, so there is no approved plan\n")
    assert "stopped before the run started" in text and "not a merged pull request" in text


def test_the_summary_command_tolerates_a_step_that_wrote_nothing(tmp_path, monkeypatch, capsys):
    (tmp_path / "up.log").write_text("error: pull request #4 has no finished groundctl plan run\n")
    code, out, err = groundctl(monkeypatch, capsys, "ci", "summary", "dev", "--record", str(tmp_path / "missing.json"),
                               "--log", str(tmp_path / "up.log"), "--exit-code", "")
    assert code == 0, err
    assert "no finished groundctl plan run" in out
    (tmp_path / "run.json").write_text(json.dumps(RECORD))
    code, out, _ = groundctl(monkeypatch, capsys, "ci", "summary", "dev", "--record", str(tmp_path / "run.json"),
                             "--exit-code", "3")
    assert code == 0 and "⛔ refused" in out


def test_the_drift_issue_names_the_environment_and_each_drifted_layer():
    report = {"environment": "dev", "drift": True, "layers": [
        {"layer": "backend", "state": "clean", "summary": "no changes", "changes": []},
        {"layer": "network", "state": "drift", "summary": "1 to update",
         "changes": [{"urn": "urn:pulumi:dev::network::aws:ec2/vpc:Vpc::vpc", "type": "aws:ec2/vpc:Vpc",
                      "operation": "update", "diff_keys": ["tags"]}]}]}
    body = drift_issue(report, run_url="https://github.example/r/1", commit="c" * 40)
    assert body.startswith(marker("drift", "dev"))
    assert "`network` no longer matches" in body and "| `vpc` | `aws:ec2/vpc:Vpc` | update | `tags` |" in body
    assert "[this run](https://github.example/r/1)" in body and "`cccccccccccc`" in body
    assert drift_title("dev") == "groundctl: drift in dev"
    huge = {**report, "layers": [{"layer": f"l{i}", "state": "drift", "summary": "many",
                                  "changes": [{"urn": f"u::r{j}" + "z" * 200, "type": "t", "operation": "update",
                                               "diff_keys": []} for j in range(200)]} for i in range(4)]}
    cut = drift_issue(huge)
    assert github_length(cut) <= GITHUB_COMMENT_LIMIT and "left out the changes in `l" in cut


def test_the_comment_command_reads_the_plan_jobs_folder_and_reports_the_cut(tmp_path, monkeypatch, capsys):
    live = tmp_path / "plans" / "dev" / "live"
    live.mkdir(parents=True)
    for name, text in plan_files([_plan("network", 100), _plan("cluster", 400), _plan("flux", 400)]).items():
        (live / name).write_text(text)
    out_file = tmp_path / "comment.md"
    code, out, err = groundctl(monkeypatch, capsys, "ci", "comment", "dev", "--plan-dir", str(tmp_path / "plans" / "dev"),
                               "--artifact-name", "groundctl-plan-dev", "--out", str(out_file), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["cut"] is True and doc["characters"] == len(doc["body"]) <= doc["limit"] == GITHUB_COMMENT_LIMIT
    assert out_file.read_text() == doc["body"] and "did not run" in doc["body"]  # no offline plan in the folder
    (live / "plan-dev-live.json").write_text("{not json")
    assert_refused(groundctl(monkeypatch, capsys, "ci", "comment", "dev", "--plan-dir", str(tmp_path / "plans" / "dev")),
                   2, "plan-dev-live.json is not JSON")
    assert_refused(groundctl(monkeypatch, capsys, "ci", "comment", "Dev;rm", "--plan-dir", str(tmp_path)), 2,
                   "is not an environment name")


def test_the_drift_issue_command_checks_the_report_it_is_given(tmp_path, monkeypatch, capsys):
    report = tmp_path / "drift.json"
    report.write_text(json.dumps({"environment": "prod", "drift": True, "layers": []}))
    assert_refused(groundctl(monkeypatch, capsys, "ci", "drift-issue", "dev", "--report", str(report)), 2,
                   "drift report of 'prod', not 'dev'")
    assert_refused(groundctl(monkeypatch, capsys, "ci", "drift-issue", "dev", "--report", str(tmp_path / "none.json")),
                   2, "missing or empty")
    code, out, _ = groundctl(monkeypatch, capsys, "ci", "drift-issue", "prod", "--report", str(report), "--json")
    assert code == 0 and json.loads(out)["title"] == "groundctl: drift in prod"
