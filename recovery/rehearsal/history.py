"""What `drill history` shows of the restore rehearsals beside the drills: "can we recover, and how fast" in
one place. Per layer: the last rehearsal and its verdict, the last proven restore and its measured RPO (what
a restore of the proven version would lose), from the names of the newest rehearsal records (the one bounded listing
`fleet status` makes), and the seconds the newest rehearsal spent on the layer (the state half of the RTO),
from that one record. Unreadable records are named, never shown as results.
"""

from __future__ import annotations

import time
from typing import Callable

from bootstrap.kit.untrusted import Unreadable
from recovery.evidence.reading import rehearsals
from recovery.evidence.rehearsals import summarize_rehearsals
from recovery.evidence.rehearsal_record import load_rehearsal_record


def layer_seconds(record: dict) -> dict[str, float]:
    """Per layer of a rehearsal record: the seconds of its phases, summed. Pure."""
    return {str(layer.get("layer")): round(sum((layer.get("seconds") or {}).values()), 3)
            for layer in record.get("layers") or []}


def rehearsal_history(store, environment: str, *, rpo_seconds: float, clock: Callable[[], float] = time.time) -> dict:
    """{records, layers (as `fleet status` has them, each with `seconds`), stopped, rpo_seconds, unreadable}:
    one listing and one read."""
    problems: list[dict] = []
    raw = rehearsals(store, environment, problems)
    summary = summarize_rehearsals(raw, (), rpo_seconds=rpo_seconds, schedule=None, max_age_seconds=None,
                                   now=clock())
    seconds: dict[str, float] = {}
    newest = raw["records"][0] if raw["records"] else None
    if newest:
        key = newest["key"]
        obj = store.get(key)
        try:
            seconds = layer_seconds(load_rehearsal_record(obj.body if obj is not None else None, key))
        except Unreadable as exc:
            problems.append({"key": key, "why": f"is not a readable rehearsal record ({exc.reason})"})
    for layer, x in summary["layers"].items():
        # Only the newest record is read: a layer it did not rehearse shows no time rather than an older one's.
        x["seconds"] = seconds.get(layer) if x["last"] and x["last"]["rehearsal_id"] == newest["rehearsal_id"] else None
    unreadable = list(dict.fromkeys(p["key"] for p in problems))
    return {"records": summary["records"], "layers": summary["layers"], "stopped": summary["stopped"],
            "rpo_seconds": rpo_seconds, "unreadable": unreadable}
