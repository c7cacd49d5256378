"""What needs a person's look, and how urgently: each finding has a level from one rule of `RULES`. Pure.

The rules table is the contract an on-call engineer reads (docs/fleet.md, "The rules table"): a rule's level depends
only on whether the environment is production. `critical` is what to act on now, `warning` what to fix
this week, `info` what is true and expected. A row's level is its worst finding's; `ok` when none.

Each finding also says since when its condition holds (`since`: the first record that shows it, such as the
oldest of the consecutive drifted checks; None where no record dates it) and what to do next
(`recovery.fleet.next_steps`: a command and a runbook).
"""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta
from typing import Optional

from bootstrap.records.liveness import DEAD, STALE_TTLS, UNKNOWN
from recovery.fleet.next_steps import next_step

CRITICAL, WARNING, INFO, OK = "critical", "warning", "info", "ok"
RANK = {CRITICAL: 0, WARNING: 1, INFO: 2, OK: 3}

MANUAL_DRILL_DAYS = 35  # drills run by hand (production without scheduled drills): about monthly, one missed

# rule: (level in production, level elsewhere, when it fires)
RULES: dict[str, tuple[str, str, str]] = {
    "unreadable": (CRITICAL, WARNING, "the environment's records could not be read (endpoint, credentials, its role, "
                   "its deadline): nothing else about it is known"),
    "bucket-missing": (CRITICAL, WARNING, "the state bucket does not exist"),
    "drift": (CRITICAL, WARNING, "the last drift check found drift"),
    "drift-check-failed": (CRITICAL, WARNING, "the last drift check failed (its reason is shown)"),
    "drill-failed": (CRITICAL, CRITICAL, "the last drill of a kind failed"),
    # The lock rules are the lock verdicts of bootstrap/records/liveness.py, judged from where fleet status runs.
    "lock-stale": (CRITICAL, CRITICAL, "a groundctl lock blocks every run and lock break removes it: its holder "
                   f"is proven dead, or its heartbeat is more than {STALE_TTLS} TTLs old (verdict DEAD or STALE)"),
    "protection-fails": (CRITICAL, WARNING, "the state bucket's protection fails the RPO (versioning off, a replica "
                         "the spec asks for is missing)"),
    "rehearsal-failed": (CRITICAL, WARNING, "the last restore rehearsal of a layer failed (or stopped before any "
                         "verdict): its state is not proven restorable"),
    "rehearsal-overdue": (CRITICAL, WARNING, "no restore rehearsal of a deployed layer within twice the longest gap "
                          "of its schedule (or none recorded)"),
    "rpo-exceeded": (CRITICAL, WARNING, "a restore of the last proven version of a layer would lose more than the "
                     "spec's RPO (the measured RPO: the age, when rehearsed, of the oldest state written after that "
                     "version; none when it was the newest)"),
    "drift-stale": (WARNING, WARNING, "the last drift check is older than twice the longest gap of its schedule"),
    "drift-never": (WARNING, WARNING, "no drift check was ever recorded"),
    "drill-overdue": (WARNING, WARNING, "the last drill of a kind is older than twice the longest gap of its schedule "
                      f"(or {MANUAL_DRILL_DAYS} days where drills are not scheduled)"),
    "drill-never": (WARNING, INFO, "no drill of a kind was ever recorded"),
    "drill-unverified": (WARNING, WARNING, "the last drill of a kind was refused or could not be fully verified"),
    "rto-slower": (WARNING, WARNING, "passing drills' recovery time rose beyond its noise (see the trend rule)"),
    "record-unreadable": (WARNING, WARNING, "a drift, drill, rehearsal or lock record in the bucket could not be "
                          "read"),
    "protection-unknown": (WARNING, WARNING, "a bucket setting could not be read with these credentials"),
    "protection-at-risk": (WARNING, INFO, "the state bucket's protection is at risk against the RPO (no replica, "
                           "replication without a time bound, retention shorter than the spec's)"),
    "lock-unknown": (WARNING, WARNING, "a groundctl lock blocks every run and only lock break --force breaks it: its "
                     f"heartbeat is past its TTL but not {STALE_TTLS} TTLs old, and whether its holder runs cannot be "
                     "checked from here (verdict unknown); check on its host, or wait until it is stale"),
    "lock-held": (INFO, INFO, "a live groundctl lock (its heartbeat within its TTL, or its holder seen running): a "
                  "run is in progress"),
    "skipped": (INFO, INFO, "not read: it uses the embedded emulator, whose state lives only while one runs"),
}

# The RTO trend: the latest passing drill against the median of up to TREND_WINDOW passing drills before it.
TREND_WINDOW = 4
TREND_MIN_BEFORE = 3
TREND_FLOOR_SECONDS = 60.0
TREND_RTO_SHARE = 0.05


def finding(rule: str, production: bool, what: str, since: Optional[dict] = None, **facts) -> dict:
    """One finding; `since` is {at, exact} (exact False: the condition is older than the records listed), and
    `facts` what its next step needs (a drill's kind and layer, a record's key)."""
    prod, other, _ = RULES[rule]
    return {"level": prod if production else other, "rule": rule, "what": what,
            "since": (since or {}).get("at"), "since_exact": bool((since or {}).get("exact", True))} | facts


def worst(findings: list[dict]) -> str:
    return min((f["level"] for f in findings), key=RANK.__getitem__, default=OK)


def rto_trend(seconds: list[float], rto_seconds: float) -> dict:
    """The trend of passing drills' recovery times (oldest first): the latest against the median of up to
    TREND_WINDOW passing drills before it. `slower`/`faster` only beyond the noise threshold, the largest of
    - 3 × the run-to-run noise: the robust standard deviation (1.4826 × median absolute deviation) of the
      changes between consecutive earlier runs, divided by √2 (a change holds the noise of two runs). Measured
      on the changes, a steady slowdown is not mistaken for noise, while scatter widens the threshold;
    - 5 % of the RTO, and 60 s: jitter and a minute either way never fire.
    Fewer than TREND_MIN_BEFORE earlier passing drills: not enough data."""
    if len(seconds) < TREND_MIN_BEFORE + 1:
        return {"trend": "not enough data", "recovery_seconds": seconds, "threshold_seconds": None, "baseline": None}
    before, latest = seconds[-TREND_WINDOW - 1:-1], seconds[-1]
    base = statistics.median(before)
    steps = [b - a for a, b in zip(before, before[1:])]
    mid = statistics.median(steps)
    noise = 1.4826 * statistics.median(abs(s - mid) for s in steps) / 2 ** 0.5
    threshold = max(3 * noise, TREND_RTO_SHARE * rto_seconds, TREND_FLOOR_SECONDS)
    trend = "slower" if latest > base + threshold else "faster" if latest < base - threshold else "steady"
    return {"trend": trend, "recovery_seconds": seconds[-TREND_WINDOW - 1:], "threshold_seconds": round(threshold, 1),
            "baseline": round(base, 1)}


def _days(seconds: Optional[float]) -> str:
    if seconds is None:
        return "?"
    return f"{seconds / 3600:.1f} h" if seconds < 172800 else f"{seconds / 86400:.1f} days"


def _at(text: Optional[str], plus: float = 0.0) -> Optional[dict]:
    """{at, exact} for a record's time (plus `plus` seconds: when a record became too old); None when unknown."""
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00")) + timedelta(seconds=plus)
    except (ValueError, TypeError, OverflowError):
        return None
    return {"at": when.isoformat(timespec="seconds").replace("+00:00", "Z"), "exact": True}


def find(row: dict) -> list[dict]:
    """Every finding of one summarized row (`recovery.fleet.status.summarize`), worst first, each with its
    next step."""
    out = _find(row)
    for f in out:
        f["next"] = next_step(f, environment=row["environment"], production=bool(row.get("production")),
                              bucket=row["bucket"])
    return out


def _find(row: dict) -> list[dict]:
    prod = bool(row.get("production"))
    out: list[dict] = []
    if row.get("skipped"):
        return [finding("skipped", prod, row["skipped"])]
    if row.get("error"):
        out.append(finding("unreadable", prod, row["error"]))
    for problem in row.get("problems") or []:
        out.append(finding("record-unreadable", prod, f"{problem['key']} {problem['why']}", key=problem["key"]))
    prot = row.get("protection") or {}
    if prot and not prot.get("exists", True):
        return out + [finding("bucket-missing", prod, f"the state bucket {row['bucket']} does not exist")]
    for f in prot.get("findings") or []:
        rule = {"fails": "protection-fails", "at-risk": "protection-at-risk", "unknown": "protection-unknown"}.get(
            f["level"])
        if rule:
            out.append(finding(rule, prod, f["what"]))
    if row.get("error"):
        return sorted(out, key=lambda f: RANK[f["level"]])
    drift, fresh = row.get("drift"), row.get("freshness") or {}
    if drift is None:
        out.append(finding("drift-never", prod, "no drift check recorded"))
    else:
        streak = drift.get("streak")
        if drift["result"] == "drift":
            out.append(finding("drift", prod, f"drift in {', '.join(drift['drifted_layers']) or 'a layer'}"
                               + _in_a_row(streak, "checks"), streak))
        elif drift["result"] == "failed":
            out.append(finding("drift-check-failed", prod, f"the last drift check failed: {drift.get('reason')}"
                               + _in_a_row(streak, "checks"), streak))
        limit = fresh.get("drift_max_age_seconds")
        if limit and drift.get("age_seconds") is not None and drift["age_seconds"] > limit:
            out.append(finding("drift-stale", prod, f"last drift check {_days(drift['age_seconds'])} ago; its schedule "
                               f"({fresh.get('drift_schedule')}) expects one within {_days(limit)}",
                               _at(drift.get("at"), limit)))
    layer = fresh.get("state_loss_layer")
    for kind, k in ((row.get("drills") or {}).get("per_kind") or {}).items():
        last = k.get("last")
        expected = kind in (fresh.get("drill_max_age_seconds") or {})
        facts = {"kind": kind} | ({"layer": layer} if kind == "state-loss" else {})
        if last is None and expected:
            out.append(finding("drill-never", prod, f"no {kind} drill recorded", **facts))
        if last is None:
            continue
        verdict, streak = last.get("verdict"), k.get("streak")
        if verdict == "failed":
            out.append(finding("drill-failed", prod, f"{kind} drill failed ({last.get('reason')})"
                               + _in_a_row(streak, "drills"), streak, **facts))
        elif verdict in ("refused", "unverified"):
            out.append(finding("drill-unverified", prod, f"{kind} drill {verdict} ({last.get('reason')})"
                               + _in_a_row(streak, "drills"), streak, **facts))
        limit = (fresh.get("drill_max_age_seconds") or {}).get(kind)
        if limit and last.get("age_seconds") is not None and last["age_seconds"] > limit:
            out.append(finding("drill-overdue", prod, f"{kind} drill overdue: the last {_days(last['age_seconds'])} "
                               f"ago, past its period of {_days(limit)}", _at(last.get("started_at"), limit), **facts))
        if (k.get("trend") or {}).get("trend") == "slower":
            t = k["trend"]
            out.append(finding("rto-slower", prod, f"{kind} recovery slower: {t['recovery_seconds'][-1]:.0f} s against "
                               f"a median of {t['baseline']:.0f} s (threshold {t['threshold_seconds']:.0f} s)",
                               _at(last.get("started_at")), **facts))
    out += _rehearsal_findings(row.get("rehearsals"), prod)
    lock = row.get("lock") or {}
    if lock.get("stale"):
        out.append(finding("lock-stale", prod, f"{'dead' if lock.get('verdict') == DEAD else 'stale'} lock held by "
                           f"{lock.get('holder')}: {lock.get('reason')}", _at(lock.get("heartbeat_at"))))
    elif lock.get("verdict") == UNKNOWN:
        out.append(finding("lock-unknown", prod, f"lock held by {lock.get('holder')}, its holder unknown: "
                           f"{lock.get('reason')}", _at(lock.get("heartbeat_at"))))
    elif lock.get("held"):
        out.append(finding("lock-held", prod, f"held by {lock.get('holder')}", _at(lock.get("started_at"))))
    return sorted(out, key=lambda f: RANK[f["level"]])


def _rehearsal_findings(reh: Optional[dict], prod: bool) -> list[dict]:
    """The restore rehearsals' findings (`recovery.evidence.rehearsals`): failed, overdue, over the RPO."""
    if reh is None:
        return []
    out = []
    stopped, limit, rpo = reh.get("stopped"), reh.get("max_age_seconds"), reh["rpo_seconds"]
    if stopped:
        out.append(finding("rehearsal-failed", prod, f"the last rehearsal stopped before any verdict: "
                           f"{stopped.get('reason')}" + _in_a_row(stopped["run"], "rehearsals"), stopped["run"]))
    never = [layer for layer, x in reh["layers"].items() if x["last"] is None]
    if never:
        out.append(finding("rehearsal-overdue", prod, f"no restore rehearsal recorded of {', '.join(never)}"))
    overdue: dict[str, tuple[dict, list[str]]] = {}  # one finding per rehearsal the layers were last seen in
    for layer, x in reh["layers"].items():
        last, proven = x["last"], x["last_proven"]
        if last and last["outcome"] == "failed":
            out.append(finding("rehearsal-failed", prod, f"{layer}: the last rehearsal failed ({last['reason']})"
                               + _in_a_row(x["failed_run"], "rehearsals"), x["failed_run"], layer=layer))
        if last and limit and last["age_seconds"] is not None and last["age_seconds"] > limit:
            overdue.setdefault(last["at"], (last, []))[1].append(layer)
        if proven and x["over_rpo_run"]:
            out.append(finding("rpo-exceeded", prod, f"{layer}: a restore of the last proven version would lose "
                               f"the changes of the last {_days(proven['rpo_seconds'])}, over the RPO of "
                               f"{rpo / 60:.0f} min"
                               + _in_a_row(x["over_rpo_run"], "rehearsals"), x["over_rpo_run"], layer=layer))
    for last, layers in overdue.values():
        out.append(finding("rehearsal-overdue", prod, f"{', '.join(layers)}: last rehearsal "
                           f"{_days(last['age_seconds'])} ago; its schedule ({reh['schedule']}) expects one within "
                           f"{_days(limit)}",
                           _at(last["at"], limit), **({"layer": layers[0]} if len(layers) == 1 else {})))
    return out


def _in_a_row(streak: Optional[dict], noun: str) -> str:
    n = (streak or {}).get("records") or 0
    return f" ({'' if streak.get('exact', True) else 'at least '}{n} {noun} in a row)" if n > 1 else ""
