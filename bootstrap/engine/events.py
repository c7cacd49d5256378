"""Translating Pulumi engine events and results into groundctl values.

Pure functions over `pulumi.automation.events` objects (or their JSON form, as the engine writes
them to an event log): no CLI, no I/O, so every rule here is tested without a `pulumi` binary.
Only names, types, operations and property *keys* cross this line; input and output *values*
never do, which is what keeps secrets out of plans.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional

from pulumi.automation import events as ev

from bootstrap.planning.plan import DELETED_MARK, Plan, ResourceChange

# A replacement is announced as up to three steps on one URN; the plan shows it once, as Pulumi's
# own display does.
REPLACE_STEPS = frozenset({"replace", "create-replacement", "delete-replaced"})

# When one URN has several steps (a refresh step then an update during `preview --refresh`, the
# parts of a replacement), the most consequential one names the change.
_PRECEDENCE = {
    "replace": 90, "delete": 80, "discard": 75, "remove-pending-replace": 74, "update": 70,
    "create": 60, "import": 55, "import-replacement": 55, "refresh": 40, "read": 20,
    "read-replacement": 20, "same": 0,
}

def _op(value: Any) -> str:
    return value.value if isinstance(value, ev.OpType) else str(value or "")


def coerce_event(event: Any) -> ev.EngineEvent:
    """An `EngineEvent`, from the object itself or from its JSON form."""
    return ev.EngineEvent.from_json(event) if isinstance(event, dict) else event


def _changed_keys(old: Optional[Mapping[str, Any]], new: Optional[Mapping[str, Any]]) -> tuple[str, ...]:
    """Keys whose values differ; compares values, returns only names."""
    old, new = old or {}, new or {}
    return tuple(sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k)))


def _changed_input_keys(md: ev.StepEventMetadata) -> tuple[str, ...]:
    return _changed_keys(md.old.inputs if md.old else None, md.new.inputs if md.new else None)


def _changed_output_keys(md: ev.StepEventMetadata) -> tuple[str, ...]:
    return _changed_keys(md.old.outputs if md.old else None, md.new.outputs if md.new else None)


def _step_keys(md: ev.StepEventMetadata) -> set[str]:
    keys = set(md.diffs or ()) | set(md.keys or ())
    if not keys and md.detailed_diff:
        keys = set(md.detailed_diff)
    return keys


def _resource(md: ev.StepEventMetadata, op: str, keys: set[str]) -> ResourceChange:
    rtype = md.type or (md.new.type if md.new else "") or (md.old.type if md.old else "")
    protected = bool((md.new and md.new.protect) or (md.old and md.old.protect))
    return ResourceChange(md.urn, rtype, op, tuple(sorted(keys)), protected)


def change_from_step(md: ev.StepEventMetadata) -> ResourceChange:
    """One engine step, from its pre-event, as a ResourceChange (before folding several steps on one URN).

    A refresh step's pre-event says nothing yet (Pulumi sends new = old and no diff): what it found comes
    with its outputs event, read by `refresh_outcome`.
    """
    op = _op(md.op)
    keys = _step_keys(md)
    if op in REPLACE_STEPS:
        op = "replace"
    elif op == "refresh":
        if md.new is None and md.old is not None:
            keys = {DELETED_MARK}
        elif not keys:
            keys = set(_changed_input_keys(md))
        if not keys:
            op = "same"
    return _resource(md, op, keys)


# What a refresh found, as Pulumi reports it in the step's outputs event: `refresh` during a
# `preview --refresh`, or the refresh's result op (RefreshStep.ResultOp: update, delete or same) when
# the operation itself is a refresh (pkg/engine/update.go, OnResourceStepPost).
REFRESH_RESULT_OPS = frozenset({"refresh", "update", "delete", "same"})


def refresh_outcome(md: ev.StepEventMetadata) -> ResourceChange:
    """The drift one refresh step found, outside Pulumi: `refresh` with the changed keys (DELETED_MARK
    when the resource is gone), or `same`.

    Drift is a change to what the program declares. Pulumi diffs the refreshed resource against the
    program's last inputs with the provider's own Diff and sends that diff with this event
    (RefreshStep.Apply, pkg/resource/deploy/step.go); a provider that reads inputs back (the Kubernetes
    provider prunes the live object to the declared fields) also shows it as changed inputs. Outputs
    alone change whenever the server writes what it owns (a Kubernetes object's status, resourceVersion,
    managedFields): that is not drift, see `changes_from_events`.
    """
    op = _op(md.op)
    if op == "same":
        return _resource(md, "same", set())
    if op == "delete" or (md.new is None and md.old is not None):
        return _resource(md, "refresh", {DELETED_MARK})
    keys = _step_keys(md) or set(_changed_input_keys(md))
    return _resource(md, "refresh" if keys else "same", keys)


def _fold(a: ResourceChange, b: ResourceChange) -> ResourceChange:
    op = a.operation if _PRECEDENCE.get(a.operation, 50) >= _PRECEDENCE.get(b.operation, 50) else b.operation
    keys = tuple(sorted(set(a.diff_keys) | set(b.diff_keys))) if op != "same" else ()
    return ResourceChange(a.urn, a.type or b.type, op, keys, a.protected or b.protected)


def changes_from_events(events: Iterable[Any]) -> tuple[ResourceChange, ...]:
    """Every resource a preview touched, once per URN, in the order the engine first named it.

    Pre-events name the steps; a refresh step's outputs event adds what the refresh found, so drift
    (a deletion included) shows even where the program's own step for that URN is `same` or `create`.
    """
    by_urn: dict[str, ResourceChange] = {}
    refreshed: set[str] = set()
    outputs_only: dict[str, tuple[str, ...]] = {}
    for raw in events:
        event = coerce_event(raw)
        pre, post = event.resource_pre_event, event.res_outputs_event
        if pre is not None and pre.metadata is not None and pre.metadata.urn:
            change = change_from_step(pre.metadata)
            if _op(pre.metadata.op) == "refresh":
                refreshed.add(change.urn)
        elif post is not None and post.metadata is not None and post.metadata.urn in refreshed \
                and _op(post.metadata.op) in REFRESH_RESULT_OPS:
            refreshed.discard(post.metadata.urn)  # the program's own step on this URN comes after
            change = refresh_outcome(post.metadata)
            if change.operation == "same":
                outputs_only[change.urn] = _changed_output_keys(post.metadata)
        else:
            continue
        seen = by_urn.get(change.urn)
        by_urn[change.urn] = change if seen is None else _fold(seen, change)
    return tuple(_name_unnamed(c, outputs_only.get(c.urn, ())) for c in by_urn.values())


def _name_unnamed(change: ResourceChange, output_keys: tuple[str, ...]) -> ResourceChange:
    """A refresh that changed only outputs is drift only when the program's own step then changes the
    resource, i.e. the provider judged the live resource no longer what the program declares. A provider
    that names no keys (a dynamic provider answers DIFF_SOME with none) leaves that step unnamed: the
    refreshed outputs name it."""
    if change.operation in ("update", "replace") and not change.diff_keys and output_keys:
        return ResourceChange(change.urn, change.type, change.operation, output_keys, change.protected)
    return change


def changed_fields(events: Iterable[Any]) -> dict[str, set[str]]:
    """Per URN, the fields a preview's steps change: the provider's diff, and the inputs whose values differ
    (a dynamic provider's diff names none). Names only: what a refusal of Pulumi's may name."""
    found: dict[str, set[str]] = {}
    for raw in events:
        pre = coerce_event(raw).resource_pre_event
        if pre is not None and pre.metadata is not None and pre.metadata.urn:
            found.setdefault(pre.metadata.urn, set()).update(_step_keys(pre.metadata),
                                                              _changed_input_keys(pre.metadata))
    return found


def plan_from_events(layer: str, environment: str, events: Iterable[Any]) -> Plan:
    return Plan(layer, environment, changes_from_events(events))


def counts_from_summary(resource_changes: Optional[Mapping[Any, int]]) -> dict[str, int]:
    """Pulumi's per-operation counts (keys may be OpType or str) as a plain sorted dict."""
    return dict(sorted((_op(k), int(v)) for k, v in (resource_changes or {}).items() if v))


def root_outputs(events: Iterable[Any]) -> Optional[dict]:
    """The outputs an update's root stack resource left, from its outputs event (emitted for a `same` root
    too), secret values blinded as Pulumi's secret objects; None when no event says."""
    found = None
    for raw in events:
        item = coerce_event(raw).res_outputs_event
        md = item.metadata if item is not None else None
        if md is not None and md.type == "pulumi:pulumi:Stack" and md.new is not None:
            found = dict(md.new.outputs or {})
    return found


def summary_changes(events: Iterable[Any]) -> Optional[Mapping[Any, int]]:
    """The per-operation counts of an operation's summary event (what `stack history` records for it), or
    None when it wrote none."""
    found = None
    for raw in events:
        summary = coerce_event(raw).summary_event
        if summary is not None:
            found = summary.resource_changes or {}
    return found


def progress_message(raw: Any) -> Optional[str]:
    """A short line for the operator ("vpc: create", "vpc: create done"), or None to stay quiet.

    Diagnostic events are never echoed: their text comes from providers and programs and may
    carry values.
    """
    event = coerce_event(raw)
    for attr, suffix in (("resource_pre_event", ""), ("res_outputs_event", " done"),
                         ("res_op_failed_event", " failed")):
        item = getattr(event, attr)
        if item is None or item.metadata is None:
            continue
        md = item.metadata
        op = _op(md.op)
        if op == "same" or (op == "refresh" and suffix == ""):
            return None
        name = md.urn.rsplit("::", 1)[-1] if md.urn else "?"
        return f"{name}: {op}{suffix}"
    if event.summary_event is not None:
        counts = counts_from_summary(event.summary_event.resource_changes)
        return "done: " + (", ".join(f"{n} {op}" for op, n in counts.items()) or "no changes")
    return None
