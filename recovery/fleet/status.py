"""`fleet status`: every environment's records, read in parallel, summarized per environment.

Per environment, a bounded number of S3 calls whatever its history's length: the drift and drill
records are listed (their ids start with the UTC time, so a listing is in time order) and only the
newest drift record and the last few drills of each kind are read; the ledger's heads are the last
keys of their listings (no GET); the lock is one GET plus Pulumi's lock listings; the protection is
three bucket-setting reads. `read_fleet` runs environments on a bounded thread pool and never lets one
unreadable environment stop the others. Summaries (`summarize`) are pure.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from bootstrap.errors import GroundctlError
from bootstrap.layers import LAYER_NAMES
from bootstrap.records import layout
from bootstrap.records.locks import lock_status
from recovery.drills.report import summarize_history
from recovery.fleet.protection import judge, read_protection

DRILLS_PER_KIND = 5
DRILL_KINDS = ("rebuild-cluster", "state-loss")


@dataclass(frozen=True)
class Source:
    """One environment to read: its spec, its state bucket's store and S3 client; or why it cannot be read."""
    spec: Any
    store: Any = None
    s3: Any = None
    skip: Optional[str] = None


def drill_kind(drill_id: str) -> Optional[str]:
    """`20261202T110000Z-rebuild-cluster-3f9a1c` → `rebuild-cluster` (None for an id of another shape)."""
    parts = drill_id.split("-", 1)
    if len(parts) != 2:
        return None
    kind = parts[1].rsplit("-", 1)[0]
    return kind if kind in DRILL_KINDS else None


def _json(store, key: str) -> Optional[dict]:
    obj = store.get(key)
    try:
        doc = json.loads(obj.body) if obj is not None else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _stem(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(".json")


def read_environment(src: Source, *, drills_per_kind: int = DRILLS_PER_KIND, clock: Callable[[], float] = time.time,
                     ) -> dict:
    """The raw records of one environment (plain data), or the reason it could not be read."""
    spec = src.spec
    raw: dict = {"environment": spec.name, "bucket": spec.backend.bucket, "problems": []}
    if src.skip:
        return raw | {"skipped": src.skip}
    try:
        raw["protection"] = read_protection(src.s3, spec.backend.bucket)
        if not raw["protection"].get("exists", True):
            return raw
        store, env = src.store, spec.name
        drift_keys = sorted(k for k, _s, _m in store.keys(layout.drift_prefix(env)) if k.endswith(".json"))
        raw["drift_count"] = len(drift_keys)
        raw["drift"] = _json(store, drift_keys[-1]) if drift_keys else None
        if drift_keys and raw["drift"] is None:
            raw["problems"].append(f"{drift_keys[-1]} is not a readable drift record")
        by_kind: dict[str, list[str]] = {}
        drill_keys = sorted(k for k, _s, _m in store.keys(layout.drills_prefix(env)) if k.endswith(".json"))
        for key in drill_keys:
            kind = drill_kind(_stem(key))
            if kind:
                by_kind.setdefault(kind, []).append(key)
        raw["drill_count"] = len(drill_keys)
        drills = []
        for kind, keys in sorted(by_kind.items()):
            for key in keys[-drills_per_kind:]:
                doc = _json(store, key)
                if doc is None or "drill_id" not in doc:
                    raw["problems"].append(f"{key} is not a readable drill record")
                else:
                    drills.append(doc)
        raw["drills"] = drills
        raw["lock"] = lock_status(store, env, clock=clock).to_dict()
        heads = {}
        for layer in LAYER_NAMES:
            keys = [(k, m) for k, _s, m in store.keys(layout.ledger_prefix(layer, env)) if k.endswith(".json")]
            if keys:
                key, modified = max(keys)
                heads[layer] = {"serial": int(_stem(key)) if _stem(key).isdigit() else None,
                                "at": modified.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")}
        raw["ledger"] = heads
    except GroundctlError as exc:
        raw["error"] = exc.message
    return raw


def read_fleet(sources: list[Source], *, workers: int = 8, drills_per_kind: int = DRILLS_PER_KIND,
               clock: Callable[[], float] = time.time) -> list[dict]:
    """`read_environment` of every source on a pool of `workers` threads, in the sources' order."""
    def one(src: Source) -> dict:
        try:
            return read_environment(src, drills_per_kind=drills_per_kind, clock=clock)
        except Exception as exc:  # noqa: BLE001 - one environment's surprise is its row, not the fleet's end
            return {"environment": src.spec.name, "bucket": src.spec.backend.bucket, "problems": [],
                    "error": f"could not be read ({type(exc).__name__})"}

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="fleet") as pool:
        return list(pool.map(one, sources))


# -- summaries (pure) -----------------------------------------------------------------------------------

def _ts(text: Optional[str]) -> Optional[float]:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _age(text: Optional[str], now: float) -> Optional[float]:
    ts = _ts(text)
    return None if ts is None else round(max(0.0, now - ts), 1)


def summarize(raw: dict, spec, now: float) -> dict:
    """One environment's row: drift, drills with RTO trend, lock, ledger head, protection against RPO."""
    row: dict = {"environment": raw["environment"], "production": bool(spec.production), "bucket": raw["bucket"],
                 "rto_minutes": spec.recovery.rto_minutes, "rpo_minutes": spec.recovery.rpo_minutes,
                 "problems": list(raw.get("problems", []))}
    if raw.get("skipped"):
        return row | {"skipped": raw["skipped"]}
    if raw.get("error"):
        row["error"] = raw["error"]
    prot = raw.get("protection")
    if prot is not None:
        row["protection"] = prot | judge(prot, rpo_minutes=spec.recovery.rpo_minutes,
                                         retention_days=spec.backend.noncurrent_version_retention_days,
                                         replica_region=spec.backend.replica_region)
        if not prot.get("exists", True):
            return row | {"note": "the state bucket does not exist: nothing is deployed"}
    d = raw.get("drift")
    row["drift"] = None if d is None else {
        "result": "drift" if d.get("drift") else "clean", "at": d.get("at"), "age_seconds": _age(d.get("at"), now),
        "drifted_layers": d.get("drifted_layers") or [], "check_id": d.get("check_id"),
        "records": raw.get("drift_count", 0)}
    drills = raw.get("drills") or []
    if drills or "drills" in raw:
        history = summarize_history(drills, last_n=DRILLS_PER_KIND)
        last = max(drills, key=lambda r: str(r.get("started_at")), default=None)
        row["drills"] = {"records": raw.get("drill_count", 0), "trends": history["trends"],
                         "last": None if last is None else {
                             "drill_id": last.get("drill_id"), "kind": last.get("kind"),
                             "verdict": (last.get("verdict") or {}).get("outcome"),
                             "reason": (last.get("verdict") or {}).get("reason"),
                             "recovery_seconds": (last.get("verdict") or {}).get("recovery_seconds"),
                             "rto_seconds": (last.get("verdict") or {}).get("rto_seconds"),
                             "started_at": last.get("started_at"), "age_seconds": _age(last.get("started_at"), now)},
                         "timelines": [_timeline(r) for r in _latest_per_kind(drills)]}
    lock = raw.get("lock")
    if lock is not None:
        holder = lock.get("holder") or {}
        row["lock"] = {"held": bool(lock.get("held")), "stale": bool(lock.get("stale")),
                       "holder": (f"{holder.get('owner')}@{holder.get('host')} run {holder.get('run_id')}"
                                  if holder else ("unreadable lock object" if lock.get("unreadable") else None)),
                       "reason": lock.get("reason"), "pulumi_locks": len(lock.get("pulumi_locks") or [])}
    heads = raw.get("ledger")
    if heads is not None:
        newest = max((h["at"] for h in heads.values()), default=None)
        row["ledger"] = {"layers": heads, "head_at": newest, "head_age_seconds": _age(newest, now)}
    return row


def _latest_per_kind(drills: list[dict]) -> list[dict]:
    latest: dict[str, dict] = {}
    for r in sorted(drills, key=lambda r: str(r.get("started_at"))):
        latest[str(r.get("kind"))] = r
    return [latest[k] for k in sorted(latest)]


def _timeline(record: dict) -> dict:
    """What the HTML page needs to draw a drill's timeline (its phases with their times)."""
    return {"drill_id": record.get("drill_id"), "kind": record.get("kind"), "environment": record.get("environment"),
            "phases": record.get("phases") or [], "rto_seconds": (record.get("verdict") or {}).get("rto_seconds"),
            "verdict": (record.get("verdict") or {}).get("outcome")}


def attention(row: dict) -> list[str]:
    """Why an environment needs a person's look (empty when it does not). Pure."""
    out = []
    if row.get("error"):
        out.append(row["error"])
    drift = row.get("drift")
    if drift and drift["result"] == "drift":
        out.append(f"drift in {', '.join(drift['drifted_layers'])}")
    last = (row.get("drills") or {}).get("last")
    if last and last["verdict"] not in ("passed", "dry-run", None):
        out.append(f"last drill {last['kind']} {last['verdict']} ({last['reason']})")
    for kind, t in ((row.get("drills") or {}).get("trends") or {}).items():
        if t["trend"] == "worsening":
            out.append(f"{kind} recovery is getting slower")
    lock = row.get("lock") or {}
    if lock.get("stale"):
        out.append("stale lock")
    prot = row.get("protection") or {}
    if prot.get("verdict") in ("fails", "at-risk"):
        out.append(f"state bucket protection {prot['verdict']} against the RPO")
    return out


def fleet_report(raws: list[dict], specs: dict[str, Any], now: float) -> dict:
    rows = []
    for raw in raws:
        row = summarize(raw, specs[raw["environment"]], now)
        row["attention"] = attention(row)
        rows.append(row)
    return {"generated_at": datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds").replace(
        "+00:00", "Z"), "environments": rows,
        "counts": {"environments": len(rows), "needing_attention": sum(1 for r in rows if r["attention"]),
                   "skipped": sum(1 for r in rows if r.get("skipped"))}}
