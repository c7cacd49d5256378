"""`fleet status`: every environment's records, read in parallel, summarized per environment.

Per environment, a small number of S3 calls that does not grow with its drift or drill history:
the newest drift record is the first key of a one-key listing (drift records are named newest
first, with their verdict, so no GET); one listing from the end of the drift records through `locks/` names the drill
records (ids start with the UTC time), every layer's ledger head (no GET) and whether the lock
exists (one GET only then); only the last few drills of each kind are read; the protection is three
bucket-setting reads. (That listing is one page up to 1,000 drill and ledger records.) `read_fleet` runs environments on a bounded thread pool and never lets one
unreadable environment stop the others. Summaries (`summarize`) are pure.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Optional

from bootstrap.errors import GroundctlError
from bootstrap.layers import LAYER_NAMES
from bootstrap.records import layout
from bootstrap.records.drift import load_drift_record, parse_name
from bootstrap.records.locks import lock_status
from bootstrap.untrusted import Unreadable
from recovery.drills.report import summarize_history
from recovery.drills.stored import load_drill_record
from recovery.fleet.protection import judge, read_protection

DRILLS_PER_KIND = 3  # the RTO trend compares the latest drill of a kind with the ones before
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


def _json(store, key: str, load: Callable[[Optional[bytes], str], dict]) -> Optional[dict]:
    """The record at `key` checked by `load` (records are untrusted input), or None when it is unreadable."""
    obj = store.get(key)
    try:
        return load(obj.body if obj is not None else None, key)
    except Unreadable:
        return None


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
        # Drift records are named newest first, verdict last: a one-key listing tells the latest result.
        newest = next((k for k, _s, _m in store.keys(layout.drift_prefix(env), page_size=1)), None)
        raw["drift"] = (parse_name(_stem(newest)) or _json(store, newest, load_drift_record)) if newest else None
        if newest and raw["drift"] is None:
            raw["problems"].append(f"{newest} is not a readable drift record")
        # One listing from the end of the drift records up to the lock: `drills/`, `ledger/` and `locks/`
        # sort together between `drift/` and `quarantine/`, so the pages stop once past `locks/`.
        drill_keys, heads, lock_listed = [], {}, False
        base = f"{layout.GROUNDCTL}/"
        for key, _s, modified in store.keys(base, start_after=layout.drift_prefix("~")):
            rest = key[len(base):].split("/")
            if rest[0] > "locks":
                break
            if rest[0] == "drills" and len(rest) == 3 and rest[1] == env and key.endswith(".json"):
                drill_keys.append(key)
            elif rest[0] == "ledger" and len(rest) == 4 and rest[2] == env and rest[1] in LAYER_NAMES \
                    and _stem(key).isdigit() and int(_stem(key)) >= (heads.get(rest[1]) or {}).get("serial", -1):
                heads[rest[1]] = {"serial": int(_stem(key)),
                                  "at": modified.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")}
            elif key == layout.lock_key(env):
                lock_listed = True
        by_kind: dict[str, list[str]] = {}
        for key in drill_keys:
            kind = drill_kind(_stem(key))
            if kind:
                by_kind.setdefault(kind, []).append(key)
        raw["drill_count"] = len(drill_keys)
        drills = []
        for kind, keys in sorted(by_kind.items()):
            for key in keys[-drills_per_kind:]:
                doc = _json(store, key, load_drill_record)
                if doc is None:
                    raw["problems"].append(f"{key} is not a readable drill record")
                else:
                    drills.append(doc)
        raw["drills"] = drills
        free = {"environment": env, "held": False, "holder": None, "stale": False, "reason": "no groundctl lock is held",
                "heartbeat_age_seconds": None, "unreadable": None, "pulumi_locks": []}
        raw["lock"] = (lock_status(store, env, clock=clock, with_pulumi_locks=False).to_dict()
                       if lock_listed else free)
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
        "drifted_layers": d.get("drifted_layers") or [], "check_id": d.get("check_id")}
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
        worst = next(f["what"] for f in prot["findings"] if f["level"] == prot["verdict"])
        out.append(f"state bucket protection {prot['verdict']} against the RPO: {worst}")
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
