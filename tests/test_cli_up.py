"""The commands through the real front door (`groundctl.main`): exit codes, --json, no secret leaks.

In-process runs swap only the engine (the in-memory one) and point the spec at the test emulator;
the subprocess runs use nothing but the product, as an operator would.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid

import boto3
import pytest
import yaml

from bootstrap.engine.pending import RESOLVE_RUNBOOK
from bootstrap.kit.errors import EngineError
from bootstrap.aws.objectstore import ObjectStore
from tests.conftest import REPO
from tests.fakes.engine import FakeResource, InMemoryEngine, declare_standard
from tests.fakes.k8s import FakeKubeApi, flux_up, kustomization, serve_http


@pytest.fixture
def cli(tmp_path, aws, emulator_endpoint, monkeypatch, capsys):
    """Run `groundctl ARGS` in-process against the test emulator with an in-memory engine."""
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["backend"]["bucket"] = f"gl-{uuid.uuid4().hex[:16]}"
    spec_path = tmp_path / "local.yaml"
    spec_path.write_text(yaml.safe_dump(spec))
    engine = InMemoryEngine("local", store=ObjectStore(aws.client("s3"), spec["backend"]["bucket"]))
    declare_standard(engine)
    monkeypatch.setattr("bootstrap.target.pulumi_engine", lambda ctx: engine)
    monkeypatch.setattr("bootstrap.target.require_pulumi", lambda: None)
    monkeypatch.delenv("GROUNDCTL_ENDPOINT_URL", raising=False)

    def invoke(*args: str) -> tuple[int, str, str]:
        from groundctl import main

        argv = [a.replace("SPEC", str(spec_path)) for a in args] + ["--endpoint-url", emulator_endpoint]
        monkeypatch.setattr(sys, "argv", ["groundctl", *argv])
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    invoke.engine = engine
    invoke.store = ObjectStore(aws.client("s3"), spec["backend"]["bucket"])
    return invoke


def test_up_yes_then_status_and_drift(cli):
    code, out, err = cli("up", "SPEC", "--yes", "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["outcome"] == "succeeded" and record["stopped_at"] is None
    assert "flux skipped: the target is the AWS emulator" in record["message"]

    code, out, _ = cli("status", "SPEC", "--json")
    assert code == 0
    status = json.loads(out)
    rows = {r["layer"]: r for r in status["layers"]}
    # The backend's first up adopts the bootstrap's bucket and key (serial 1, import), then applies (2).
    assert [rows[n]["serial"] for n in ("backend", "network", "cluster")] == [2, 1, 1]
    assert rows["flux"]["operation"] is None and rows["network"]["operation"] == "up"
    assert rows["network"]["resources"] == 4 and len(rows["network"]["lineage"]) == 36
    assert status["lock"]["held"] is False

    code, out, _ = cli("drift", "SPEC", "--json")
    assert code == 0 and json.loads(out)["drift"] is False
    cli.engine.state["network"][0].inputs["name"] = "changed-by-hand"
    code, out, _ = cli("drift", "SPEC", "--json")
    report = json.loads(out)
    assert code == 1 and report["drift"] is True
    assert {r["layer"]: r["state"] for r in report["layers"]} == {
        "backend": "clean", "network": "drift", "cluster": "clean", "flux": "skipped"}


def test_destroy_flags_and_exit_codes(cli):
    assert cli("up", "SPEC", "--yes")[0] == 0
    code, _, err = cli("destroy", "SPEC", "--layers", "backend", "--yes")
    assert code == 3 and "--include-backend" in err
    code, out, _ = cli("destroy", "SPEC", "--yes", "--json")
    assert code == 0 and [(lay["layer"], lay["achieved"]) for lay in json.loads(out)["layers"]] == [
        ("flux", "skipped"), ("cluster", "destroyed"), ("network", "destroyed")]
    code, out, _ = cli("status", "SPEC", "--json")
    rows = {r["layer"]: r for r in json.loads(out)["layers"]}
    assert rows["network"]["operation"] == "destroy" and rows["network"]["serial"] == 2
    assert rows["backend"]["operation"] == "up"


def test_a_layer_with_pending_operations_is_refused_by_every_command_and_nothing_changes(cli, tmp_path):
    """Issue 27 §2 through the front door (the engine is the in-memory one, which keeps the product's rule:
    the real CLI and a real kill are in tests/test_engine_tier_pending.py)."""
    assert cli("up", "SPEC", "--yes")[0] == 0
    key = ".pulumi/stacks/network/local.json"
    cli.engine.pending["network"] = [{"type": "creating", "resource": {
        "urn": "urn:pulumi:local::network::aws:ec2/eip:Eip::nat-0", "type": "aws:ec2/eip:Eip"}}]
    cli.engine._write_checkpoint("network")  # what a killed update leaves in the bucket
    cli.engine.desired["network"].append(FakeResource("aws:ec2/eip:Eip", "nat-0"))
    before = cli.store.get(key).body
    calls = len(cli.engine.calls)

    code, out, err = cli("up", "SPEC", "--yes", "--json")
    text = " ".join(err.split())
    assert code == 3 and "Layer 'network' of environment 'local' was not updated" in text, err
    assert "creating aws:ec2/eip:Eip 'nat-0'" in text and "`groundctl recover local network`" in text
    record = json.loads(out)
    assert record["outcome"] == "refused" and record["stopped_at"] == "pending"
    assert [(lay["layer"], lay["achieved"]) for lay in record["layers"]][:2] == [
        ("backend", "not-reached"), ("network", "refused")]
    for command in (("plan", "SPEC", "--out", str(tmp_path / "plans")), ("drift", "SPEC"),
                    ("destroy", "SPEC", "--layers", "network", "--yes")):
        code, _, err = cli(*command)
        assert code == 3 and "creating aws:ec2/eip:Eip 'nat-0'" in " ".join(err.split()), (command, err)
    assert [op for op in cli.engine.calls[calls:] if op[0] in ("preview", "up", "destroy")] == []
    assert cli.store.get(key).body == before and len(cli.engine.state["network"]) == 3  # the destroy did nothing

    cli.engine.pending["network"] = []  # as `groundctl recover` leaves it
    cli.engine._write_checkpoint("network")
    code, out, err = cli("up", "SPEC", "--yes", "--json")
    assert code == 0, err
    assert [r.name for r in cli.engine.state["network"]].count("nat-0") == 1


def test_pending_operations_in_any_layer_refuse_the_whole_run_before_the_first_layer_changes(cli):
    """Layer 2 of 3 (network) holds a pending create and layer 3 (cluster) a pending delete, while layer 1
    (backend) has a change to apply: the run is refused whole, naming both layers' operations and what resolves
    each, and layer 1's state gets no new version."""
    assert cli("up", "SPEC", "--yes")[0] == 0
    engine = cli.engine
    engine.pending["network"] = [{"type": "creating", "resource": {
        "urn": "urn:pulumi:local::network::aws:ec2/eip:Eip::nat-0", "type": "aws:ec2/eip:Eip"}}]
    engine.pending["cluster"] = [{"type": "deleting", "resource": {
        "urn": "urn:pulumi:local::cluster::aws:iam/role:Role::node-role", "type": "aws:iam/role:Role"}}]
    for layer in ("network", "cluster"):
        engine._write_checkpoint(layer)  # what a killed update leaves in the bucket
    engine.desired["backend"][1].inputs["name"] = "renamed"
    key = ".pulumi/stacks/backend/local.json"
    s3, bucket = cli.store.client, cli.store.bucket
    versions = [v["VersionId"] for v in s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])]
    calls = len(engine.calls)

    code, out, err = cli("up", "SPEC", "--yes", "--json")
    text = " ".join(err.split())
    assert code == 3, err
    assert "Environment 'local' was not updated" in text and "'network', 'cluster'" in text
    assert "layer 'network': creating aws:ec2/eip:Eip 'nat-0'; layer 'cluster': deleting aws:iam/role:Role " \
           "'node-role'" in text
    assert "the 1 that is not a create (in cluster)" in text and RESOLVE_RUNBOOK in text
    assert text.index(RESOLVE_RUNBOOK) < text.index("`groundctl recover local network`")
    assert "`groundctl recover local cluster`" not in text and "nothing was changed" in text
    record = json.loads(out)
    assert record["outcome"] == "refused" and record["stopped_at"] == "pending", record
    assert [(lay["layer"], lay["achieved"]) for lay in record["layers"]] == [
        ("backend", "not-reached"), ("network", "refused"), ("cluster", "refused"), ("flux", "not-reached")]
    assert [op for op in engine.calls[calls:] if op[0] in ("preview", "up", "destroy")] == []
    assert [v["VersionId"] for v in s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])] \
        == versions


def test_pending_operations_a_state_gains_after_the_preflight_are_refused_at_that_layer(cli):
    """The run reads each state once, under the lock; a state written after that (a by-hand `pulumi up`, which
    groundctl's lock does not keep out, killed meanwhile) is still refused before its layer's preview."""
    assert cli("up", "SPEC", "--yes")[0] == 0
    engine = cli.engine
    pending = [{"type": "creating", "resource": {"urn": "urn:pulumi:local::network::aws:ec2/eip:Eip::nat-0",
                                                 "type": "aws:ec2/eip:Eip"}}]
    engine.on_call = lambda op, layer: engine.pending.update(network=pending) if (op, layer) == (
        "preview", "backend") else None
    code, out, err = cli("up", "SPEC", "--yes", "--json")
    record = json.loads(out)
    assert code == 3 and "Layer 'network' of environment 'local' was not previewed" in " ".join(err.split()), err
    assert record["stopped_at"] == "network/preview" and [
        (lay["layer"], lay["achieved"]) for lay in record["layers"]][:2] == [("backend", "unchanged"),
                                                                          ("network", "refused")]


def test_destroy_and_drift_need_the_plugin_version_the_state_records_and_up_does_not(cli, tmp_path):
    """Issue 27 §3 through the front door: a check over the states existed but no run handed it the states
    (41c825a). The network layer's state in the bucket binds its provider to aws v7.40.0, which is not installed,
    while the installed SDK's version is: destroy and drift (which run the state's provider) stop in the engine
    phase, exit 4, naming that version and why, before anything is refreshed or destroyed; up (the program's
    providers) goes on. The engine is the in-memory one, given the shipped programs' folder and a PULUMI_HOME."""
    from types import SimpleNamespace

    from bootstrap.engine.plugins import layer_plugins
    from bootstrap.layers import STACKS_DIR
    from tests.test_preflight import install

    assert cli("up", "SPEC", "--yes")[0] == 0
    key = ".pulumi/stacks/network/local.json"
    doc = json.loads(cli.store.get(key).body)
    doc["checkpoint"]["latest"]["resources"].insert(0, {
        "urn": "urn:pulumi:local::network::pulumi:providers:aws::default_7_40_0", "type": "pulumi:providers:aws",
        "custom": True, "id": "0b9c4a9e", "inputs": {"version": "7.40.0"}})
    cli.store.put(key, json.dumps(doc).encode())
    home = tmp_path / "pulumi-home"
    program = layer_plugins(STACKS_DIR, "network", str(STACKS_DIR.parent))
    assert program and all(p.version != "7.40.0" for p in program)
    for plugin in program:
        install(home, plugin.name, plugin.version)
    cli.engine.stacks_dir = STACKS_DIR
    cli.engine.settings = SimpleNamespace(env={"PULUMI_HOME": str(home), "PATH": str(tmp_path / "no-plugins"),
                                               "PULUMI_PYTHON_CMD": sys.executable,
                                               "PYTHONPATH": str(STACKS_DIR.parent)})
    calls = len(cli.engine.calls)
    for command in (("destroy", "SPEC", "--layers", "network", "--yes", "--json"),
                    ("drift", "SPEC", "--layers", "network", "--json")):
        code, out, err = cli(*command)
        said = " ".join(err.split())
        assert code == 4, (command, err)
        assert "the aws resource plugin v7.40.0 (the state of the network layer records it for its provider: " \
               "refresh and destroy run that version" in said, said
        assert "`groundctl pins update --plugin aws@7.40.0` in the repository" in said
        assert [f"v{p.version}" in said for p in program] == [False] * len(program)  # installed: not named
    assert [c for c in cli.engine.calls[calls:] if c[0] in ("preview", "refresh", "destroy", "up")] == []
    assert cli.store.get(key) is not None and len(cli.engine.state["network"]) == 3  # nothing destroyed

    code, out, err = cli("up", "SPEC", "--layers", "network", "--yes", "--json")
    assert code == 0 and json.loads(out)["outcome"] == "succeeded", err
    install(home, "aws", "7.40.0")  # the version the state records: drift runs
    code, out, err = cli("drift", "SPEC", "--layers", "network", "--json")
    assert code == 0 and json.loads(out)["drift"] is False, err


def test_destroy_production_needs_its_flag(monkeypatch, capsys):
    from groundctl import main

    monkeypatch.setattr(sys, "argv", ["groundctl", "destroy", "prod", "--yes"])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 3 and "--i-mean-production" in capsys.readouterr().err


def test_bad_input_exit_2(cli):
    code, _, err = cli("up", "SPEC", "--layers", "nope", "--yes")
    assert code == 2 and "'nope' is not a layer" in err


def test_canary_secrets_never_leave(cli, monkeypatch, tmp_path, aws):
    from bootstrap.apply.preview import plan_live

    passphrase, deploy_key, kube = "CANARY-pass-51f0e2", "CANARY-deploy-key-9a7c33", "CANARY-kubeconfig-77aa01"
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", passphrase)
    monkeypatch.setenv("GROUNDCTL_FLUX_DEPLOY_KEY", deploy_key)
    declare_standard(cli.engine, kubeconfig=f"token: {kube}")
    cli.engine.set_config("flux", "deployKey", deploy_key, secret=True)
    # An engine error that quotes every secret it knows (as a careless CLI message might).
    cli.engine.fail[("preview", "network")] = EngineError(f"boom {passphrase} {deploy_key}")
    outputs = [cli("up", "SPEC", "--yes")]
    assert outputs[0][0] == 4 and "boom [secret]" in outputs[0][1]  # masked where the engine error is raised
    code, out, err = cli("up", "SPEC", "--yes", "--json")  # backend is unchanged, network now runs
    outputs.append((code, out, err))
    assert code == 0
    monkeypatch.setattr("bootstrap.target.ENDPOINT_ENV", "GROUNDCTL_TEST_UNUSED")
    code = plan_live(str(tmp_path / "local.yaml"), out_dir=tmp_path / "plans", json_out=True,
                     endpoint_url=cli.store.client.meta.endpoint_url, layers=None)
    assert code == 0
    texts = [o + e for _, o, e in outputs]
    texts += [p.read_text() for p in (tmp_path / "plans").iterdir()]
    for v in [v for v in cli.store.versions(".groundctl/") if not v.delete_marker]:
        body = cli.store.get(v.key, v.version_id).body
        texts.append((gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body).decode())  # the ledger's index
    assert len(texts) > 10 and any("boom [redacted]" in t or "boom [secret]" in t for t in texts)
    for text in texts:
        for canary in (passphrase, deploy_key, kube):
            assert canary not in text


def _kubeconfig(server: str, token: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                       "clusters": [{"name": "c", "cluster": {"server": server}}],
                       "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                       "users": [{"name": "u", "user": {"token": token}}]})


def test_up_waits_for_flux_through_the_clusters_api_and_fails_with_fluxs_reason(cli, monkeypatch):
    """The product's own client, from the cluster layer's kubeconfig, over a socket: Ready → exit 0; a root
    Kustomization Flux will not retry (suspended) → exit 4 at once, with the reason; the token never shown."""
    token = "CANARY-kube-token-5e0d41"
    api = FakeKubeApi().set_flux(**flux_up())
    monkeypatch.setattr("bootstrap.target.Target.emulated", property(lambda self: False))  # a real cluster
    with serve_http(api, token) as url:
        declare_standard(cli.engine, cluster_endpoint=url, kubeconfig=_kubeconfig(url, token))
        code, out, err = cli("up", "SPEC", "--yes", "--json")
        assert code == 0, err
        flux = next(lay for lay in json.loads(out)["layers"] if lay["layer"] == "flux")
        assert flux["achieved"] == "applied" and flux["phases"][-1]["name"] == "flux-ready"
        assert "Ready at main@sha1:abc123" in flux["phases"][-1]["detail"]

        api.items = [kustomization("flux-system", suspend=True)]
        code, out2, err2 = cli("up", "SPEC", "--yes", "--layers", "flux")
        assert code == 4, err2
        assert "Flux cannot come up in 'local' without a change (Suspended): the root Kustomization " \
               "flux-system/flux-system is suspended" in " ".join(err2.split())
        assert "Traceback" not in err2 and len(api.polls) == 2
    for text in (out, err, out2, err2):
        assert token not in text


def test_up_local_without_pulumi_cli_stops_before_writing_anything(tmp_path, aws, emulator_endpoint):
    """No CLI on PATH: the engine check comes before the state bucket, the KMS key and the lock."""
    path = os.path.dirname(sys.executable)
    if shutil.which("pulumi", path=path):
        pytest.skip(f"a pulumi binary sits beside the interpreter in {path}")
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["backend"]["bucket"] = bucket = f"gl-{uuid.uuid4().hex[:16]}"
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(spec))
    env = {**{k: v for k, v in os.environ.items() if k != "GROUNDCTL_ENDPOINT_URL"}, "PATH": path,
           "PULUMI_CONFIG_PASSPHRASE": "p"}
    proc = subprocess.run([sys.executable, "-m", "groundctl", "up", str(tmp_path / "local.yaml"), "--yes", "--json",
                           "--endpoint-url", emulator_endpoint],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert proc.returncode == 4, proc.stderr
    record = json.loads(proc.stdout)
    assert record["stopped_at"] == "engine" and record["outcome"] == "failed"
    assert [(p["name"], p["outcome"]) for p in record["phases"]] == [("account", "ok"), ("engine", "failed")]
    assert "Pulumi CLI is not installed" in proc.stderr and "Traceback" not in proc.stderr
    assert all(lay["achieved"] == "not-reached" for lay in record["layers"])
    assert bucket not in [b["Name"] for b in aws.client("s3").list_buckets()["Buckets"]]


def test_up_without_a_terminal_is_refused_with_the_flag_to_pass(cli):
    """`up` with no terminal and no --yes (a pipe, CI): exit 3 before the backend's stack, config or import:
    its adoption is approved like a plan, before it is done."""
    code, out, err = cli("up", "SPEC", "--json")
    assert code == 3, err
    record = json.loads(out)
    assert record["stopped_at"] == "backend/setup-gate" and record["outcome"] == "refused"
    assert "--yes" in err and "did not approve" in err and "Nothing in backend was changed" in err
    assert not {op for op, _ in cli.engine.calls} & {"create_stack", "import", "up"} and not cli.engine.stacks
    assert not list(cli.store.versions(".pulumi/")) and not list(cli.store.versions(".groundctl/ledger/"))


def test_emulator_start_serves_until_interrupted():
    proc = subprocess.Popen([sys.executable, "-m", "groundctl", "emulator", "start", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    try:
        text = ""
        while True:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            text += line
            if line.startswith("}"):
                break
        info = json.loads(text)
        url = info["endpoint_url"]
        assert info["env"] == {"GROUNDCTL_ENDPOINT_URL": url} and url.startswith("http://127.0.0.1:")
        s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
        s3.create_bucket(Bucket="emulator-start-check")
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["emulator-start-check"]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    err = proc.stderr.read()
    assert "AWS emulator stopped" in err and "Interrupted;" in err and "Traceback" not in err


def test_plan_and_drift_report_their_phases_and_write_nothing_to_the_bucket(cli, tmp_path):
    """Issue 38 §2: where a plan's or a drift check's time goes, printed and in --json, from a run record kept in
    memory: the plan role may not write to the bucket."""
    assert cli("up", "SPEC", "--yes")[0] == 0

    def objects() -> set:
        return {(v.key, v.version_id) for v in cli.store.versions("")}

    before = objects()
    code, out, err = cli("plan", "SPEC", "--json", "--out", str(tmp_path / "plans"))
    assert code == 0, err
    phases = json.loads(out)["phases"]
    assert {"network/preview", "cluster/preview"} <= set(phases) and all(s >= 0 for s in phases.values())
    assert any(not name.count("/") for name in phases), phases  # the preflight's own phases
    code, out, err = cli("drift", "SPEC", "--json")
    assert code == 0, err
    assert "network/refresh-preview" in json.loads(out)["phases"]
    code, out, err = cli("drift", "SPEC")
    assert code == 0 and "Time per phase:" in out + err and "network/refresh-preview" in out + err
    assert objects() == before
