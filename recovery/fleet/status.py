"""`fleet status`: one row per environment from its raw records (`recovery.evidence.reading`), its findings
(`recovery.fleet.findings`), and the fleet's order and counts. Pure: the clock is passed in.

Rows sort by their worst level (critical, warning, info, ok), production first within a level, then by
name; the counts say how many environments are at each level and name the critical ones.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from recovery.fleet.cadence import longest_gap_minutes
from recovery.fleet.findings import CRITICAL, INFO, MANUAL_DRILL_DAYS, OK, RANK, WARNING, find, rto_trend, worst
from recovery.fleet.manifests import drills_allowed, schedules
from recovery.evidence.protection import judge
from recovery.evidence.rehearsals import summarize_rehearsals
from recovery.evidence.reading import DRILL_KINDS, MAX_DRILLS_PER_KIND, drill_kind

# A record may be as old as twice the longest gap between scheduled runs: one missed run is noise, two are not.
MISSED_RUNS = 2


def _ts(text: Optional[str]) -> Optional[float]:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except (ValueError, TypeError):
        return None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _age(text: Optional[str], now: float) -> Optional[float]:
    ts = _ts(text)
    return None if ts is None else round(max(0.0, now - ts), 1)


def freshness(spec) -> dict:
    """How old each kind of record may be for this environment, from the schedules its CronJobs run on."""
    when = schedules(spec)
    gap = longest_gap_minutes(when["drift"])
    drills = {}
    for kind in DRILL_KINDS:
        if kind == "state-loss" and spec.production:
            continue  # the state-loss drill refuses production: nothing is expected of it
        kgap = longest_gap_minutes(when[kind]) if drills_allowed(spec) else None
        drills[kind] = (kgap * 60 * MISSED_RUNS) if kgap else MANUAL_DRILL_DAYS * 86400
    rgap = longest_gap_minutes(when["rehearsal"])
    return {"drift_schedule": when["drift"], "drift_max_age_seconds": gap * 60 * MISSED_RUNS if gap else None,
            "drill_max_age_seconds": drills, "state_loss_layer": spec.fleet.state_loss_layer,
            "rehearsal_schedule": when["rehearsal"],
            "rehearsal_max_age_seconds": rgap * 60 * MISSED_RUNS if rgap else None}


def _drift(d: Optional[dict], streak: dict, now: float) -> Optional[dict]:
    """The last drift check; `streak` dates the run of drifted or failed checks it ends (`reading.drift_streak`)."""
    if d is None:
        return None
    failed = d.get("outcome") == "failed"
    result = "failed" if failed else "drift" if d.get("drift") else "clean"
    return {"result": result, "at": d.get("at"),
            "age_seconds": _age(d.get("at"), now), "drifted_layers": [str(x) for x in d.get("drifted_layers") or []],
            "check_id": d.get("check_id"), "reason": d.get("reason") if failed else None,
            "streak": streak or ({"records": 1, "at": d.get("at"), "exact": True} if result != "clean" else None)}


def _last(doc: dict, now: float) -> dict:
    v = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else {}
    return {"drill_id": doc.get("drill_id"), "kind": doc.get("kind"), "verdict": v.get("outcome"),
            "reason": v.get("reason"), "recovery_seconds": v.get("recovery_seconds"), "rto_seconds": v.get("rto_seconds"),
            "started_at": doc.get("started_at"), "age_seconds": _age(doc.get("started_at"), now)}


def _started(drill_id: str) -> Optional[str]:
    """A drill id starts with its UTC start time: `20261202T110000Z-…` → `2026-12-02T11:00:00Z`."""
    stamp = drill_id.split("-", 1)[0]
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc).isoformat().replace(
            "+00:00", "Z")
    except ValueError:
        return None


def _from_name(name: dict, rto_seconds: float, now: float) -> dict:
    at = _started(name["drill_id"])
    return {"drill_id": name["drill_id"], "kind": name["kind"], "verdict": name["outcome"],
            "reason": name.get("reason"),  # why its record cannot be read, when it cannot (recovery.evidence.reading)
            "recovery_seconds": name["recovery_seconds"], "rto_seconds": rto_seconds, "started_at": at,
            "age_seconds": _age(at, now)}


def _per_kind(raw: dict, rto_seconds: float, now: float) -> tuple[dict, list[dict]]:
    """Per drill kind: the last drill with its verdict, and the RTO trend over passing drills only; and the
    timelines of those last drills (phases when the record was read, else the recovery time from its name)."""
    entries: dict[str, list[tuple[str, dict, Optional[dict]]]] = {}
    for doc in raw.get("drills") or []:
        kind = drill_kind(str(doc.get("drill_id")))
        if kind:
            entries.setdefault(kind, []).append((str(doc.get("drill_id")), _last(doc, now), doc))
    for name in raw.get("drill_names") or []:
        entries.setdefault(name["kind"], []).append((name["drill_id"], _from_name(name, rto_seconds, now), None))
    out, timelines = {}, []
    for kind in DRILL_KINDS:
        history = sorted(entries.get(kind, []), key=lambda e: e[0])
        passing = [float(e[1]["recovery_seconds"]) for e in history
                   if e[1]["verdict"] == "passed" and isinstance(e[1]["recovery_seconds"], (int, float))]
        last = history[-1] if history else None
        out[kind] = {"last": last[1] if last else None, "trend": rto_trend(passing, rto_seconds),
                     "records": len(history), "streak": _streak([e[1] for e in history])}
        if last:
            timelines.append(_timeline(last[2]) if last[2] is not None else
                             {"drill_id": last[0], "kind": kind, "phases": [], "verdict": last[1]["verdict"],
                              "rto_seconds": rto_seconds, "recovery_seconds": last[1]["recovery_seconds"]})
    return out, timelines


_SAME = {"failed": ("failed",), "refused": ("refused", "unverified"), "unverified": ("refused", "unverified")}


def _streak(history: list[dict]) -> Optional[dict]:
    """The run of drills (oldest first) that ends with the last one, when it failed or was not verified:
    {records, at (the run's first start), exact (False when the run reaches back past every drill listed)}."""
    same = _SAME.get(str(history[-1]["verdict"])) if history else None
    if not same:
        return None
    n = next((i for i, d in enumerate(reversed(history)) if d["verdict"] not in same), len(history))
    return {"records": n, "at": history[-n]["started_at"],
            "exact": n < len(history) or len(history) < MAX_DRILLS_PER_KIND}


def summarize(raw: dict, spec, now: float) -> dict:
    """One environment's row: drift, drills per kind, lock, ledger head, last proven restore per layer,
    protection against the RPO, findings."""
    row: dict = {"environment": raw["environment"], "production": bool(spec.production), "bucket": raw["bucket"],
                 "rto_minutes": spec.recovery.rto_minutes, "rpo_minutes": spec.recovery.rpo_minutes,
                 "problems": list(raw.get("problems", []))}
    if raw.get("skipped"):
        return _judged(row | {"skipped": raw["skipped"]}, now)
    if raw.get("error"):
        row["error"] = raw["error"]
    prot = raw.get("protection")
    if prot is not None:
        row["protection"] = prot | judge(prot, rpo_minutes=spec.recovery.rpo_minutes,
                                         retention_days=spec.backend.noncurrent_version_retention_days,
                                         replica_region=spec.backend.replica_region)
        if not prot.get("exists", True):
            return _judged(row | {"note": "the state bucket does not exist: nothing is deployed"}, now)
    if raw.get("error"):
        return _judged(row, now)
    row["freshness"] = freshness(spec)
    row["drift"] = _drift(raw.get("drift"), raw.get("drift_streak") or {}, now)
    per_kind, timelines = _per_kind(raw, spec.recovery.rto_minutes * 60.0, now)
    lasts = [k["last"] for k in per_kind.values() if k["last"]]
    row["drills"] = {"records": raw.get("drill_count", 0), "per_kind": per_kind,
                     "last": max(lasts, key=lambda x: str(x["drill_id"]), default=None), "timelines": timelines}
    lock = raw.get("lock")
    if lock is not None:
        holder = lock.get("holder") or {}
        # The last heartbeat by the bucket's clock (what judged it stale), not the holder's own claim.
        beat = lock.get("heartbeat_age_seconds")
        row["lock"] = {"held": bool(lock.get("held")), "stale": bool(lock.get("stale")),
                       "verdict": lock.get("verdict"),
                       "holder": (f"{holder.get('owner')}@{holder.get('host')} run {holder.get('run_id')}"
                                  if holder else ("unreadable lock object" if lock.get("unreadable") else None)),
                       "reason": lock.get("reason"), "pulumi_locks": len(lock.get("pulumi_locks") or []),
                       "started_at": holder.get("started_at"),
                       "heartbeat_at": (_iso(now - beat) if isinstance(beat, (int, float))
                                        else holder.get("heartbeat_at"))}
    heads = raw.get("ledger")
    if heads is not None:
        newest = max((h["at"] for h in heads.values()), default=None)
        row["ledger"] = {"layers": heads, "head_at": newest, "head_age_seconds": _age(newest, now)}
    fresh = row["freshness"]
    row["rehearsals"] = summarize_rehearsals(raw.get("rehearsals"), heads or {}, now=now,
                                             rpo_seconds=spec.recovery.rpo_minutes * 60.0,
                                             schedule=fresh["rehearsal_schedule"],
                                             max_age_seconds=fresh["rehearsal_max_age_seconds"])
    return _judged(row, now)


def _judged(row: dict, now: float) -> dict:
    row["findings"] = find(row)
    for f in row["findings"]:
        f["since_age_seconds"] = _age(f["since"], now)
    row["level"] = worst(row["findings"])
    return row


def _timeline(record: dict) -> dict:
    """What the HTML page needs to draw a drill's timeline (its phases with their times)."""
    v = record.get("verdict") if isinstance(record.get("verdict"), dict) else {}
    return {"drill_id": record.get("drill_id"), "kind": record.get("kind"), "environment": record.get("environment"),
            "phases": record.get("phases") if isinstance(record.get("phases"), list) else [],
            "rto_seconds": v.get("rto_seconds"), "verdict": v.get("outcome"),
            "recovery_seconds": v.get("recovery_seconds")}


def order(row: dict) -> tuple:
    return RANK[row["level"]], not row["production"], row["environment"]


def fleet_report(raws: list[dict], specs: dict[str, Any], now: float) -> dict:
    rows = sorted((summarize(raw, specs[raw["environment"]], now) for raw in raws), key=order)
    levels = {lvl: sum(1 for r in rows if r["level"] == lvl) for lvl in (CRITICAL, WARNING, INFO, OK)}
    findings = {lvl: sum(1 for r in rows for f in r["findings"] if f["level"] == lvl) for lvl in (CRITICAL, WARNING, INFO)}
    return {"generated_at": _iso(now), "environments": rows,
        "counts": {"environments": len(rows), "by_level": levels, "findings": findings,
                   "needing_attention": levels[CRITICAL] + levels[WARNING],
                   "critical_environments": [r["environment"] for r in rows if r["level"] == CRITICAL],
                   "unreadable": sum(1 for r in rows if r.get("error")),
                   "skipped": sum(1 for r in rows if r.get("skipped"))}}


def failing(report: dict, fail_on: Optional[str]) -> bool:
    """Whether `--fail-on LEVEL` makes the command exit 1: any finding at LEVEL or worse."""
    if fail_on is None:
        return False
    return any(RANK[r["level"]] <= RANK[fail_on] for r in report["environments"])
