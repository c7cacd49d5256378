"""Orchestration with the in-memory engine on the emulator: order, gates, stale plans, contracts, destroy.

The backend bootstrap, the lock and the ledger are the real ones, talking to the moto server over
HTTP; only the engine is the in-memory one (writing its checkpoints into the state bucket).
"""

from __future__ import annotations

import json

import pytest

from bootstrap.kit.errors import EngineError, Refused
from bootstrap.layers import LINEAGE_OUTPUT
from bootstrap.records.layout import run_key
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.apply.layer_up import UpOptions
from bootstrap.apply.preview import plan_live
from bootstrap.apply.runner import run
from bootstrap.apply.services import default_services
from bootstrap.apply.steps import EMULATOR_HAS_NO_KUBERNETES, build_destroy, build_up
from tests.fakes.engine import quick_append
from tests.fakes.engine import FakeResource, InMemoryEngine, TickingClock, declare_standard, target_with
from tests.fakes.k8s import CONTROLLERS, FakeKubeApi, deployment, flux_up, kustomization


@pytest.fixture
def world(local_spec, aws):
    """(engine, open) where open() yields a Target on the test emulator with that engine."""
    clock = TickingClock(0.25)
    store = ObjectStore(aws.client("s3"), local_spec.backend.bucket)
    engine = InMemoryEngine("local", store=store, clock=clock)
    declare_standard(engine)

    def open_(spec=local_spec, environ=None):
        return target_with(engine, spec, environ)

    return engine, open_, clock


def services(clock, answers=None, probe=lambda host, port: None, kube=None):
    from bootstrap.records.locks import EnvironmentLock

    asked = []

    def confirm(question):
        asked.append(question)
        return bool(answers.pop(0)) if answers else False

    kube = kube if kube is not None else FakeKubeApi().set_flux(**flux_up())  # Flux comes up at once
    svc = default_services(confirm=confirm, clock=clock, probe=probe, git_commit=lambda: "a" * 40,
                           append_record=quick_append, kube_for=lambda spec, kubeconfig: kube, sleep=clock.sleep,
                           environment_lock=lambda store, env, run_id: EnvironmentLock(store, env, run_id,
                                                                                       settle_seconds=0))
    svc.asked = asked
    return svc


def up(open_, clock, *, layers=None, emulated=None, answers=None, probe=lambda h, p: None, kube=None, **opts):
    svc = services(clock, answers, probe, kube)
    with open_() as target:
        steps = build_up(target.spec, layers, emulated=target.emulated if emulated is None else emulated)
        outcome = run(target, steps, svc, UpOptions(**opts))
        stored = target.store.get(run_key("local", outcome.record.run_id))
    return outcome, json.loads(stored.body) if stored else None, svc


def ops(engine, *kinds):
    return [c for c in engine.calls if c[0] in kinds]


def test_up_runs_layers_in_order_ledgers_each_and_skips_flux_on_the_emulator(world, aws, local_spec):
    from bootstrap.records.lock_status import lock_status
    from bootstrap.records.ledger import read_ledger

    engine, open_, clock = world
    outcome, stored, _ = up(open_, clock, yes=True)
    assert outcome.error is None and outcome.exit_code == 0
    assert ops(engine, "preview", "up") == [("preview", "backend"), ("up", "backend"), ("preview", "network"),
                                           ("up", "network"), ("preview", "cluster"), ("up", "cluster")]
    achieved = {lay["layer"]: lay["achieved"] for lay in stored["layers"]}
    assert achieved == {"backend": "applied", "network": "applied", "cluster": "applied", "flux": "skipped"}
    flux = next(lay for lay in stored["layers"] if lay["layer"] == "flux")
    assert flux["message"] == EMULATOR_HAS_NO_KUBERNETES
    # The engine is checked before the first write (the state bucket), not after it.
    assert [p["name"] for p in stored["phases"]] == ["account", "engine", "backend", "lock", "pending",
                                                        "unlock"]
    assert all(p["outcome"] == "ok" and p["ended_at"] for p in stored["phases"])
    net = next(lay for lay in stored["layers"] if lay["layer"] == "network")
    # Creating the stack is approved (here by --yes) before it is done, like the plan.
    assert [p["name"] for p in net["phases"]] == ["stack", "setup-gate", "create", "preview", "gate", "up", "ledger",
                                                  "contract"]
    store = ObjectStore(aws.client("s3"), local_spec.backend.bucket)
    for layer in ("backend", "network", "cluster"):
        records = read_ledger(store, layer, "local").records
        # The backend first adopts what the bootstrap made (import), then applies.
        want = ["import", "up"] if layer == "backend" else ["up"]
        assert [r.operation for r in records] == want and [r.serial for r in records] == list(range(1, len(want) + 1))
        assert len({r.lineage for r in records}) == 1
        # The lineage minted for the first record is what the program was told to export.
        assert engine.config[layer]["groundctl:lineage"][0] == records[0].lineage
        assert engine.outputs(layer).values[LINEAGE_OUTPUT] == records[0].lineage
    assert lock_status(store, "local").holder is None  # released


def test_flux_probe_decides_on_a_real_cluster_endpoint(world):
    engine, open_, clock = world
    probed = []
    outcome, stored, _ = up(open_, clock, yes=True, emulated=False,
                            probe=lambda host, port: probed.append((host, port)) or "TimeoutError: timed out")
    assert probed == [("k8s.example.invalid", 443)]
    flux = next(lay for lay in stored["layers"] if lay["layer"] == "flux")
    assert flux["achieved"] == "skipped" and "k8s.example.invalid:443 is not reachable" in flux["message"]
    assert ("preview", "flux") not in engine.calls
    outcome, stored, _ = up(open_, clock, yes=True, emulated=False)
    assert {lay["layer"]: lay["achieved"] for lay in stored["layers"]}["flux"] == "applied"


def _flux(stored: dict) -> dict:
    return next(lay for lay in stored["layers"] if lay["layer"] == "flux")


def test_up_ends_with_flux_ready_even_when_the_flux_layer_is_unchanged(world):
    engine, open_, clock = world
    kube = FakeKubeApi().set_flux(**flux_up())
    outcome, stored, _ = up(open_, clock, yes=True, emulated=False, kube=kube)
    assert outcome.error is None and stored["outcome"] == "succeeded"
    flux = _flux(stored)
    assert flux["achieved"] == "applied" and [p["name"] for p in flux["phases"]][-2:] == ["contract", "flux-ready"]
    ready = flux["phases"][-1]
    assert ready["outcome"] == "ok" and ready["detail"].startswith(
        "4 controller(s) available; the root Kustomization flux-system/flux-system Ready at main@sha1:abc123")
    polls = len(kube.polls)
    outcome, stored, _ = up(open_, clock, yes=True, emulated=False, kube=kube, layers=["flux"])
    assert outcome.error is None and _flux(stored)["achieved"] == "unchanged"
    assert _flux(stored)["phases"][-1]["name"] == "flux-ready" and len(kube.polls) == polls + 1


def test_up_fails_with_fluxs_reason_when_the_root_kustomization_never_gets_ready(world):
    from bootstrap.flux.check import FluxNotReady

    engine, open_, clock = world
    kube = FakeKubeApi().set_flux(**flux_up())
    kube.items = [kustomization("flux-system", ready="False", reason="BuildFailed", revision=None,
                                message="kustomize build failed: accumulating resources: './clusters/local' not found")]
    outcome, stored, _ = up(open_, clock, yes=True, emulated=False, kube=kube)
    assert isinstance(outcome.error, FluxNotReady) and outcome.exit_code == 4 and outcome.error.reason == "BuildFailed"
    message = outcome.error.message
    assert message.startswith("Flux did not become ready in 'local' within flux.ready_timeout_minutes (10 min; "
                              "reason BuildFailed): not Ready after 600 s: the root Kustomization flux-system/"
                              "flux-system is Ready=False (BuildFailed: kustomize build failed")
    assert "`groundctl up local --layers flux`" in message
    assert stored["outcome"] == "failed" and stored["stopped_at"] == "flux/flux-ready"
    flux = _flux(stored)
    # The layer was applied (its ledger record says so); Flux is what did not come up.
    assert flux["achieved"] == "applied" and flux["serial"] == 1 and "Flux not ready (BuildFailed)" in flux["message"]
    phase = flux["phases"][-1]
    assert (phase["name"], phase["outcome"]) == ("flux-ready", "failed") and "BuildFailed" in phase["detail"]
    # Bounded by the spec's deadline (10 minutes by default), polled with backoff, the last sleep cut short.
    assert 600 <= phase["seconds"] <= 630 and sum(clock.sleeps) <= 600 and 5 <= len(kube.polls) <= 40


def test_a_placeholder_flux_digest_is_refused_before_the_first_layer_not_at_the_flux_layer(world, local_spec):
    """environments/prod.yaml's all-zeros flux.manifest_sha256 (issue 27 §4): the engine opened the flux layer,
    and the program found no manifest matching it, only after backend, network and cluster were applied. The
    engine phase refuses it by name (exit 2) before any layer; a run without the flux layer is not held up."""
    from bootstrap.kit.errors import SpecError, StateBucketMissing
    from bootstrap.flux.manifest import PLACEHOLDER_SHA256

    engine, open_, clock = world
    spec = local_spec.model_copy(update={"flux": local_spec.flux.model_copy(
        update={"manifest_sha256": PLACEHOLDER_SHA256})})
    with open_(spec) as target:
        outcome = run(target, build_up(spec, None, emulated=False), services(clock), UpOptions(yes=True))
        with pytest.raises(StateBucketMissing):  # stopped before the backend: nothing written
            target.require_bucket()
    assert isinstance(outcome.error, SpecError) and outcome.exit_code == 2, outcome.error
    said = " ".join(outcome.error.message.split())
    assert "at flux.manifest_sha256: is the example's placeholder" in said, said
    assert "flux_2.4.0_checksums.txt from https://github.com/fluxcd/flux2/releases/download/v2.4.0/" in said
    assert outcome.record.stopped_at == "engine" and ops(engine, "preview", "up") == []
    outcome, stored, _ = up(lambda: open_(spec), clock, yes=True)  # on the emulator: no flux layer to install
    assert outcome.error is None and _flux(stored)["achieved"] == "skipped"


def test_up_fails_naming_the_controllers_that_are_not_available(world, local_spec):
    engine, open_, clock = world
    kube = FakeKubeApi().set_flux(**flux_up())
    kube.deployments = [deployment(name, available=name not in ("kustomize-controller", "source-controller"))
                        for name in CONTROLLERS]
    spec = local_spec.model_copy(update={"flux": local_spec.flux.model_copy(update={"ready_timeout_minutes": 2})})
    outcome, stored, _ = up(lambda: open_(spec), clock, yes=True, emulated=False, kube=kube)
    assert outcome.exit_code == 4 and outcome.error.reason == "ControllersUnavailable"
    assert ("controller(s) not available: kustomize-controller (0 of 1 replica(s) available; "
            "MinimumReplicasUnavailable: Deployment does not have minimum availability.); source-controller (0 of 1")\
        in outcome.error.message
    assert "within flux.ready_timeout_minutes (2 min" in outcome.error.message
    assert "helm-controller" not in outcome.error.message and 120 <= _flux(stored)["phases"][-1]["seconds"] <= 140


def test_interactive_gate_yes_applies_and_no_refuses(world):
    engine, open_, clock = world
    # A new layer's stack is a write before its preview: the operator is asked first, and a no writes nothing.
    outcome, stored, svc = up(open_, clock, layers=["network"], answers=[False])
    assert isinstance(outcome.error, Refused) and outcome.exit_code == 3 and "--yes" in outcome.error.message
    assert svc.asked == [svc.asked[0]] and "create the empty Pulumi stack organization/network/local" in svc.asked[0]
    assert stored["stopped_at"] == "network/setup-gate" and ("create_stack", "network") not in engine.calls
    outcome, stored, svc = up(open_, clock, layers=["network"], answers=[True, False])
    assert isinstance(outcome.error, Refused) and svc.asked[1].startswith("Apply network to local")
    assert ("up", "network") not in engine.calls
    assert stored["outcome"] == "refused" and stored["stopped_at"] == "network/gate"
    outcome, stored, svc = up(open_, clock, layers=["network"], answers=[True])
    assert outcome.error is None and ("up", "network") in engine.calls and len(svc.asked) == 1


def test_unattended_up_without_yes_stops_at_the_gate_before_creating_or_adopting(world, aws, local_spec):
    """No terminal and no --yes: the first up stops (exit 3) before the backend's stack, config or import."""
    from bootstrap.records.ledger import read_ledger

    engine, open_, clock = world
    outcome, stored, svc = up(open_, clock)  # confirm answers no, as console.confirm does without a terminal
    assert isinstance(outcome.error, Refused) and outcome.exit_code == 3
    assert stored["stopped_at"] == "backend/setup-gate" and len(svc.asked) == 1
    assert "adopt" in svc.asked[0] and "by import" in svc.asked[0]
    assert not {op for op, _ in engine.calls} & {"create_stack", "import", "up"} and not engine.stacks
    assert engine.config == {}
    store = ObjectStore(aws.client("s3"), local_spec.backend.bucket)
    assert not read_ledger(store, "backend", "local").records
    assert not [v for v in store.versions(".pulumi/")]  # no stack object was written


def test_destructive_changes_need_allow_destroy_and_protected_never(world):
    engine, open_, clock = world
    assert up(open_, clock, yes=True)[0].error is None
    engine.desired["network"] = [r for r in engine.desired["network"] if r.name != "public-a"]
    outcome, stored, _ = up(open_, clock, yes=True, layers=["network"])
    assert isinstance(outcome.error, Refused) and "--allow-destroy" in outcome.error.message
    assert stored["stopped_at"] == "network/gate" and engine.calls[-1] == ("preview", "network")
    outcome, stored, _ = up(open_, clock, yes=True, allow_destroy=True, layers=["network"])
    assert outcome.error is None and {lay["layer"]: lay["achieved"] for lay in stored["layers"]}["network"] == "applied"
    engine.desired["backend"] = []  # would delete the protected bucket and key
    n_up = len(ops(engine, "up"))
    outcome, _, _ = up(open_, clock, yes=True, allow_destroy=True, layers=["backend"])
    assert isinstance(outcome.error, Refused) and "never deleted" in outcome.error.message
    assert len(ops(engine, "up")) == n_up


def test_stale_plan_is_refused_and_fresh_plan_applies(world, tmp_path, local_spec):
    engine, open_, clock = world
    svc = services(clock)
    target_args = dict(spec=local_spec, environ={}, engine_factory=lambda ctx: engine, engine_check=lambda: None)
    assert up(open_, clock, yes=True)[0].error is None  # a plan previews deployed stacks only
    engine.desired["backend"].append(FakeResource("aws:s3/bucketV2:BucketV2", "logs", {"name": "logs"}))
    code = plan_live("local", out_dir=tmp_path / "plans", json_out=True, endpoint_url=None, layers=None,
                     services=svc, **target_args)
    assert code == 0 and {"plan-local-backend.json", "plan-local-network.json", "plan-local-live.json",
                          "plan-local-live.md"} <= {p.name for p in (tmp_path / "plans").iterdir()}
    # Another environment's files in the same directory are not read for this one (this one is not JSON).
    (tmp_path / "plans" / "plan-dev-network.json").write_text("not a plan")
    engine.desired["network"].append(FakeResource("aws:ec2/subnet:Subnet", "private-b", {"name": "private-b"}))
    outcome, stored, _ = up(open_, clock, yes=True, plan_dir=tmp_path / "plans")
    assert isinstance(outcome.error, Refused) and "stale" in outcome.error.message
    assert {lay["layer"]: lay["achieved"] for lay in stored["layers"]}["backend"] == "applied"
    assert stored["stopped_at"] == "network/gate" and ("up", "network") not in ops(engine, "up")[3:]
    plan_live("local", out_dir=tmp_path / "fresh", json_out=False, endpoint_url=None, layers=None,
              services=svc, **target_args)
    outcome, _, _ = up(open_, clock, yes=True, plan_dir=tmp_path / "fresh")
    assert outcome.error is None and ops(engine, "up")[-1] == ("up", "network")


def test_a_plan_made_before_a_layer_existed_approves_none_of_its_creates(world, tmp_path, local_spec):
    engine, open_, clock = world
    svc = services(clock)
    target_args = dict(spec=local_spec, environ={}, engine_factory=lambda ctx: engine, engine_check=lambda: None)
    plan_live("local", out_dir=tmp_path / "plans", json_out=True, endpoint_url=None, layers=None,
              services=svc, **target_args)
    assert not engine.stacks and ("create_stack", "backend") not in engine.calls  # plan created nothing
    written = json.loads((tmp_path / "plans" / "plan-local-backend.json").read_text())
    assert written["not_deployed"] is True and written["changes"] == []
    outcome, stored, _ = up(open_, clock, yes=True, plan_dir=tmp_path / "plans")
    assert isinstance(outcome.error, Refused) and "without --plan-dir" in outcome.error.message
    assert "no plan in" in outcome.error.message
    # Refused before the stack, its config or the adoption: nothing of the backend layer was written.
    assert stored["stopped_at"] == "backend/setup-gate"
    assert not {op for op, _ in engine.calls} & {"create_stack", "import", "up"} and engine.config == {}


def test_contract_failure_stops_at_that_layer(world, aws, local_spec):
    from bootstrap.records.ledger import read_ledger

    engine, open_, clock = world
    resources, (outputs, secret) = engine.desired["network"], engine.declared_outputs["network"]
    engine.declare("network", resources, {k: v for k, v in outputs.items() if k != "vpc_id"}, secret)
    outcome, stored, _ = up(open_, clock, yes=True)
    assert isinstance(outcome.error, EngineError) and outcome.exit_code == 4
    assert "does not export vpc_id" in outcome.error.message
    layers = {lay["layer"]: lay for lay in stored["layers"]}
    assert layers["network"]["achieved"] == "failed" and "vpc_id" in layers["network"]["message"]
    assert layers["cluster"]["achieved"] == "not-reached" and stored["stopped_at"] == "network/contract"
    assert ("preview", "cluster") not in engine.calls
    # The up did change the state, so it is in the ledger even though the contract failed.
    store = ObjectStore(aws.client("s3"), local_spec.backend.bucket)
    assert [r.serial for r in read_ledger(store, "network", "local").records] == [1]


def test_destroy_reverse_order_backend_excluded_and_ledgered(world, aws, local_spec):
    from bootstrap.records.ledger import read_ledger

    engine, open_, clock = world
    assert up(open_, clock, yes=True, emulated=False)[0].error is None
    svc = services(clock)
    with open_() as target:
        steps = build_destroy(target.spec, None, emulated=False, include_backend=False, i_mean_production=False)
        outcome = run(target, steps, svc, UpOptions(yes=True))
    assert outcome.error is None
    assert ops(engine, "destroy") == [("destroy", "flux"), ("destroy", "cluster"), ("destroy", "network")]
    store = ObjectStore(aws.client("s3"), local_spec.backend.bucket)
    network = read_ledger(store, "network", "local").records
    assert [(r.serial, r.operation) for r in network] == [(1, "up"), (2, "destroy")]
    assert [r.operation for r in read_ledger(store, "backend", "local").records] == ["import", "up"]
    with open_() as target:  # the protected backend is never deleted, even when included
        steps = build_destroy(target.spec, ["backend"], emulated=True, include_backend=True, i_mean_production=False)
        outcome = run(target, steps, services(clock), UpOptions(yes=True))
    assert isinstance(outcome.error, EngineError) and engine.state["backend"]


def test_destroy_refusals(local_spec):
    prod = local_spec.model_copy(update={"production": True})
    with pytest.raises(Refused, match="--i-mean-production"):
        build_destroy(prod, None, emulated=True, include_backend=False, i_mean_production=False)
    assert build_destroy(prod, None, emulated=True, include_backend=False, i_mean_production=True).layer_names == [
        "flux", "cluster", "network"]
    with pytest.raises(Refused, match="--include-backend"):
        build_destroy(local_spec, ["backend", "network"], emulated=True, include_backend=False, i_mean_production=False)


def test_interactive_destroy_without_answer_destroys_nothing(world):
    engine, open_, clock = world
    assert up(open_, clock, yes=True)[0].error is None
    with open_() as target:
        steps = build_destroy(target.spec, None, emulated=True, include_backend=False, i_mean_production=False)
        outcome = run(target, steps, services(clock, answers=[False]), UpOptions())
    assert isinstance(outcome.error, Refused) and not ops(engine, "destroy")


def test_endpoint_resolution_rules():
    from bootstrap.kit.errors import BadInput
    from bootstrap.spec import load_spec
    from bootstrap.target import ENDPOINT_ENV, resolve_endpoint

    local, dev, prod = load_spec("local"), load_spec("dev"), load_spec("prod")
    env = {ENDPOINT_ENV: "http://127.0.0.1:4599"}
    assert resolve_endpoint(local, None, {}).url == "embedded"
    assert resolve_endpoint(local, None, env).url == "http://127.0.0.1:4599"
    assert resolve_endpoint(local, "http://127.0.0.1:5000/", env).url == "http://127.0.0.1:5000"
    # A variable exported for local work never redirects an environment that targets AWS.
    assert resolve_endpoint(dev, None, env).url is None and resolve_endpoint(prod, None, env).url is None
    assert resolve_endpoint(dev, "http://127.0.0.1:5000", {}).source == "--endpoint-url"
    with pytest.raises(BadInput, match="production"):
        resolve_endpoint(prod, "http://127.0.0.1:5000", {})
    with pytest.raises(BadInput, match="not an endpoint URL"):
        resolve_endpoint(local, None, {ENDPOINT_ENV: "localhost:4599"})
    # boto3 and the AWS provider follow AWS_ENDPOINT_URL* of themselves: never for production, as a CI stand-in
    # or a local stack expects for the others.
    for variable in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        with pytest.raises(BadInput, match=f"{variable} is set.*production.*unset {variable}"):
            resolve_endpoint(prod, None, {variable: "http://127.0.0.1:4566"})
        assert resolve_endpoint(dev, None, {variable: "http://127.0.0.1:4566"}).url is None


def test_the_lineage_is_configured_before_the_preview_that_is_approved(world):
    # Pulumi refuses to apply a saved plan when config changed after the preview (found on the real engine).
    engine, open_, clock = world
    order = []
    real_set, real_preview = engine.set_config, engine.preview

    def set_config(layer, key, value, **kw):
        order.append(("config", layer, key))
        return real_set(layer, key, value, **kw)

    def preview(layer, **kw):
        order.append(("preview", layer, None))
        return real_preview(layer, **kw)

    engine.set_config, engine.preview = set_config, preview
    outcome, _, _ = up(open_, clock, yes=True)
    assert outcome.error is None
    for layer in ("backend", "network", "cluster"):
        preview_at = order.index(("preview", layer, None))
        configs = [i for i, o in enumerate(order) if o == ("config", layer, "groundctl:lineage")]
        assert configs and max(configs) < preview_at  # nothing changes the config between preview and up


def test_an_applied_layer_checks_its_contract_on_the_ups_own_outputs_and_an_unchanged_one_reads_them(world):
    # Each outputs read is one more `pulumi stack output` pair (the passphrase KDF and the CLI start each time);
    # the up's own result carries the outputs, secrets marked (issue 29 §2).
    engine, open_, clock = world
    canary = "kubeconfig-canary-7f3a9c"
    resources, (outputs, secret) = engine.desired["cluster"], engine.declared_outputs["cluster"]
    engine.declare("cluster", resources, {**outputs, "kubeconfig": canary}, secret)
    applied = ("backend", "network", "cluster")
    for run_no in (1, 2):
        svc = services(clock)
        with open_() as target:
            before = len(engine.calls)
            outcome = run(target, build_up(target.spec, None, emulated=True), svc, UpOptions(yes=True))
            calls = engine.calls[before:]
            assert outcome.error is None
            assert canary in target.extra_secrets  # masked in everything the run prints or stores
            stored = target.store.get(run_key("local", outcome.record.run_id)).body.decode()
        assert canary not in stored
        if run_no == 1:
            assert [c for c in calls if c[0] in ("up", "outputs")] == [("up", layer) for layer in applied]
        else:  # nothing applied: the contract is read once per layer
            assert [c for c in calls if c[0] in ("up", "outputs")] == [("outputs", layer) for layer in applied]
