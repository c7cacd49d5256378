"""The drift record: what one `groundctl drift --record` found, kept beside the environment's other records.

Stored at `.groundctl/drift/<env>/<newest-first>-<check_id>.json`: the name starts with the milliseconds
left until 2286 (13 digits), so S3's ascending listing returns the newest record first and `fleet status`
finds it with a one-key listing and one GET, however long the history grows. Only
the per-layer verdicts and counts are kept (no property values), and every message is redacted with
the secret values the run knows of.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Callable, Iterable

from bootstrap.records.layout import drift_key
from bootstrap.records.runs import new_run_id, iso, redact

DRIFTED = ("drift", "not deployed")


def drift_record(environment: str, rows: list[dict], *, clock: Callable[[], float] = time.time,
                 check_id: str | None = None) -> dict:
    """The record of one drift check over `rows` (`groundctl.status.drift_row` dicts). Pure given the clock."""
    layers = [{"layer": r["layer"], "state": r["state"], "summary": r["summary"], "counts": r["counts"],
               "skipped_reason": r.get("skipped_reason"), "changed": len(r.get("changes") or [])} for r in rows]
    drifted = [r["layer"] for r in layers if r["state"] in DRIFTED]
    return {"check_id": check_id or new_run_id(clock), "environment": environment, "at": iso(clock()),
            "drift": bool(drifted), "drifted_layers": drifted, "layers": layers}


_END_OF_TIME_MS = 9_999_999_999_999  # 2286-11-20, in epoch milliseconds


def record_name(check_id: str, at_ts: float) -> str:
    """The record's file name: newest first in a listing (to the millisecond), then the check id."""
    return f"{_END_OF_TIME_MS - round(at_ts * 1000):013d}-{check_id}"


def save_drift_record(store, record: dict, secret_values: Iterable[str] = ()) -> str:
    """Write the record into the state bucket; returns its key."""
    at = datetime.fromisoformat(record["at"].replace("Z", "+00:00")).timestamp()
    key = drift_key(record["environment"], record_name(record["check_id"], at))
    store.put(key, redact(json.dumps(record, indent=2, sort_keys=True), list(secret_values)).encode())
    return key
