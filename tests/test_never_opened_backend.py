"""Issue 37 §3: `plan` and `drift` on a state bucket no Pulumi command has opened answer "not deployed yet" without
asking the engine. Every Pulumi command writes `.pulumi/meta.yaml` on its first use of a bucket, a write the plan
and record roles may not make; the real CLI's refusal under such a role is the engine tier's
(tests/test_engine_tier_read_only.py)."""

from __future__ import annotations

import json

from bootstrap.apply.layer_stack import pulumi_never_ran
from tests.test_cli_up import cli  # noqa: F401 - the fixture


def test_a_bucket_with_neither_pulumis_metadata_nor_a_stack_was_never_opened_by_pulumi(cli):  # noqa: F811
    store = cli.store
    store.client.create_bucket(Bucket=store.bucket)
    assert pulumi_never_ran(store)
    store.put(".groundctl/runs/x.json", b"{}")  # groundctl's own records are not Pulumi's
    assert pulumi_never_ran(store)
    store.put(".pulumi/stacks/network/local.json", b"{}")  # metadata deleted by hand: Pulumi is asked, as before
    assert not pulumi_never_ran(store)
    store.delete(".pulumi/stacks/network/local.json")
    store.put(".pulumi/meta.yaml", b"version: 1\n")
    assert not pulumi_never_ran(store)


def test_plan_and_drift_answer_not_deployed_yet_before_asking_the_engine(cli, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.chdir(tmp_path)
    cli.store.client.create_bucket(Bucket=cli.store.bucket)  # a first `up` made it, then stopped
    asked: list = []
    for call in ("stack_exists", "preview", "outputs"):
        monkeypatch.setattr(cli.engine, call, lambda layer, *a, _call=call, **k: asked.append((_call, layer)))
    code, out, err = cli("plan", "SPEC", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["not_deployed"] is True and asked == []
    assert all("no Pulumi command has run on it" in " ".join(lay["skipped_reason"].split())
               for lay in doc["layers"] if lay["not_deployed"])
    code, out, err = cli("drift", "SPEC", "--json")
    assert code == 1, err
    assert {r["state"] for r in json.loads(out)["layers"] if r["layer"] != "flux"} == {"not deployed"}
    assert asked == []

    cli.store.put(".pulumi/meta.yaml", b"version: 1\n")  # opened by Pulumi since: it is asked again
    cli("plan", "SPEC", "--json")
    assert asked and asked[0][0] == "stack_exists"
