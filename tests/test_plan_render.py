"""Plan rendering: pull-request Markdown and JSON, per layer and combined."""

from __future__ import annotations

import json

from pulumi.automation import events as ev

from bootstrap.engine.events import plan_from_events
from bootstrap.planning.plan import Plan, ResourceChange
from bootstrap.planning.render import (
    MAX_DETAIL_ROWS, combined_json, plan_files, plan_json, render_markdown, render_markdown_combined,
    summary_line,
)

CANARY = "canary-Zq8v1T0pS3cr3t"


def rc(name, op, rtype="aws:ec2/subnet:Subnet", keys=(), protected=False, layer="network"):
    return ResourceChange(f"urn:pulumi:dev::{layer}::{rtype}::{name}", rtype, op, tuple(keys), protected)


NETWORK = Plan("network", "dev", (
    rc("subnet-a", "create"), rc("nat", "update", keys=("tags",)), rc("main", "replace", "aws:ec2/vpc:Vpc",
                                                                       keys=("cidrBlock",)),
    rc("old", "delete"), rc("keep", "same"), rc("guarded", "delete", protected=True)))
BACKEND = Plan("backend", "dev", (rc("state", "update", "aws:s3/bucketV2:BucketV2", ("tags",), layer="backend"),))
FLUX = Plan("flux", "dev", (), "no Kubernetes API is reachable from the emulator")


def test_a_never_deployed_environment_says_why_once_above_its_layers():
    why = "not deployed yet: the state bucket b does not exist. Next: create dev once, by hand: `groundctl up dev`"
    layers = [Plan(layer, "dev", (), why, not_deployed=True) for layer in ("backend", "network", "cluster")]
    md = render_markdown_combined([*layers, FLUX])
    assert md.count("the state bucket b does not exist") == 1 and f"**{why.replace('`', chr(39))}**" in md
    assert "| `network` | skipped: not deployed yet (above) |" in md
    assert "| `flux` | skipped: no Kubernetes API is reachable from the emulator |" in md  # a reason of its own


def test_summary_line_lists_changes_then_unchanged_then_risk():
    assert summary_line({"create": 2, "same": 3, "delete": 1}, 1) == \
        "1 to delete, 2 to create (3 unchanged) · **1 risky change**"
    assert summary_line({"same": 4}, 0) == "No changes (4 unchanged)"


def test_layer_markdown_puts_risky_changes_first_and_details_collapsed():
    md = render_markdown(NETWORK)
    assert md.startswith("### groundctl plan: `network` in `dev`")
    risky_at, details_at = md.index("**Risky changes (3)**"), md.index("<details>")
    assert risky_at < details_at and md.rstrip().endswith("</details>")
    assert "<summary>All 6 resources</summary>" in md
    risky_block = md[risky_at:details_at]
    # Deletions come before replacements, updates last.
    assert risky_block.index("`old`") < risky_block.index("`main`")
    assert "never applied while protected" in risky_block and "needs `--allow-destroy`" in risky_block
    assert "| replace | 1 |" in md and "fingerprint `" + NETWORK.fingerprint[:12] + "`" in md
    assert "`subnet-a`" not in risky_block  # a plain create is not risky


def test_combined_markdown_has_a_row_per_layer_and_every_risky_change():
    md = render_markdown_combined([BACKEND, NETWORK, FLUX])
    assert md.startswith("### groundctl plan: `dev` (3 layers)")
    assert "| `backend` | 0 | 1 | 0 | 0 | 0 | 1 |" in md
    assert "| `flux` | skipped: no Kubernetes API is reachable from the emulator |" in md
    assert "**Risky changes (4)**" in md and "| backend | `state` |" in md
    assert md.count("<details>") == 2 and md.count("</details>") == 2  # the skipped layer has none
    assert md.index("Risky changes") < md.index("<details>")


def test_a_skipped_or_empty_plan_renders_plainly():
    assert "Skipped: no Kubernetes API" in render_markdown(FLUX)
    assert "No changes" in render_markdown(Plan("network", "dev", (rc("x", "same"),)))
    assert "No layers were planned" in render_markdown_combined([])


def test_table_breaking_characters_are_escaped():
    plan = Plan("network", "dev", (rc("we|rd`name", "delete"),))
    md = render_markdown(plan)
    assert "we\\|rd'name" in md and "we|rd`name" not in md


def test_huge_plans_are_cut_short_in_markdown_but_complete_in_json():
    plan = Plan("network", "dev", tuple(rc(f"s{i:04d}", "create") for i in range(MAX_DETAIL_ROWS + 25)))
    md = render_markdown(plan)
    assert "… 25 more, see the JSON plan" in md and len(md) < 65536
    assert len(plan_json(plan)["changes"]) == MAX_DETAIL_ROWS + 25


def test_json_reads_back_as_the_same_plan():
    data = json.loads(plan_files([BACKEND, NETWORK])["plan-dev-network.json"])
    assert Plan.from_dict(data) == NETWORK and data["fingerprint"] == NETWORK.fingerprint
    assert "**" not in data["summary"]
    combined = combined_json([BACKEND, NETWORK, FLUX])
    assert combined["risky_count"] == 4 and combined["has_changes"] is True
    assert combined["counts"]["update"] == 2 and [p["layer"] for p in combined["layers"]] == ["backend", "network", "flux"]


def test_plan_files_names():
    # Per environment, like the offline plan-<env>.*: several environments share one plan directory.
    assert sorted(plan_files([BACKEND, FLUX])) == ["plan-dev-backend.json", "plan-dev-backend.md", "plan-dev-flux.json",
                                                    "plan-dev-flux.md", "plan-dev-live.json", "plan-dev-live.md"]


def test_no_secret_from_the_engine_reaches_any_rendered_file():
    md = ev.StepEventMetadata(
        op=ev.OpType.UPDATE, urn="urn:pulumi:dev::flux::kubernetes:core/v1:Secret::deploy-key",
        type="kubernetes:core/v1:Secret", provider="", diffs=["stringData"],
        old=ev.StepEventStateMetadata("kubernetes:core/v1:Secret", "", "id", "", "", inputs={"stringData": "old"}),
        new=ev.StepEventStateMetadata("kubernetes:core/v1:Secret", "", "id", "", "",
                                      inputs={"stringData": {"identity": CANARY}}, outputs={"data": CANARY}))
    plan = plan_from_events("flux", "dev", [ev.EngineEvent(1, 0, resource_pre_event=ev.ResourcePreEvent(md))])
    files = plan_files([plan])
    assert "stringData" in files["plan-dev-flux.md"]
    assert all(CANARY not in text for text in files.values())
