"""The newest restore rehearsal records of an environment, from one listing (named newest first with every
layer's verdict: `recovery.evidence.rehearsal_record`); the record a layer last failed in is read for its reason.
What `fleet status` falls back to when the environment's summary cannot stand in for it
(`recovery.evidence.summary`), and what a drift check rebuilds the summary from."""

from __future__ import annotations

from itertools import islice
from typing import Optional

from bootstrap.layers import LAYER_NAMES
from bootstrap.records import layout
from bootstrap.records.clock import iso
from recovery.evidence.listing import checked, present
from recovery.evidence.rehearsal_record import load_rehearsal_record
from recovery.evidence.rehearsal_record import parse_name as parse_rehearsal_name

REHEARSAL_PAGE = 32        # the newest rehearsals: at a daily schedule a month, far past any layer's freshness


def rehearsal_name(prefix: str, key: str) -> Optional[dict]:
    name = key[len(prefix):]
    return parse_rehearsal_name(name) if "/" not in name and name.endswith(".json") and len(name) <= 600 else None


def rehearsals(store, env: str, problems: list[dict], future: Optional[dict] = None) -> dict:
    """The newest REHEARSAL_PAGE rehearsal records by name (newest first), in one listing; the records a layer
    (or a run that stopped before any layer) last failed in are read in full for their reason, at most one per
    layer. {records: [{key, rehearsal_id, at, outcome, layers}], complete (nothing older exists), reasons:
    {key: {layer or "": reason}}}. Names of another shape and unreadable records are `problems`."""
    prefix = layout.rehearsals_prefix(env)
    listing = present(store.keys(prefix, page_size=REHEARSAL_PAGE),
                       lambda k: (rehearsal_name(prefix, k) or {}).get("at"), "rehearsal", {} if future is None else future)
    keys = list(islice(listing, REHEARSAL_PAGE))
    records, odd = [], []
    for key, modified in keys:
        parsed = rehearsal_name(prefix, key)
        (records.append(parsed | {"key": key, "written": iso(modified)}) if parsed else odd.append(key))
    problems += [{"key": k, "why": "is not a rehearsal record name"} for k in odd[:5]]
    failed: dict[str, list[str]] = {}  # key -> the layers whose latest verdict it holds and is `failed`
    seen: set[str] = set()
    for rec in records:
        if not rec["layers"] and rec is records[0] and rec["outcome"] == "failed":
            failed.setdefault(rec["key"], []).append("")
        for layer, verdict in rec["layers"].items():
            if layer not in seen and verdict["outcome"] == "failed":
                failed.setdefault(rec["key"], []).append(layer)
            seen.add(layer)
    reasons: dict[str, dict] = {}
    for key, layers in islice(failed.items(), len(LAYER_NAMES) + 1):
        doc, why = checked(store, key, load_rehearsal_record)
        if doc is None:
            problems.append({"key": key, "why": f"is not a readable rehearsal record ({why})"})
        told = {"": (doc or {}).get("reason")}
        told |= {str(x.get("layer")): x.get("reason") for x in (doc or {}).get("layers", [])}
        unknown = f"its record cannot be read ({why})" if why else "no reason recorded"
        reasons[key] = {layer: told.get(layer) or unknown for layer in layers}
    return {"records": records, "complete": len(keys) < REHEARSAL_PAGE, "reasons": reasons}
