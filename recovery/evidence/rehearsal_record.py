"""The rehearsal record: what one `groundctl state rehearse --record` proved, kept in the state bucket.

Stored at `.groundctl/rehearsals/<env>/<newest-first>-<rehearsal_id>--<verdicts>.json` (never a stack's key):
the name starts with the milliseconds left until 2286 (13 digits), so S3's ascending listing returns the
newest record first, and ends with each layer's verdict and its measured RPO, e.g.
`network.proven.0s+cluster.drift.7200s+flux.skipped` (`failed` layers may have none: nothing was chosen).
The measured RPO is what a restore of the chosen version now would lose: 0 when it is the stack's newest
state (a layer untouched for weeks loses nothing), else the age of the oldest state written after it
(`recovery.choice.recovery_point.measured_rpo`). A reader such as `fleet status` learns the latest result per layer,
and the measured RPO, from a listing alone. The record itself holds, per layer: the version (key, S3 version
id, serial, sha256, lineage, time), its age at the rehearsal, the measured RPO and the newer states (how many,
the oldest), the decryption (provider, result, why it
failed), the preview (no change / drift with the changed resources and fields / the engine's error), the
seconds per phase, the references restored first, and the groundctl and Pulumi versions. No property value
and no secret is kept; every text is redacted with the secrets the run knows of.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from typing import Callable, Iterable, Optional

from bootstrap.records.layout import rehearsal_key
from bootstrap.records.runs import iso, new_run_id, redact
from bootstrap.kit.untrusted import Unreadable, items, load_record, number, obj, outcome, prose, text, when, whole
from recovery.evidence.rehearsal_judge import OUTCOMES, LayerResult, run_outcome

SCHEMA = 1
_END_OF_TIME_MS = 9_999_999_999_999  # 2286-11-20, in epoch milliseconds
_VERDICT = re.compile(r"^(?P<layer>[a-z][a-z0-9-]{0,62})\.(?P<outcome>[a-z]+)(?:\.(?P<rpo>\d{1,12})s)?$")
PHASES = ("choose", "references", "restore", "decrypt", "preview")


def rehearsal_record(environment: str, layers: list[LayerResult], *, started: float, finished: float,
                     groundctl_version: str, pulumi_version: Optional[str], rehearsal_id: Optional[str] = None,
                     reason: Optional[str] = None, clock: Callable[[], float] = time.time) -> dict:
    """The record of one rehearsal over `layers`. `reason`: why the run stopped before a verdict (then the
    outcome is `failed`). Pure given the clock."""
    outcome = "failed" if reason else run_outcome(layers)
    return {"kind": "rehearsal", "schema": SCHEMA, "rehearsal_id": rehearsal_id or new_run_id(clock),
            "environment": environment, "at": iso(started), "finished_at": iso(finished),
            "seconds": round(finished - started, 3), "outcome": outcome, "reason": reason,
            "groundctl_version": groundctl_version, "pulumi_version": pulumi_version,
            "layers": [r.to_dict() for r in layers]}


def record_name(record: dict) -> str:
    """Newest first in a listing (to the millisecond), the id, then every layer's verdict and measured RPO."""
    at = datetime.fromisoformat(record["at"].replace("Z", "+00:00")).timestamp()
    verdicts = []
    for layer in record["layers"]:
        rpo = layer.get("rpo_seconds")
        verdicts.append(f"{layer['layer']}.{layer['outcome']}" + (f".{int(rpo)}s" if rpo is not None else ""))
    tail = "+".join(verdicts) or record["outcome"]
    return f"{_END_OF_TIME_MS - round(at * 1000):013d}-{record['rehearsal_id']}--{tail}"


def parse_name(name: str) -> Optional[dict]:
    """What `record_name` put in a name: {at, rehearsal_id, outcome (the run's, as `run_outcome` judges it),
    layers: {layer: {outcome, rpo_seconds}}}; None for another shape. A name holds no reason: the record does.
    Pure."""
    head, sep, tail = name.removesuffix(".json").partition("--")
    inverted, _, rehearsal_id = head.partition("-")
    if not sep or not inverted.isdigit() or len(inverted) != 13 or not rehearsal_id:
        return None
    layers: dict = {}
    outcome = tail
    if tail not in OUTCOMES:  # a run that stopped before any layer names only its outcome
        for part in tail.split("+"):
            m = _VERDICT.match(part)
            if not m or m["outcome"] not in OUTCOMES:
                return None
            layers[m["layer"]] = {"outcome": m["outcome"], "rpo_seconds": int(m["rpo"]) if m["rpo"] else None}
        seen = {v["outcome"] for v in layers.values()}
        outcome = next((o for o in ("failed", "drift", "proven") if o in seen), "skipped")
    return {"rehearsal_id": rehearsal_id, "at": iso((_END_OF_TIME_MS - int(inverted)) / 1000), "outcome": outcome,
            "layers": layers}


def save_rehearsal_record(store, record: dict, secret_values: Iterable[str] = ()) -> str:
    """Write the record into the state bucket under `.groundctl/rehearsals/<env>/`; returns its key."""
    key = rehearsal_key(record["environment"], record_name(record))
    store.put(key, redact(json.dumps(record, indent=2, sort_keys=True), list(secret_values)).encode())
    return key


def _outcome(d: dict, *, explained: tuple[str, ...]) -> str:
    return outcome(d, "outcome", known=OUTCOMES, explained=explained, optional=False)


def _version(v: dict) -> None:
    text(v, "key"), text(v, "version_id", optional=True), text(v, "source", optional=True)
    text(v, "sha256", optional=True), text(v, "lineage", optional=True), when(v, "last_modified", optional=True)
    prose(v, "label")
    whole(v, "serial", optional=True)


def _attempt_parts(d: dict) -> None:
    decrypt, preview = obj(d, "decrypt"), obj(d, "preview")
    if decrypt:
        text(decrypt, "result"), text(decrypt, "provider", optional=True, max_len=500)
        text(decrypt, "kind", optional=True), prose(decrypt, "message"), whole(decrypt, "secrets", optional=True)
        key = obj(decrypt, "key")
        if key:
            text(key, "id", max_len=500), text(key, "arn", optional=True, max_len=500)
            text(key, "state", optional=True), text(key, "deletion_date", optional=True)
    if preview:
        text(preview, "result"), prose(preview, "summary"), prose(preview, "error")
        whole(preview, "changes_total", optional=True)
        for op, n in obj(preview, "counts").items():
            whole({op: n}, op)
        for change in items(preview, "changes", max_items=1000):
            if not isinstance(change, dict):
                raise ValueError("an entry of 'changes' is not an object")
            text(change, "urn", max_len=4096), text(change, "type", optional=True), text(change, "operation")
    for phase, seconds in obj(d, "seconds").items():
        number({phase: seconds}, phase, optional=False, low=0, high=1e7)
    version = obj(d, "version")
    if version:
        _version(version)
    number(d, "age_seconds", low=-1e9, high=1e11)
    text(d, "failed_phase", optional=True), prose(d, "reason")


def load_rehearsal_record(body: Optional[bytes], key: str) -> dict:
    """A stored rehearsal record, checked field by field (it is untrusted input); raises `Unreadable`."""
    d = load_record(body, key, kind="rehearsal record")
    try:
        if d.get("kind") != "rehearsal":
            raise ValueError("field 'kind' is not 'rehearsal'")
        whole(d, "schema", low=1, high=SCHEMA)
        text(d, "rehearsal_id"), text(d, "environment"), when(d, "at"), when(d, "finished_at")
        # A run that stopped before any layer's verdict says why; one with a failed layer lets the layer say it.
        _outcome(d, explained=() if d.get("layers") else ("failed",))
        number(d, "seconds", low=0, high=1e7)
        text(d, "groundctl_version", optional=True), text(d, "pulumi_version", optional=True)
        for layer in items(d, "layers", optional=False, max_items=64):
            if not isinstance(layer, dict):
                raise ValueError("an entry of 'layers' is not an object")
            text(layer, "layer"), _outcome(layer, explained=("failed",)), prose(layer, "skipped_reason")
            _attempt_parts(layer)
            number(layer, "rpo_seconds", low=0, high=1e11)
            newer = obj(layer, "newer")
            if newer:
                whole(newer, "versions", low=0)
                oldest = obj(newer, "oldest")
                if oldest:
                    text(oldest, "version_id", optional=True), when(oldest, "time"), whole(oldest, "serial",
                                                                                          optional=True)
            for other in items(layer, "others", max_items=100):
                if not isinstance(other, dict):
                    raise ValueError("an entry of 'others' is not an object")
                _attempt_parts(other)
            for ref in items(layer, "references", max_items=16):
                if not isinstance(ref, dict):
                    raise ValueError("an entry of 'references' is not an object")
                text(ref, "layer"), prose(ref, "note")
    except ValueError as exc:
        raise Unreadable(key, str(exc)) from None
    return d
