"""An in-memory engine for testing everything above the engine boundary.

It keeps a desired resource list per layer (what the "program" declares) and a state per layer
(what was applied). Preview diffs them; up applies; destroy empties. When given an `ObjectStore`,
it also writes each stack's checkpoint the way Pulumi's DIY backend does (`.pulumi/stacks/...`,
a `.bak` copy, a history checkpoint), so recovery and ledger code can be tested end to end on the
emulator. Failures can be injected per (operation, layer).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Optional

from bootstrap.engine.errors import StackMissing, UnexpectedChanges
from bootstrap.engine.plan_deviation import Deviation, PlanDeviation
from bootstrap.planning.knowledge import UNKNOWN
from bootstrap.engine.pending import (other_pending_operations, pending_create_urns, refuse_other_pending,
                                      refuse_pending, unexpected_pending_creates)
from bootstrap.engine.results import OperationResult, StackOutputs
from bootstrap.kit.errors import EngineError, Refused
from bootstrap.layers import LAYERS, LINEAGE_OUTPUT
from bootstrap.planning.plan import Plan, ResourceChange
from tests.fakes.clock import FakeClock


LINEAGE_CONFIG = "groundctl:lineage"


@dataclass
class FakeResource:
    type: str
    name: str
    inputs: dict = field(default_factory=dict)
    protect: bool = False
    id: Optional[str] = None
    custom: bool = True
    parent: Optional[str] = None


def _deviation(saved_doc: dict, now_doc: dict) -> Optional[Deviation]:
    """The first resource whose operation or inputs differ from the saved plan's, as Pulumi's check reports it. An
    unknown value in the saved plan accepts any value (pkg/resource/deploy/plan.go:38-43)."""
    def steps(doc: dict) -> dict:
        return {urn: {"op": p["steps"][0], "inputs": p["goal"]["inputDiff"].get("adds", {})}
                for urn, p in doc.get("resourcePlans", {}).items()}

    saved, now = steps(saved_doc), steps(now_doc)
    for urn in sorted(set(saved) | set(now)):
        before, after = saved.get(urn), now.get(urn)
        if before is None or after is None or before["op"] != after["op"]:
            return Deviation(urn, (), True)
        fields = tuple(sorted(k for k in set(before["inputs"]) | set(after["inputs"])
                              if before["inputs"].get(k) not in (after["inputs"].get(k), UNKNOWN)))
        if fields:
            return Deviation(urn, fields, False)
    return None


class InMemoryEngine:
    def __init__(self, environment: str, store=None, clock: Callable[[], float] = time.time):
        self.environment = environment
        self.store = store
        self.clock = clock
        self.desired: dict[str, list[FakeResource]] = {}
        self.state: dict[str, list[FakeResource]] = {}
        self.stack_outputs: dict[str, dict] = {}
        self.secret_outputs: dict[str, set[str]] = {}
        self.config: dict[str, dict[str, tuple[str, bool]]] = {}
        self.calls: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, str], Exception] = {}
        self.pending: dict[str, list[dict]] = {}
        self.on_call: Optional[Callable[[str, str], None]] = None
        self.declared_outputs: dict[str, tuple[dict, set[str]]] = {}
        self.stacks: set[str] = set()  # the stacks that exist (Pulumi's `stack init` makes one)
        self.saved_plans_supported = True  # a CLI with `preview --save-plan` / `up --plan`
        # layer → the saved plan's text: per URN its operation and a digest of each input (values never in it,
        # as Pulumi keeps secrets encrypted in its plan file)
        self.saved_plans: dict[str, str] = {}
        self.reviewed: set[str] = set()  # layers whose saved plan came from use_reviewed_plan
        self.up_plans: list[tuple[str, str]] = []  # (layer, fingerprint) each constrained up applied
        # What each checkpoint records as its secrets provider (Pulumi's `secrets_providers`).
        self.secrets_providers: dict = {"type": "passphrase", "state": {"salt": "v1:fake"}}

    # -- test set-up ------------------------------------------------------------------------------

    def declare(self, layer: str, resources: list[FakeResource], outputs: dict | None = None,
                secret: set[str] | None = None) -> None:
        """What the layer's program declares: its resources and the outputs an `up` produces."""
        self.desired[layer] = resources
        self.declared_outputs[layer] = (outputs or {}, secret or set())

    def urn(self, layer: str, r: FakeResource) -> str:
        return f"urn:pulumi:{self.environment}::{layer}::{r.type}::{r.name}"

    def _record(self, op: str, layer: str) -> None:
        self.calls.append((op, layer))
        if self.on_call:
            self.on_call(op, layer)
        if (op, layer) in self.fail:
            raise self.fail.pop((op, layer))

    def _require(self, layer: str) -> None:
        if not self.stack_exists(layer):
            raise StackMissing(self.environment, layer)

    def _require_no_pending(self, layer: str, operation: str) -> None:
        """As the product engine: no preview, up or destroy while the layer's state holds pending operations."""
        refusal = refuse_pending(self.environment, layer, operation, {"pending_operations": self.pending.get(layer, [])})
        if refusal is not None:
            raise refusal

    # -- Engine protocol --------------------------------------------------------------------------

    def stack_exists(self, layer) -> bool:
        return layer in self.stacks

    def create_stack(self, layer) -> None:
        self._record("create_stack", layer)
        self.stacks.add(layer)
        self._write_checkpoint(layer)  # `stack init` on a DIY backend writes the (empty) stack object

    def supports_saved_plans(self) -> bool:
        return self.saved_plans_supported

    def preview(self, layer, *, refresh=False, expect_no_changes=False, save_plan=False, on_progress=None) -> Plan:
        self._record("preview", layer)
        self._require(layer)
        self._require_no_pending(layer, "preview")
        self.saved_plans.pop(layer, None)
        self.reviewed.discard(layer)
        plan = self._diff(layer)
        if save_plan:
            self.saved_plans[layer] = json.dumps(self._plan_document(layer, plan), sort_keys=True)
        if expect_no_changes and plan.has_changes:
            raise UnexpectedChanges(plan)  # as the product engine does
        return plan

    def _diff(self, layer: str) -> Plan:
        want = {self.urn(layer, r): r for r in self.desired.get(layer, [])}
        have = {self.urn(layer, r): r for r in self.state.get(layer, [])}
        changes = []
        for urn, r in want.items():
            if urn not in have:
                changes.append(ResourceChange(urn, r.type, "create", (), r.protect))
            elif have[urn].inputs != r.inputs:
                keys = tuple(sorted(k for k in set(r.inputs) | set(have[urn].inputs)
                                    if r.inputs.get(k) != have[urn].inputs.get(k)))
                changes.append(ResourceChange(urn, r.type, "update", keys, r.protect))
            else:
                changes.append(ResourceChange(urn, r.type, "same", (), r.protect))
        for urn, r in have.items():
            if urn not in want:
                changes.append(ResourceChange(urn, r.type, "delete", (), r.protect))
        return Plan(layer, self.environment, tuple(changes))

    def up(self, layer, *, use_saved_plan=False, on_progress=None) -> OperationResult:
        self._record("up", layer)
        self._require_no_pending(layer, "up")
        if use_saved_plan:
            # Like `pulumi up --plan`: an update that would do other than the saved plan is refused, naming the
            # first resource that deviates, before anything is applied.
            reviewed = layer in self.reviewed
            self.reviewed.discard(layer)
            saved = self.saved_plans.pop(layer, None)
            if saved is None:
                raise EngineError(f"No saved plan of layer '{layer}' is left to apply.")
            now = self._diff(layer)
            deviation = _deviation(json.loads(saved), self._plan_document(layer, now))
            if deviation is not None:
                raise PlanDeviation(self.environment, layer, deviation, reviewed=reviewed)
            self.up_plans.append((layer, now.fingerprint))
        # Unlike Pulumi, an `up` here starts a missing stack: test set-ups deploy layers directly. The
        # orchestrator never relies on it (it asks stack_exists and calls create_stack first).
        self.stacks.add(layer)
        before = {self.urn(layer, r) for r in self.state.get(layer, [])}
        applied = []
        for r in self.desired.get(layer, []):
            r2 = copy.deepcopy(r)
            r2.id = r2.id or f"{r.name}-{hashlib.sha1(r.name.encode()).hexdigest()[:8]}"
            applied.append(r2)
        self.state[layer] = applied
        outs, secret = self.declared_outputs.get(layer, ({}, set()))
        outs = dict(outs)
        # Like the real programs: the lineage output is whatever `groundctl:lineage` config says.
        lineage = self.config.get(layer, {}).get(LINEAGE_CONFIG)
        if lineage is not None:
            outs[LINEAGE_OUTPUT] = lineage[0]
        self.stack_outputs[layer] = outs
        self.secret_outputs[layer] = set(secret)
        self._write_checkpoint(layer)
        after = {self.urn(layer, r) for r in applied}
        return OperationResult(layer, "up", {"create": len(after - before), "delete": len(before - after)},
                               self._outputs(layer))

    def saved_plan(self, layer) -> Optional[str]:
        return self.saved_plans.get(layer)

    def use_reviewed_plan(self, layer, text) -> None:
        self._record("use_reviewed_plan", layer)
        self.saved_plans[layer] = text
        self.reviewed.add(layer)

    def _plan_document(self, layer: str, plan: Plan) -> dict:
        want = {self.urn(layer, r): r for r in self.desired.get(layer, [])}

        def digest(value) -> str:
            if value == UNKNOWN:  # a value the preview cannot know yet is written as Pulumi writes it
                return value
            return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
        # Pulumi's shape (sdk/go/common/apitype/plan.go), the values digests: the inputs' values never in it.
        return {"manifest": {}, "resourcePlans": {
            c.urn: {"goal": {"inputDiff": {"adds": {k: digest(v) for k, v in want[c.urn].inputs.items()}
                                           if c.urn in want else {}}}, "steps": [c.operation]}
            for c in plan.changes}}

    def refresh(self, layer, *, on_progress=None) -> OperationResult:
        self._record("refresh", layer)
        self._require(layer)
        self._write_checkpoint(layer)
        return OperationResult(layer, "refresh", {}, self._outputs(layer))

    def destroy(self, layer, *, on_progress=None) -> OperationResult:
        self._record("destroy", layer)
        self._require(layer)
        self._require_no_pending(layer, "destroy")
        n = len(self.state.get(layer, []))
        protected = [r.name for r in self.state.get(layer, []) if r.protect]
        if protected:
            raise EngineError(f"cannot destroy {layer}: protected resources {protected}")
        self.state[layer] = []
        self.stack_outputs[layer] = {}
        self._write_checkpoint(layer)
        return OperationResult(layer, "destroy", {"delete": n})

    def outputs(self, layer) -> StackOutputs:
        self._record("outputs", layer)  # a `pulumi stack output` read of its own (two CLI runs in the SDK)
        return self._outputs(layer)

    def _outputs(self, layer) -> StackOutputs:
        """What an operation's own result carries: no read of its own."""
        self._require(layer)
        return StackOutputs(dict(self.stack_outputs.get(layer, {})), frozenset(self.secret_outputs.get(layer, set())))

    def export_state(self, layer) -> dict:
        self._record("export_state", layer)
        self._require(layer)
        return {"version": 3, "deployment": self._deployment(layer)}

    def import_resources(self, layer, import_plan: dict, *, on_progress=None) -> OperationResult:
        self._record("import", layer)
        self._require(layer)
        have = {(r.type, r.name) for r in self.state.get(layer, [])}
        added = 0
        for item in import_plan.get("resources", []):
            if (item["type"], item["name"]) in have:
                continue
            want = next((r for r in self.desired.get(layer, [])
                         if (r.type, r.name) == (item["type"], item["name"])), None)
            self.state.setdefault(layer, []).append(
                FakeResource(item["type"], item["name"], dict(want.inputs) if want else {}, False, item["id"]))
            added += 1
        self._write_checkpoint(layer)
        return OperationResult(layer, "import", {"import": added}, self._outputs(layer))

    def clear_pending_creates(self, layer, urns, *, on_progress=None) -> OperationResult:
        """As the product engine: refuses when a pending create is not in `urns`; drops them all otherwise."""
        self._record("clear_pending_creates", layer)
        self._require(layer)
        ops = {"pending_operations": self.pending.get(layer, [])}
        if other_pending_operations(ops):
            raise refuse_other_pending(self.environment, layer, other_pending_operations(ops))
        others = unexpected_pending_creates(ops, urns)
        if others:
            raise Refused(f"pending creates not decided on: {', '.join(others)}")
        cleared = len(pending_create_urns(ops))
        self.pending[layer] = []
        self._write_checkpoint(layer)
        return OperationResult(layer, "clear-pending-creates", {"cleared": cleared}, self._outputs(layer))

    def set_config(self, layer, key, value, *, secret=False) -> None:
        self.config.setdefault(layer, {})[key] = (value, secret)

    # -- the DIY backend imitation ----------------------------------------------------------------

    def _deployment(self, layer: str) -> dict:
        stack_urn = f"urn:pulumi:{self.environment}::{layer}::pulumi:pulumi:Stack::{layer}-{self.environment}"
        resources = [{"urn": stack_urn, "custom": False, "type": "pulumi:pulumi:Stack",
                      "outputs": dict(self.stack_outputs.get(layer, {}))}]
        for r in self.state.get(layer, []):
            item = {"urn": self.urn(layer, r), "custom": r.custom, "type": r.type, "inputs": r.inputs,
                    "outputs": dict(r.inputs), "parent": stack_urn}
            if r.custom:
                item["id"] = r.id
            if r.protect:
                item["protect"] = True
            resources.append(item)
        return {
            "manifest": {"time": "2026-12-02T00:00:00Z", "magic": hashlib.sha256(b"v3.140.0").hexdigest(),
                         "version": "v3.140.0"},
            "secrets_providers": self.secrets_providers,
            "resources": resources,
            "pending_operations": list(self.pending.get(layer, [])),
        }

    def checkpoint_bytes(self, layer: str) -> bytes:
        dep = self._deployment(layer)
        doc = {"version": 3, "checkpoint": {"stack": f"organization/{layer}/{self.environment}", "latest": dep}}
        return json.dumps(doc, indent=4).encode()

    def _write_checkpoint(self, layer: str) -> None:
        if self.store is None:
            return
        key = f".pulumi/stacks/{layer}/{self.environment}.json"
        current = self.store.get(key)
        if current is not None:
            self.store.put(key + ".bak", current.body)
        body = self.checkpoint_bytes(layer)
        self.store.put(key, body)
        stamp = int(self.clock() * 1e9)
        self.store.put(f".pulumi/history/{layer}/{self.environment}/{self.environment}-{stamp}.checkpoint.json", body)


# -- a whole environment ---------------------------------------------------------------------------

class BucketEngine(InMemoryEngine):
    """The in-memory engine, reading its state back from the bucket before each preview and import, as
    Pulumi reads the stack object: a deleted object is no state at all, and a restore done in the bucket
    is what it then sees."""

    def stack_exists(self, layer) -> bool:
        from bootstrap.records.ledger import current_state

        return current_state(self.store, layer, self.environment) is not None

    def _sync(self, layer: str) -> None:
        from bootstrap.records.ledger import current_state
        from recovery.state.state_bytes import decompress

        obj = current_state(self.store, layer, self.environment)
        if obj is None:
            self.state[layer] = []
            self.pending[layer] = []
            return
        dep = json.loads(decompress(obj.body)[0])["checkpoint"]["latest"]
        self.pending[layer] = list(dep.get("pending_operations") or [])  # Pulumi carries them from state to state
        self.state[layer] = [FakeResource(r["type"], r["urn"].rsplit("::", 1)[-1], r.get("inputs", {}),
                                          r.get("protect", False), r.get("id"), r.get("custom", True))
                             for r in dep["resources"] if r["type"] != "pulumi:pulumi:Stack"]

    def preview(self, layer, **kw):
        self._sync(layer)
        return super().preview(layer, **kw)

    def import_resources(self, layer, import_plan, **kw):
        self._sync(layer)
        return super().import_resources(layer, import_plan, **kw)

    def export_state(self, layer):
        self._sync(layer)
        return super().export_state(layer)

    def clear_pending_creates(self, layer, urns, **kw):
        self._sync(layer)
        return super().clear_pending_creates(layer, urns, **kw)


STANDARD_TYPES = {
    # As stacks/backend declares them on an emulator (no TLS-only policy), so the first up's adoption of
    # what the bootstrap made leaves nothing to create (tests/test_backend_adoption.py keeps them in step).
    "backend": [("aws:kms/key:Key", "state-key", True), ("aws:kms/alias:Alias", "state-key-alias", False),
                ("aws:s3/bucket:Bucket", "state-bucket", True),
                ("aws:s3/bucketVersioning:BucketVersioning", "state-bucket-versioning", False),
                ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                 "state-bucket-encryption", False),
                ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "state-bucket-public-access-block", False),
                ("aws:s3/bucketOwnershipControls:BucketOwnershipControls", "state-bucket-ownership", False),
                ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "state-bucket-lifecycle",
                 False)],
    "network": [("aws:ec2/vpc:Vpc", "vpc", False), ("aws:ec2/subnet:Subnet", "private-a", False),
                ("aws:ec2/subnet:Subnet", "public-a", False)],
    "cluster": [("aws:eks/cluster:Cluster", "cluster", False), ("aws:iam/role:Role", "node-role", False)],
    "flux": [("kubernetes:core/v1:Namespace", "flux-system", False)],
}


def declare_standard(engine: "InMemoryEngine", *, cluster_endpoint: str = "https://k8s.example.invalid",
                     kubeconfig: str = "apiVersion: v1\nkind: Config\n", protect_backend: bool = True) -> None:
    """Declare every layer with resources and exactly the outputs its contract promises.

    The lineage output is left out on purpose: it appears only when the orchestrator has set the
    `groundctl:lineage` config, as with the real programs.
    """
    for lay in LAYERS:
        resources = [FakeResource(t, n, {"name": n}, protect=(p and protect_backend))
                     for t, n, p in STANDARD_TYPES[lay.name]]
        outputs = {o: f"{lay.name}-{o}" for o in lay.outputs if o != LINEAGE_OUTPUT}
        if lay.name == "cluster":
            outputs["cluster_endpoint"] = cluster_endpoint
            outputs["kubeconfig"] = kubeconfig
        if lay.name == "flux":  # what stacks/flux exports: Flux's readiness is read at these names
            outputs |= {"flux_namespace": "flux-system", "git_repository": "flux-system/flux-system",
                        "kustomization": "flux-system/flux-system"}
        engine.declare(lay.name, resources, outputs, set(lay.secret_outputs))


def quick_append(*args, **kwargs):
    """bootstrap.records.ledger.append_record without its settle pause: one writer at a time in these tests."""
    from bootstrap.records.ledger import append_record

    return append_record(*args, settle_seconds=0, **kwargs)


class TickingClock(FakeClock):
    """A clock that moves `step` seconds at each reading, so every checkpoint and record the engine and
    the orchestrator write gets a time of its own (history keys are named by time)."""

    def __init__(self, step: float, start: float = 1_800_000_000.0):
        super().__init__(start)
        self.step = step

    def __call__(self) -> float:
        self.advance(self.step)
        return self.now


@contextmanager
def target_with(engine: InMemoryEngine, spec, environ: Optional[Mapping[str, str]] = None) -> Iterator:
    """A Target for `spec` on the test emulator whose engine is `engine` (no Pulumi CLI needed)."""
    from bootstrap.target import open_target

    with open_target(spec.name, spec=spec, environ=environ or {}, engine_factory=lambda ctx: engine,
                     engine_check=lambda: None) as target:
        yield target
