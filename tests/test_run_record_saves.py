"""Where a run saves its record (issue 29 §2): before and after every phase that changes something, and when a
phase fails; the phases between two of those only read, and their ends ride along with the next save. One `up` of a
layer with a change saved its record 15 times (a PUT each); it saves it 8 times, and a crash anywhere still leaves a
stored record naming every change the run made or was making."""

from __future__ import annotations

import json

import pytest

from bootstrap.apply.layer_up import UpOptions
from bootstrap.apply.runner import run
from bootstrap.apply.steps import build_up
from bootstrap.records.layout import run_key
from bootstrap.records.runs import MUTATING, start_run
from tests.fakes.engine import FakeResource, InMemoryEngine, TickingClock, declare_standard, target_with

# One layer's `up` as the runner and layer_up run it: (phase, layer); "attach" is where the state bucket is known.
PREFLIGHT = [("account", None), ("engine", None), ("backend", None), ("lock", None), ("pending", None)]
WITH_CHANGE = [("stack", "network"), ("preview", "network"), ("gate", "network"), ("up", "network"),
               ("ledger", "network"), ("contract", "network")]
NO_CHANGE = [("stack", "network"), ("preview", "network"), ("gate", "network"), ("contract", "network")]


def replay(layer_phases: list) -> tuple[list[dict], list[str]]:
    """The records stored by a run of PREFLIGHT, `layer_phases` and the unlock, and the phase each save came in."""
    stored: list[dict] = []
    log = start_run("dev", "up", {}, clock=TickingClock(0.25), run_id="r1")
    log.plan_layers(["network"], "up")
    during: list[str] = []

    def sink(key, body):
        stored.append(json.loads(body))
        during.append(current[0])

    current = [""]
    for name, layer in PREFLIGHT + layer_phases + [("unlock", None)]:
        current[0] = name
        with log.phase(name, layer):
            if name == "backend":
                log.attach(sink)
    current[0] = "finish"
    log.finish("succeeded")
    assert log.saves == len(stored)
    return stored, during


def phases_of(record: dict) -> list[tuple[str, str]]:
    """(name, outcome) of every phase of the record, in the order they started."""
    every = record["phases"] + [p for lay in record["layers"] for p in lay["phases"]]
    return [(p["name"], p["outcome"]) for p in sorted(every, key=lambda p: p["started_at"])]


@pytest.mark.parametrize("layer_phases, saves", [(WITH_CHANGE, 8), (NO_CHANGE, 5)])
def test_one_layers_up_saves_its_record_only_around_what_it_changes(layer_phases, saves):
    stored, during = replay(layer_phases)
    assert len(stored) == saves
    run = [name for name, _ in PREFLIGHT + layer_phases + [("unlock", None)]]
    changing = [name for name in run if name in MUTATING and name != "backend"]  # backend: before there is a bucket
    for name in changing:
        # Before it changes anything, the stored record names it running, everything before it ended.
        assert any(phases_of(rec)[-1] == (name, "running") and all(o == "ok" for _, o in phases_of(rec)[:-1])
                   for rec in stored), name
    for name in [n for n in run if n in MUTATING]:
        # And how it ended is stored before the next phase runs: in the save at that phase's start (or the finish).
        after = run[run.index(name) + 1] if run.index(name) + 1 < len(run) else "finish"
        assert any((name, "ok") in phases_of(rec) and phases_of(rec)[-1][0] == after or
                   (after == "finish" and rec["outcome"] == "succeeded") for rec, at in zip(stored, during)
                   if at == after), name
    assert stored[-1]["outcome"] == "succeeded" and all(o == "ok" for _, o in phases_of(stored[-1]))


def test_the_reads_between_two_changes_are_stored_with_the_next_save():
    stored, during = replay(WITH_CHANGE)
    # No save for the phases that only read: their ends ride along with the next save (preview: it is long).
    assert during == ["lock", "pending", "preview", "up", "ledger", "contract", "unlock", "finish"]
    at_up = stored[during.index("up")]
    assert phases_of(at_up)[-3:] == [("preview", "ok"), ("gate", "ok"), ("up", "running")]


def test_a_failing_read_is_stored_at_once():
    stored: list[dict] = []
    log = start_run("dev", "up", {}, clock=TickingClock(0.25), run_id="r2")
    log.plan_layers(["network"], "up")
    log.attach(lambda key, body: stored.append(json.loads(body)))
    for name in ("lock", "pending"):
        with log.phase(name):
            pass
    before = len(stored)
    with log.phase("stack", "network"):
        pass
    assert len(stored) == before
    with pytest.raises(RuntimeError):
        with log.phase("gate", "network"):
            raise RuntimeError("boom")
    assert len(stored) == before + 1 and stored[-1]["stopped_at"] == "network/gate"
    assert phases_of(stored[-1])[-2:] == [("stack", "ok"), ("gate", "failed")]


# -- the runner on the emulator, with the in-memory engine ---------------------------------------------------------


@pytest.fixture
def world(local_spec, aws):
    from bootstrap.aws.objectstore import ObjectStore

    clock = TickingClock(0.25)
    engine = InMemoryEngine("local", store=ObjectStore(aws.client("s3"), local_spec.backend.bucket), clock=clock)
    declare_standard(engine)
    return engine, local_spec, clock


def up_network(engine, spec, clock, seen: dict) -> tuple[int, dict]:
    """`up --layers network --yes`; the number of PUTs of its run record, and that record as stored at the end.
    `seen` gets, at each change the run makes, the phases of the record stored at that moment."""
    from bootstrap.apply.services import default_services
    from bootstrap.records.ledger import append_record
    from bootstrap.records.locks import EnvironmentLock

    puts: list[str] = []

    with target_with(engine, spec) as target:
        def stored_now(what: str) -> None:
            keys = [k for k, _, _ in target.store.keys(".groundctl/runs/local/")]
            if keys:
                seen.setdefault(what, []).append(phases_of(json.loads(target.store.get(max(keys)).body)))

        def lock(store, env, run_id):
            stored_now("lock")
            return EnvironmentLock(store, env, run_id)

        def append(*args, **kwargs):
            stored_now("ledger")
            return append_record(*args, **kwargs)

        put = target.store.put

        def counted(key, body, *args, **kwargs):
            if key.startswith(".groundctl/runs/"):
                puts.append(key)
            return put(key, body, *args, **kwargs)

        target.store.put = counted
        engine.on_call = lambda op, layer: stored_now(op) if op in ("up", "create_stack") else None
        svc = default_services(clock=clock, git_commit=lambda: "a" * 40, append_record=append, environment_lock=lock,
                               sleep=clock.sleep)
        outcome = run(target, build_up(target.spec, ["network"], emulated=True), svc, UpOptions(yes=True))
        assert outcome.error is None, outcome.error
        record = json.loads(target.store.get(run_key("local", outcome.record.run_id)).body)
    assert len(set(puts)) == 1
    return len(puts), record


def test_an_up_with_a_change_puts_its_record_8_times_and_each_change_is_stored_before_it_is_made(world):
    engine, spec, clock = world
    first, _ = up_network(engine, spec, clock, {})  # creates the stack: its setup gate and creation
    assert first == 9
    engine.declare("network", [FakeResource(r.type, r.name, {**r.inputs, "cidr": "10.1.0.0/16"})
                               for r in engine.desired["network"]], *engine.declared_outputs["network"])
    seen: dict = {}
    changed, record = up_network(engine, spec, clock, seen)
    assert changed == 8 and record["outcome"] == "succeeded"
    assert seen["lock"] == [phases_of(record)[:3] + [("lock", "running")]]
    assert seen["up"] == [phases_of(record)[:8] + [("up", "running")]]
    assert seen["ledger"] == [phases_of(record)[:9] + [("ledger", "running")]]
    seen = {}
    unchanged, record = up_network(engine, spec, clock, seen)
    assert unchanged == 5 and "up" not in seen and [name for name, _ in phases_of(record)] == [
        "account", "engine", "backend", "lock", "pending", "stack", "preview", "gate", "contract", "unlock"]
