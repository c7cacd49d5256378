"""The drift record: what one `groundctl drift --record` found, kept beside the environment's other records.

Stored at `.groundctl/drift/<env>/<newest-first>-<check_id>--<verdict>.json`: the name starts with the
milliseconds left until 2286 (13 digits), so S3's ascending listing returns the newest record first,
and ends with the verdict (`clean`, `drift-<layers>` or `failed`), so `fleet status` learns the latest
result from a one-key listing alone, however long the history grows. Only
the per-layer verdicts and counts are kept (no property values), and every message is redacted with
the secret values the run knows of.

A check that could not finish (a preview that failed, the engine missing) is recorded too, so a
scheduled run that failed is seen as failed: `outcome: "failed"`, its `reason` (the error's one
paragraph), `drift: null` (unknown) and the layers it did check. Every record has `outcome`
(`clean` | `drift` | `failed`); records written before it have none, and their `drift` says which.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Callable, Iterable, Optional

from bootstrap.records.layout import drift_key
from bootstrap.records.runs import new_run_id, iso, redact
from bootstrap.kit.untrusted import Unreadable, flag, items, load_record, obj, outcome, prose, text, when, whole

DRIFTED = ("drift", "not deployed")


def drift_row(plan) -> dict:
    """What a refresh preview's `Plan` says about drift: the layer's state (`clean`, `drift`, `not deployed`,
    `skipped`), a one-line summary, the counts and the changed resources with the fields that differ. Pure.
    The drift check and the restore rehearsal judge their previews with it."""
    from bootstrap.planning.summary import plan_summary
    from bootstrap.planning.plan import DELETED_MARK, NO_CHANGE_OPS

    if plan.not_deployed:
        state = "not deployed"
    elif plan.skipped_reason:
        state = "skipped"
    elif not plan.has_changes:
        state = "clean"
    elif all(c.operation == "create" and DELETED_MARK not in c.diff_keys for c in plan.changes):
        state = "not deployed"  # nothing of it exists: that differs from its declaration too
    else:
        state = "drift"
    changed = [{"urn": c.urn, "type": c.type, "operation": c.operation, "diff_keys": list(c.diff_keys)}
               for c in plan.changes if c.operation not in NO_CHANGE_OPS]
    return {"layer": plan.layer, "state": state, "summary": plan_summary(plan), "counts": plan.counts,
            "skipped_reason": plan.skipped_reason, "changes": changed}


def drift_record(environment: str, rows: list[dict], *, clock: Callable[[], float] = time.time,
                 check_id: str | None = None) -> dict:
    """The record of one drift check over `rows` (`drift_row` dicts). Pure given the clock."""
    layers = [{"layer": r["layer"], "state": r["state"], "summary": r["summary"], "counts": r["counts"],
               "skipped_reason": r.get("skipped_reason"), "changed": len(r.get("changes") or [])} for r in rows]
    drifted = [r["layer"] for r in layers if r["state"] in DRIFTED]
    return {"check_id": check_id or new_run_id(clock), "environment": environment, "at": iso(clock()),
            "outcome": "drift" if drifted else "clean", "drift": bool(drifted), "drifted_layers": drifted,
            "layers": layers}


def failed_drift_record(environment: str, reason: str, rows: list[dict] = (), *,
                        clock: Callable[[], float] = time.time, check_id: str | None = None) -> dict:
    """The record of a drift check that could not finish: why (`reason`, one paragraph), and the layers it
    checked before it stopped. Whether the environment drifted is unknown (`drift` None). Pure given the clock."""
    done = drift_record(environment, list(rows), clock=clock, check_id=check_id)
    return done | {"outcome": "failed", "reason": reason, "drift": None}


_END_OF_TIME_MS = 9_999_999_999_999  # 2286-11-20, in epoch milliseconds


def record_name(record: dict) -> str:
    """The record's file name: newest first in a listing (to the millisecond), the check id, then the verdict
    (`clean`, or `drift-` and the drifted layers joined by `+`), so a listing alone tells the latest result."""
    at = datetime.fromisoformat(record["at"].replace("Z", "+00:00")).timestamp()
    if record.get("outcome") == "failed":
        verdict = "failed"
    else:
        verdict = "drift-" + "+".join(record["drifted_layers"]) if record["drift"] else "clean"
    return f"{_END_OF_TIME_MS - round(at * 1000):013d}-{record['check_id']}--{verdict}"


def parse_name(name: str) -> Optional[dict]:
    """What `record_name` put in a name: {at, check_id, outcome, drift, drifted_layers}; None for another shape.
    A failed check's name holds no reason: the record itself does. Pure."""
    head, sep, verdict = name.partition("--")
    inverted, _, check_id = head.partition("-")
    if not sep or not inverted.isdigit() or len(inverted) != 13 or not check_id:
        return None
    if verdict not in ("clean", "failed") and not verdict.startswith("drift-"):
        return None
    at = (_END_OF_TIME_MS - int(inverted)) / 1000
    if verdict == "failed":
        return {"check_id": check_id, "at": iso(at), "outcome": "failed", "drift": None, "drifted_layers": []}
    layers = verdict[len("drift-"):].split("+") if verdict != "clean" else []
    return {"check_id": check_id, "at": iso(at), "outcome": "drift" if layers else "clean", "drift": bool(layers),
            "drifted_layers": layers}


def save_drift_record(store, record: dict, secret_values: Iterable[str] = ()) -> str:
    """Write the record into the state bucket; returns its key."""
    key = drift_key(record["environment"], record_name(record))
    store.put(key, redact(json.dumps(record, indent=2, sort_keys=True), list(secret_values)).encode())
    return key


def load_drift_record(body: Optional[bytes], key: str) -> dict:
    """A stored drift record, checked field by field (it is untrusted input); raises `Unreadable` naming `key`."""
    d = load_record(body, key, kind="drift record")
    try:
        text(d, "check_id"), text(d, "environment"), when(d, "at")
        # A check that could not finish knows no verdict: its `drift` is null and its `reason` says why.
        if outcome(d, "outcome", known=("clean", "drift", "failed"), explained=("failed",)) == "failed":
            if d.get("drift") is not None:
                flag(d, "drift")
        else:
            flag(d, "drift")
        for name in items(d, "drifted_layers", optional=False):
            text({"drifted_layers": name}, "drifted_layers")
        for layer in items(d, "layers"):
            if not isinstance(layer, dict):
                raise ValueError("an entry of 'layers' is not an object")
            text(layer, "layer"), text(layer, "state"), prose(layer, "summary"), prose(layer, "skipped_reason")
            whole(layer, "changed", optional=True)
            for op, n in obj(layer, "counts").items():
                whole({op: n}, op)
    except ValueError as exc:
        raise Unreadable(key, str(exc)) from None
    return d
