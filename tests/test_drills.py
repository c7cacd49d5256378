"""The rebuild drill with the in-memory engine, a fake clock and the Kubernetes API double.

The state bucket, ledger, lock and orchestrator are the real ones on the emulator (the engine writes
real checkpoints there), so a drill's destroy and recreate leave real ledger records and run records.
Time moves only when the engine "works" (a hook advances the fake clock) or the Flux wait sleeps.
"""

from __future__ import annotations

import functools
import json
import uuid

import pytest

from bootstrap.kit.errors import BadInput
from typer.testing import CliRunner

from bootstrap.records import layout
from groundctl import app
from bootstrap.kit.errors import EngineError
from bootstrap.records.lock_status import lock_status
from bootstrap.records.locks import EnvironmentLock
from bootstrap.target import open_target
from recovery.drills import phases as dp
from recovery.drills.report import write_report
from recovery.drills.rebuild_cluster import DrillContext, RebuildOptions, orchestrated_layers, run_rebuild
from bootstrap.kube.api import KubeApiError
from bootstrap.records.ledger import append_record, read_ledger
from tests.fakes.clock import FakeClock
from tests.fakes.engine import LINEAGE_CONFIG, InMemoryEngine, declare_standard
from tests.fakes.k8s import CONTROLLERS, FakeKubeApi, deployment, git_repository, kustomization

KUBECONFIG = "apiVersion: v1\nkind: Config\n# canary-kubeconfig-4b7e2a19\n"
append = functools.partial(append_record, settle_seconds=0)
DURATIONS = {("destroy", "flux"): 60, ("destroy", "cluster"): 600, ("up", "cluster"): 900, ("up", "flux"): 120}
BASELINE = {"flux-system/flux-system": "main@sha1:abc123", "flux-system/apps": "main@sha1:abc123"}


class FluxSim:
    """The cluster's Flux as the double shows it: gone with the flux layer, and `ready_after` polls after it is
    back, every controller available and every Kustomization (the root one too) Ready at `revision`."""

    def __init__(self, api: FakeKubeApi, ready_after: int = 2, revision: str = "main@sha1:abc123"):
        self.api, self.ready_after, self.revision = api, ready_after, revision
        self.back_at = None
        self.show(ready=True, revision=revision)
        api.on_poll = self.on_poll

    def show(self, *, ready: bool, revision: str) -> None:
        self.api.set_flux(
            items=[kustomization(k.split("/")[1], ready="True" if ready else "Unknown", reason="Progressing",
                                 revision=revision if ready else None) for k in BASELINE],
            sources=[git_repository(ready="True" if ready else "Unknown", revision=revision if ready else None)],
            deployments=[deployment(name, available=ready) for name in CONTROLLERS])

    def on_engine(self, op: str, layer: str) -> None:
        if (op, layer) in (("destroy", "flux"), ("destroy", "cluster")):
            self.api.set_flux(items=[], sources=[], deployments=[])
        if (op, layer) == ("up", "flux"):
            self.back_at = len(self.api.polls)

    def on_poll(self, n: int) -> None:
        if self.back_at is None:
            return
        self.show(ready=n - self.back_at > self.ready_after, revision=self.revision)


@pytest.fixture
def world(local_spec, aws):
    """A deployed environment (all four layers, each with its ledger record) and a drill context factory."""
    spec = local_spec.model_copy(update={"name": f"d{uuid.uuid4().hex[:8]}"})
    s3 = aws.client("s3")
    s3.create_bucket(Bucket=spec.backend.bucket)
    s3.put_bucket_versioning(Bucket=spec.backend.bucket, VersioningConfiguration={"Status": "Enabled"})
    clock = FakeClock()
    api = FakeKubeApi()
    sim = FluxSim(api)
    with open_target(spec.name, spec=spec, environ={}, engine_factory=lambda ctx: engine,
                     engine_check=lambda: None) as target:
        engine = InMemoryEngine(spec.name, store=target.store, clock=clock)
        declare_standard(engine, kubeconfig=KUBECONFIG)
        for layer in ("backend", "network", "cluster", "flux"):
            lineage = str(uuid.uuid4())
            engine.set_config(layer, LINEAGE_CONFIG, lineage)
            engine.up(layer)
            append(target.store, layer, spec.name, operation="up", run_id="setup", lineage=lineage)
        engine.calls.clear()

        def on_call(op, layer):
            clock.advance(DURATIONS.get((op, layer), 0))
            sim.on_engine(op, layer)
        engine.on_call = on_call

        def make(*, emulated=False, confirm=lambda q: True, spec_=None):
            if spec_ is not None:
                target.spec = spec_
            return DrillContext(
                spec=target.spec, store=target.store, engine=lambda: target.engine, emulated=emulated,
                run_layers=orchestrated_layers(target, clock=clock, probe=lambda host, port: None,
                                               append_record=append, git_commit=lambda: None,
                                               kube_for=lambda spec, kubeconfig: api),
                lock_factory=lambda s, env, run_id: EnvironmentLock(s, env, run_id, settle_seconds=0),
                require_bucket=target.require_bucket, kube_for=lambda kubeconfig: api, lock_status=lock_status,
                confirm=confirm, clock=clock, sleep=clock.sleep, secrets=set(target.secret_values()))
        yield type("World", (), {"engine": engine, "target": target, "clock": clock, "api": api, "sim": sim,
                                 "spec": spec, "make": staticmethod(make), "store": target.store})


def changes(engine):
    return [c for c in engine.calls if c[0] in ("destroy", "up")]


def statuses(report):
    return {p.name: p.status for p in report.phases}


def test_rebuild_passes_with_every_phase_timed_and_the_lock_released(world, tmp_path):
    report = run_rebuild(world.make(), RebuildOptions(yes=True))
    assert report.verdict.outcome == "passed", report.verdict.message
    assert all(p.status == "achieved" and p.attempted for p in report.phases)
    assert changes(world.engine) == [("destroy", "flux"), ("destroy", "cluster"), ("up", "cluster"), ("up", "flux")]
    seconds = {p.name: p.seconds for p in report.phases}
    assert seconds["destroy-cluster"] == 600 and seconds["recreate-cluster"] == 900 and seconds["recreate-flux"] == 120
    wait = sum(world.clock.sleeps)
    assert wait > 0 and seconds["flux-ready"] == pytest.approx(wait, abs=0.001)
    assert report.verdict.recovery_seconds == pytest.approx(900 + 120 + wait, abs=0.001) and report.verdict.within_rto
    assert report.baseline["kustomizations"] == BASELINE and report.after["kustomizations"] == BASELINE
    assert "kubeconfig" not in report.baseline["cluster_outputs"]
    assert lock_status(world.store, world.spec.name).holder is None
    assert [r.operation for r in read_ledger(world.store, "cluster", world.spec.name).records] == ["up", "destroy", "up"]
    assert len(report.runs) == 4 and all(world.store.get(layout.run_key(world.spec.name, r)) for r in report.runs)
    written = write_report(report, store=world.store, out_dir=tmp_path, secret_values=[KUBECONFIG])
    for text in [open(f).read() for f in written.files] + [world.store.get(written.bucket_key).body.decode()]:
        assert "canary-kubeconfig" not in text


def test_recovery_over_the_rto_fails_the_drill(world):
    DURATIONS[("up", "cluster")] = 40 * 60
    try:
        report = run_rebuild(world.make(), RebuildOptions(yes=True))
    finally:
        DURATIONS[("up", "cluster")] = 900
    assert all(p.status == "achieved" for p in report.phases)
    assert (report.verdict.outcome, report.verdict.reason, report.verdict.within_rto) == ("failed", "OverRTO", False)
    assert report.exit_code == 1


def test_without_a_kubernetes_api_the_flux_phases_are_skipped_and_the_verdict_says_unverified(world):
    report = run_rebuild(world.make(emulated=True), RebuildOptions(yes=True))
    assert changes(world.engine) == [("destroy", "cluster"), ("up", "cluster")]
    for name in dp.FLUX_PHASES:
        phase = report.phase(name)
        assert phase.status == "skipped" and not phase.attempted and "emulator" in phase.message
    assert report.verdict.outcome == "unverified" and "could not be fully verified" in report.verdict.message
    assert report.verdict.recovery_seconds == 900 and world.api.paths == []


def _fail(world, phase):
    if phase in ("destroy-flux", "destroy-cluster", "recreate-cluster", "recreate-flux"):
        op = "destroy" if phase.startswith("destroy") else "up"
        world.engine.fail[(op, phase.split("-")[1])] = EngineError(f"injected failure in {phase}")
    elif phase == "flux-ready":
        world.sim.ready_after = 10_000
    elif phase == "verify-kustomizations":
        world.sim.revision = "main@sha1:def456"
    elif phase == "baseline":
        world.api.errors = [KubeApiError(None, "connection refused")]


EXPECT_LEFT = {"preflight": [], "baseline": [], "destroy-flux": ["flux"], "destroy-cluster": ["cluster", "flux"],
               "recreate-cluster": ["cluster", "flux"], "recreate-flux": ["flux"], "flux-ready": [],
               "verify-kustomizations": []}


@pytest.mark.parametrize("phase", dp.REBUILD)
def test_a_failure_in_each_phase_is_named_with_its_next_step_and_the_lock_is_released(world, phase):
    ctx = world.make()
    if phase == "preflight":
        ctx.spec = world.spec.model_copy(update={"production": True})
    _fail(world, phase)
    report = run_rebuild(ctx, RebuildOptions(yes=True, timeout_minutes=5))
    failed = report.phase(phase)
    assert report.verdict.failed_phase == phase and failed.status in ("failed", "refused"), report.verdict.message
    assert failed.next_step == dp.next_step(phase, world.spec.name) and failed.attempted and not failed.achieved
    later = dp.REBUILD[dp.REBUILD.index(phase) + 1:]
    assert all(report.phase(n).status == "not-attempted" and not report.phase(n).attempted for n in later)
    left = [layer for layer in ("cluster", "flux") if any(f"the {layer} layer" in item for item in report.left_half_done)]
    assert left == EXPECT_LEFT[phase]
    assert lock_status(world.store, world.spec.name).holder is None
    assert report.exit_code in (1, 3)


def test_failure_messages_are_specific(world):
    world.sim.revision = "main@sha1:def456"
    report = run_rebuild(world.make(), RebuildOptions(yes=True))
    verify = report.phase("verify-kustomizations")
    assert verify.reason == "RevisionMismatch" and "main@sha1:abc123 → main@sha1:def456" in verify.message
    FluxSim.__init__(world.sim, world.api, ready_after=10_000)  # Flux back as it was, then never Ready
    report = run_rebuild(world.make(), RebuildOptions(yes=True, timeout_minutes=2))
    ready = report.phase("flux-ready")
    assert ready.reason == "ReadyTimeout" and ready.seconds == 120 and "not Ready after 120 s" in ready.message


def test_flux_ready_judges_the_controllers_and_the_root_as_up_does(world):
    """Every Kustomization comes back Ready at its baseline revision, but a controller never becomes available."""
    show = world.sim.show

    def kustomize_controller_down(*, ready: bool, revision: str) -> None:
        show(ready=ready, revision=revision)
        if world.sim.back_at is not None:
            world.api.deployments = [deployment(n, available=n != "kustomize-controller") for n in CONTROLLERS]
    world.sim.show = kustomize_controller_down
    report = run_rebuild(world.make(), RebuildOptions(yes=True, timeout_minutes=2))
    ready = report.phase("flux-ready")
    assert (ready.status, ready.reason, ready.seconds) == ("failed", "ReadyTimeout", 120)
    assert "controller(s) not available: kustomize-controller (0 of 1 replica(s) available" in ready.message
    assert ready.details["last_reason"] == "ControllersUnavailable"
    assert [c["key"] for c in ready.details["controllers"] if not c["available"]] == ["flux-system/kustomize-controller"]


def test_a_secret_quoted_by_an_engine_error_never_reaches_the_report(world):
    world.engine.fail[("up", "cluster")] = EngineError(f"provider said: bad kubeconfig {KUBECONFIG}")
    report = run_rebuild(world.make(), RebuildOptions(yes=True))
    assert report.verdict.failed_phase == "recreate-cluster"
    assert "canary-kubeconfig" not in json.dumps(report.to_dict())
    assert "[redacted]" in report.phase("recreate-cluster").message


def test_production_needs_i_mean_production(world):
    ctx = world.make()
    ctx.spec = world.spec.model_copy(update={"production": True})
    refused = run_rebuild(ctx, RebuildOptions(yes=True))
    assert refused.phase("preflight").reason == "ProductionRefused" and changes(world.engine) == []
    allowed = run_rebuild(ctx, RebuildOptions(yes=True, i_mean_production=True))
    assert allowed.verdict.outcome == "passed"


def test_unconfirmed_or_locked_drills_change_nothing(world):
    report = run_rebuild(world.make(confirm=lambda q: False), RebuildOptions())
    assert report.phase("preflight").reason == "NotConfirmed" and changes(world.engine) == []
    assert lock_status(world.store, world.spec.name).holder is None
    other = EnvironmentLock(world.store, world.spec.name, "someone-else", settle_seconds=0)
    with other:
        report = run_rebuild(world.make(), RebuildOptions(yes=True))
        assert report.phase("preflight").reason == "LockHeld" and changes(world.engine) == []
        assert lock_status(world.store, world.spec.name).holder.run_id == "someone-else"


def test_a_state_written_outside_groundctl_fails_the_preflight(world):
    key = layout.stack_key("network", world.spec.name)
    world.store.put(key, world.store.get(key).body + b" ")
    report = run_rebuild(world.make(), RebuildOptions(yes=True))
    pre = report.phase("preflight")
    assert pre.reason == "PreflightFailed" and "network: unrecorded: the current state is not in the ledger" in pre.message
    assert changes(world.engine) == []


def test_dry_run_shows_phases_and_plans_and_changes_nothing(world):
    before = sorted((v.key, v.version_id) for v in world.store.versions(""))
    report = run_rebuild(world.make(), RebuildOptions(dry_run=True))
    assert report.verdict.outcome == "dry-run" and report.exit_code == 0
    assert statuses(report)["preflight"] == "achieved" and statuses(report)["baseline"] == "achieved"
    assert all(report.phase(n).reason == "DryRun" for n in dp.REBUILD[2:])
    plans = {p["phase"]: p for p in report.plans}
    assert plans["destroy-cluster"]["summary"] == "destroys 3 resource(s) in state"
    assert "a preview now shows no changes" in plans["recreate-cluster"]["summary"]
    assert changes(world.engine) == []
    assert sorted((v.key, v.version_id) for v in world.store.versions("")) == before


def test_cli_dry_runs_of_both_drills_against_local_print_their_phases(monkeypatch, tmp_path):
    from tests.conftest import local_spec_with_bucket

    monkeypatch.delenv("GROUNDCTL_ENDPOINT_URL", raising=False)
    # The shipped local spec with a bucket of its own: the embedded emulator started in this process shares moto's
    # state with the session's, where a test run before this one may have made the shipped spec's bucket.
    local = str(local_spec_with_bucket(tmp_path, f"gl-{uuid.uuid4().hex[:16]}"))
    runner = CliRunner()
    result = runner.invoke(app, ["drill", "rebuild-cluster", local, "--dry-run", "--json"])
    # A fresh emulator holds no environment: the dry run stops where the real drill would, with its code.
    assert result.exit_code == 2, result.output
    doc = json.loads(result.stdout)
    assert doc["phases"][0]["status"] == "failed" and "does not exist" in doc["phases"][0]["message"]
    assert [p["name"] for p in doc["phases"]] == list(dp.REBUILD) and doc["verdict"]["outcome"] == "dry-run"
    assert doc["phases"][2]["reason"] == "NoKubernetesApi"  # no Kubernetes API on the emulator
    result = runner.invoke(app, ["drill", "state-loss", local, "--layer", "network", "--dry-run"])
    assert result.exit_code == 2, result.output
    for name in dp.STATE_LOSS:
        assert name in result.stdout
    result = runner.invoke(app, ["drill", "state-loss", local, "--layer", "nope", "--dry-run", "--json"])
    # Raised before anything is opened; the front door turns it into exit 2 (the exit-code matrix test runs it).
    assert isinstance(result.exception, BadInput) and "'nope' is not a layer" in result.exception.message


def test_cli_history_lists_stored_drills_with_the_trend(local_spec, aws, emulator_endpoint, monkeypatch):
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "unused-here")
    store_bucket = "groundctl-local-state"
    s3 = aws.client("s3")
    try:
        s3.create_bucket(Bucket=store_bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    from bootstrap.aws.objectstore import ObjectStore
    from recovery.drills.report import DrillReport
    store = ObjectStore(s3, store_bucket)
    ids, keys = [], []
    for i, secs in enumerate((1000.0, 800.0)):
        phase = dp.PhaseResult("recreate-cluster", "achieved", "Recreated", "ok", True,
                               started_at=1_796_000_000.0 + i * 9000, ended_at=1_796_000_000.0 + i * 9000 + secs)
        verdict = dp.decide((phase,), dp.REBUILD_RECOVERY, 30)
        r = DrillReport(f"2099010{i}T000000Z-rebuild-cluster-{uuid.uuid4().hex[:6]}", "rebuild-cluster", "local",
                        phase.started_at, phase.ended_at, 30, (phase,), verdict)
        keys.append(write_report(r, store=store).bucket_key)
        ids.append(r.drill_id)
    result = CliRunner().invoke(app, ["drill", "history", "local", "--json", "--endpoint-url", emulator_endpoint])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = [row for row in doc["drills"] if row["drill_id"] in ids]
    assert [row["recovery_seconds"] for row in rows] == [1000.0, 800.0]
    assert doc["trends"]["rebuild-cluster"]["last_n"] >= 2
    for key in keys:
        store.delete(key)


def test_cli_history_shows_the_restore_rehearsals_beside_the_drills(local_spec, aws, emulator_endpoint, monkeypatch):
    """Can we recover, and how fast, in one place: the drills, and per layer the last proven restore, the measured
    RPO and the seconds the last rehearsal took (the state half of the RTO)."""
    import time

    from bootstrap.aws.objectstore import ObjectStore
    from tests.fleetseed import save_rehearsal

    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "unused-here")
    s3 = aws.client("s3")
    try:
        s3.create_bucket(Bucket="groundctl-local-state")
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    store = ObjectStore(s3, "groundctl-local-state")
    now = time.time()
    keys = [save_rehearsal(store, "local", now - 2 * 86400, {"network": ("proven", 600, None),
                                                            "cluster": ("proven", 60, None)}, index=1),
            save_rehearsal(store, "local", now - 3600, {"network": ("failed", 900, "wrong passphrase"),
                                                        "cluster": ("drift", 120, None)}, index=2)]
    try:
        result = CliRunner().invoke(app, ["drill", "history", "local", "--json", "--endpoint-url", emulator_endpoint])
        assert result.exit_code == 0, result.output
        reh = json.loads(result.stdout)["rehearsals"]
        net, cluster = reh["layers"]["network"], reh["layers"]["cluster"]
        assert net["last"]["outcome"] == "failed" and net["last"]["reason"] == "wrong passphrase"
        assert net["last_proven"]["rpo_seconds"] == 600 and abs(net["last_proven"]["age_seconds"] - 2 * 86400) < 600
        assert net["seconds"] == 0.2 and cluster["seconds"] == 4.7  # the newest rehearsal's phases
        assert cluster["last_proven"]["outcome"] == "drift" and reh["records"] == 2
        text = CliRunner().invoke(app, ["drill", "history", "local", "--endpoint-url", emulator_endpoint])
        assert text.exit_code == 0, text.output
        assert "restore rehearsals of local" in text.stdout and "wrong passphrase" in text.stdout
    finally:
        for key in keys:
            store.delete(key)
