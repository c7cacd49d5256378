"""`fleet status`'s "last proven restore": per layer, what the newest restore rehearsals say. Pure.

From the rehearsal records' names alone (`recovery.evidence.reading.rehearsals`, newest first): per layer the
last rehearsal (its verdict, when, the reason when it failed), the last one that proved the layer restorable
(`proven`, or `drift`: restorable, the cloud differs) with its measured RPO (what a restore of the version it
proved would lose: 0 when that was the stack's newest state, else the age of the oldest newer one), and the
runs that date a finding: the failed rehearsals in a row, the proven restores in a row whose measured RPO
was over the spec's. A run that stopped before any layer's verdict is the environment's, not a
layer's. The layers are those the ledger shows deployed and those the records name.
"""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Optional

from bootstrap.layers import LAYER_NAMES

RESTORABLE = ("proven", "drift")


def _age(at: Optional[str], now: float) -> Optional[float]:
    try:
        return round(max(0.0, now - datetime.fromisoformat(str(at).replace("Z", "+00:00")).timestamp()), 1)
    except (ValueError, TypeError):
        return None


def _run(history: list[tuple[dict, dict]], holds: Callable[[dict], bool], complete: bool) -> Optional[dict]:
    """The records (newest first) for which `holds` is true, counted from the newest: {records, at (the
    oldest's time), exact (False when the run goes on past the records listed)}; None when the newest fails it."""
    n = next((i for i, (_rec, v) in enumerate(history) if not holds(v)), len(history))
    if not n:
        return None
    return {"records": n, "at": history[n - 1][0]["at"], "exact": n < len(history) or complete}


def _entry(rec: dict, verdict: dict, now: float, reason: Optional[str] = None) -> dict:
    return {"rehearsal_id": rec["rehearsal_id"], "at": rec["at"], "age_seconds": _age(rec["at"], now),
            "outcome": verdict["outcome"], "rpo_seconds": verdict.get("rpo_seconds"), "reason": reason}


def summarize_rehearsals(raw: Optional[dict], deployed, *, rpo_seconds: float, schedule: Optional[str],
                         max_age_seconds: Optional[float], now: float) -> dict:
    """The environment's rehearsals as `fleet status` shows and judges them."""
    raw = raw or {"records": [], "complete": True, "reasons": {}}
    records, complete, reasons = raw["records"], raw["complete"], raw["reasons"]
    # A name in the bucket may claim any layer; only groundctl's layers are shown.
    named = {layer for rec in records for layer in rec["layers"] if layer in LAYER_NAMES}
    order = {name: i for i, name in enumerate(LAYER_NAMES)}
    layers = {}
    for layer in sorted(set(deployed) | named, key=lambda x: (order.get(x, len(order)), x)):
        history = [(rec, rec["layers"][layer]) for rec in records if layer in rec["layers"]]
        restorable = [(rec, v) for rec, v in history if v["outcome"] in RESTORABLE]
        last = history[0] if history else None
        proven = restorable[0] if restorable else None
        layers[layer] = {
            "last": last and _entry(*last, now, reasons.get(last[0]["key"], {}).get(layer)),
            "last_proven": proven and _entry(*proven, now),
            "failed_run": _run(history, lambda v: v["outcome"] == "failed", complete),
            "over_rpo_run": _run(restorable, lambda v: (v.get("rpo_seconds") or 0) > rpo_seconds, complete),
        }
    stopped = None
    if records and not records[0]["layers"] and records[0]["outcome"] == "failed":
        head = [(rec, {"outcome": "failed" if not rec["layers"] and rec["outcome"] == "failed" else "ran"})
                for rec in records]
        stopped = {"at": records[0]["at"], "reason": reasons.get(records[0]["key"], {}).get(""),
                   "run": _run(head, lambda v: v["outcome"] == "failed", complete)}
    return {"records": len(records), "complete": complete, "schedule": schedule, "rpo_seconds": rpo_seconds,
            "max_age_seconds": max_age_seconds, "layers": layers, "stopped": stopped}
