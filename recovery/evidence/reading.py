"""Reading every environment's records for `fleet status`: a few S3 calls per environment, each environment
on its own deadline, so one stuck endpoint is that environment's row and never the whole fleet's wait.

Per environment, a number of calls that does not grow with its drift or drill history:
- the bucket's versioning and noncurrent-version lifecycle, and its replication when the spec asks for a
  replica (`recovery.evidence.protection`): 2 or 3 calls;
- a listing of its newest drift records (named newest first, with their verdict: a small page, and one
  more, bounded, only while a run of drifted or failed checks goes on past it, to date its start), and one listing of
  `.groundctl/` from past `drift/` to `locks/`: drill records are named `<drill_id>--<outcome>-<secs>s`, so it
  names every drill with its verdict and recovery time, every layer's ledger head, and whether the lock exists;
- a listing of its REHEARSAL_PAGE newest restore rehearsal records (named newest first with every layer's
  verdict and the age of the version it proved: `recovery.evidence.rehearsal_record`);
- the latest drill of a kind only when it did not pass (its reason, its failed phase), the newest rehearsal
  record of a layer only when that layer failed in it (its reason), and the lock object only when one is
  listed. A passing drill's or rehearsal's name says all the status shows of it.
Names are trusted as far as drift record names already are: what they claim is what a record of that name
was written for; a body that disagrees would be a planted or hand-edited record.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from datetime import timezone
from itertools import islice, takewhile
from typing import Any, Callable, Optional

from bootstrap.aws.clients import separate_budget
from bootstrap.kit.errors import GroundctlError
from bootstrap.layers import LAYER_NAMES
from bootstrap.records import layout
from bootstrap.records.drift import load_drift_record, parse_name
from bootstrap.records.lock_status import lock_status
from bootstrap.kit.untrusted import Unreadable
from recovery.evidence.drill_record import load_drill_record
from recovery.evidence.protection import read_protection
from recovery.evidence.rehearsal_record import load_rehearsal_record
from recovery.evidence.rehearsal_record import parse_name as parse_rehearsal_name

DRILL_KINDS = ("rebuild-cluster", "state-loss")
OUTCOMES = ("passed", "failed", "refused", "unverified", "dry-run")
MAX_DRILLS_PER_KIND = 50   # the trend needs the last few; a planted flood of keys is not carried further
DRIFT_PAGE = 8             # the newest drift records, one small listing: a run of one result usually ends in it
MAX_DRIFT_STREAK = 200     # a run of drifted (or failed) checks is dated this far back; past it, "at least"
REHEARSAL_PAGE = 32        # the newest rehearsals: at a daily schedule a month, far past any layer's freshness
OLD_STYLE_READS = 4        # earlier drills whose name has no verdict (written before names carried it) read in full


@dataclass(frozen=True)
class Source:
    """One environment to read: its spec and either its bucket's store and S3 client, or `connect()` that makes
    them (an assumed role's, run on the environment's own thread and deadline); or why it cannot be read."""
    spec: Any
    store: Any = None
    s3: Any = None
    skip: Optional[str] = None
    connect: Optional[Callable[[], tuple[Any, Any]]] = None


def drill_kind(drill_id: str) -> Optional[str]:
    """`20261202T110000Z-rebuild-cluster-3f9a1c` → `rebuild-cluster` (None for an id of another shape)."""
    parts = drill_id.split("-", 1)
    if len(parts) != 2:
        return None
    kind = parts[1].rsplit("-", 1)[0]
    return kind if kind in DRILL_KINDS else None


def parse_drill_name(stem: str) -> Optional[dict]:
    """What `recovery.drills.report.record_name` put in a name: {drill_id, kind, outcome, recovery_seconds};
    an older name (the bare drill id) has outcome None. None for a name of another shape. Pure."""
    drill_id, sep, verdict = stem.partition("--")
    kind = drill_kind(drill_id)
    if kind is None or len(stem) > 200:
        return None
    if not sep:
        return {"drill_id": drill_id, "kind": kind, "outcome": None, "recovery_seconds": None}
    outcome, secs = verdict, None
    for known in OUTCOMES:
        if verdict == known or verdict.startswith(known + "-"):
            outcome, rest = known, verdict[len(known):]
            if rest:
                if not (rest.startswith("-") and rest.endswith("s") and rest[1:-1].isdigit() and len(rest) <= 10):
                    return None
                secs = float(rest[1:-1])
            break
    else:
        return None
    return {"drill_id": drill_id, "kind": kind, "outcome": outcome, "recovery_seconds": secs}


def _json(store, key: str, load: Callable[[Optional[bytes], str], dict]) -> tuple[Optional[dict], Optional[str]]:
    """(the record at `key` checked by `load`, None) or (None, why it is unreadable): every kind alike, so a record
    that fails its checks is a problem named by its key, never a row that shows what it lacks."""
    obj = store.get(key)
    try:
        return load(obj.body if obj is not None else None, key), None
    except Unreadable as exc:
        return None, exc.reason


def _stem(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(".json")


def _outcome(key: str) -> Optional[str]:
    named = parse_name(_stem(key))
    return named["outcome"] if named else None


def drift_streak(store, env: str) -> tuple[Optional[str], dict]:
    """The newest drift key, and the run of checks with its result when that is drift or a failure:
    {records, at (the oldest one's time), exact (False when the run goes on past MAX_DRIFT_STREAK records)}.
    One listing of DRIFT_PAGE keys; one more only while the run fills it."""
    prefix = layout.drift_prefix(env)
    keys = [k for k, _s, _m in islice(store.keys(prefix, page_size=DRIFT_PAGE), DRIFT_PAGE)]
    if not keys:
        return None, {}
    outcome = _outcome(keys[0])
    if outcome not in ("drift", "failed"):
        return keys[0], {}
    run = list(takewhile(lambda k: _outcome(k) == outcome, keys))
    ended = len(run) < len(keys) or len(keys) < DRIFT_PAGE
    if not ended:
        older = store.keys(prefix, page_size=MAX_DRIFT_STREAK - len(run), start_after=run[-1])
        for key, _s, _m in islice(older, MAX_DRIFT_STREAK - len(run)):
            if _outcome(key) != outcome:
                ended = True
                break
            run.append(key)
        else:
            ended = len(run) < MAX_DRIFT_STREAK
    return keys[0], {"records": len(run), "at": parse_name(_stem(run[-1]))["at"], "exact": ended}


def scan(store, env: str) -> dict:
    """Two listings: the newest drift keys (`drift_streak`: drift records are named newest first), then
    `.groundctl/` from past `drift/` to `locks/`: the drill names per kind (oldest first), the ledger heads and
    whether the lock is listed. (Starting the second listing at the drift records would save a call only
    while the drift history is short; it grows by one record per check.)"""
    base = f"{layout.GROUNDCTL}/"
    found: dict = {"drift_key": None, "drills": {}, "heads": {}, "lock": False, "odd_drills": []}
    found["drift_key"], found["drift_streak"] = drift_streak(store, env)
    for key, _size, modified in store.keys(base, start_after=f"{base}drift/~"):
        rest = key[len(base):].split("/")
        if rest[0] > "locks":
            break
        if rest[0] == "drills" and len(rest) == 3 and rest[1] == env and key.endswith(".json"):
            parsed = parse_drill_name(_stem(key))
            if parsed is None:
                found["odd_drills"].append(key)
            else:
                found["drills"].setdefault(parsed["kind"], []).append(parsed | {"key": key})
        elif rest[0] == "ledger" and len(rest) == 4 and rest[2] == env and rest[1] in LAYER_NAMES \
                and _stem(key).isdigit() and int(_stem(key)) >= (found["heads"].get(rest[1]) or {}).get("serial", -1):
            found["heads"][rest[1]] = {"serial": int(_stem(key)),
                                       "at": modified.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")}
        elif key == layout.lock_key(env):
            found["lock"] = True
    return _sorted(found)


def _sorted(found: dict) -> dict:
    # Drill ids start with their UTC start time, so name order is time order.
    # A drill whose finished record and progress checkpoint are both listed is one drill: its finished record.
    found["drills"] = {k: sorted({d["drill_id"]: d for d in sorted(v, key=lambda d: d["outcome"] is not None)}.values(),
                                 key=lambda d: d["drill_id"])[-MAX_DRILLS_PER_KIND:]
                       for k, v in sorted(found["drills"].items())}
    return found


def rehearsals(store, env: str, problems: list[dict]) -> dict:
    """The newest REHEARSAL_PAGE rehearsal records by name (newest first), in one listing; the records a layer
    (or a run that stopped before any layer) last failed in are read in full for their reason, at most one per
    layer. {records: [{key, rehearsal_id, at, outcome, layers}], complete (nothing older exists), reasons:
    {key: {layer or "": reason}}}. Names of another shape and unreadable records are `problems`."""
    prefix = layout.rehearsals_prefix(env)
    keys = [k for k, _s, _m in islice(store.keys(prefix, page_size=REHEARSAL_PAGE), REHEARSAL_PAGE)]
    records, odd = [], []
    for key in keys:
        name = key[len(prefix):]
        parsed = parse_rehearsal_name(name) if "/" not in name and name.endswith(".json") and len(name) <= 600 else None
        (records.append(parsed | {"key": key}) if parsed else odd.append(key))
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
        doc, why = _json(store, key, load_rehearsal_record)
        if doc is None:
            problems.append({"key": key, "why": f"is not a readable rehearsal record ({why})"})
        told = {"": (doc or {}).get("reason")}
        told |= {str(x.get("layer")): x.get("reason") for x in (doc or {}).get("layers", [])}
        unknown = f"its record cannot be read ({why})" if why else "no reason recorded"
        reasons[key] = {layer: told.get(layer) or unknown for layer in layers}
    return {"records": records, "complete": len(keys) < REHEARSAL_PAGE, "reasons": reasons}


def read_environment(src: Source, *, clock: Callable[[], float] = time.time) -> dict:
    """The raw records of one environment (plain data), or the reason it could not be read."""
    spec = src.spec
    raw: dict = {"environment": spec.name, "bucket": spec.backend.bucket, "problems": []}
    if src.skip:
        return raw | {"skipped": src.skip}
    try:
        store, s3 = src.connect() if src.connect else (src.store, src.s3)
        raw["protection"] = read_protection(s3, spec.backend.bucket,
                                            replication=bool(spec.backend.replica_region))
        if not raw["protection"].get("exists", True):
            return raw
        env = spec.name
        found = scan(store, env)
        newest = found["drift_key"]
        raw["drift"], raw["drift_streak"] = None, found["drift_streak"]
        if newest:
            named = parse_name(_stem(newest))
            # A failed check's name carries no reason: its record does, so that one is read in full.
            doc, why = ((named, None) if named and named["outcome"] != "failed"
                        else _json(store, newest, load_drift_record))
            raw["drift"] = doc or (named and named | {"reason": f"its record cannot be read ({why})"})
            if why:
                raw["problems"].append({"key": newest, "why": f"is not a readable drift record ({why})"})
        raw["problems"] += [{"key": k, "why": "is not a drill record name"} for k in found["odd_drills"][:5]]
        raw["drill_count"] = sum(len(v) for v in found["drills"].values())
        drills, names = [], []
        for kind, items in found["drills"].items():
            old_reads = 0
            for i, item in enumerate(reversed(items)):
                # A name holds the verdict and recovery time; the latest is read in full only when it did not
                # pass (its reason, its failed phase), and an earlier one only when its name is silent.
                if (i == 0 and item["outcome"] != "passed") or (item["outcome"] is None and old_reads < OLD_STYLE_READS):
                    old_reads += i > 0
                    doc, why = _json(store, item["key"], load_drill_record)
                    if doc is None:
                        raw["problems"].append({"key": item["key"], "why": f"is not a readable drill record ({why})"})
                        if item["outcome"] is not None:  # its name still says its verdict: never an older one's
                            names.append({k: item[k] for k in ("drill_id", "kind", "outcome", "recovery_seconds")}
                                         | {"reason": f"its record cannot be read ({why})"})
                        continue
                    drills.append(doc)
                else:
                    names.append({k: item[k] for k in ("drill_id", "kind", "outcome", "recovery_seconds")})
        raw["drills"], raw["drill_names"] = drills, names
        raw["lock"] = (lock_status(store, env, clock=clock, with_pulumi_locks=False).to_dict() if found["lock"] else
                       {"environment": env, "held": False, "holder": None, "stale": False, "unreadable": None,
                        "reason": "no groundctl lock is held", "heartbeat_age_seconds": None, "pulumi_locks": []})
        if raw["lock"].get("unreadable"):
            raw["problems"].append({"key": raw["lock"]["unreadable"], "why": "is not a readable lock object"})
        raw["ledger"] = found["heads"]
        raw["rehearsals"] = rehearsals(store, env, raw["problems"])
    except GroundctlError as exc:
        raw["error"] = exc.message
    return raw


def _failed(src: Source, why: str) -> dict:
    return {"environment": src.spec.name, "bucket": src.spec.backend.bucket, "problems": [], "error": why}


def read_fleet(sources: list[Source], *, workers: int = 8, deadline: float = 60.0,
               clock: Callable[[], float] = time.time) -> list[dict]:
    """`read_environment` of every source on `workers` daemon threads, in the sources' order.

    Each environment has `deadline` seconds from when a thread starts on it; past that its row says so and a
    fresh thread takes over the queue. A stuck thread is a daemon left behind: nothing waits to join it,
    not this function and not the interpreter at exit (a ThreadPoolExecutor's threads are joined at exit)."""
    todo: queue.Queue = queue.Queue()
    for i, src in enumerate(sources):
        todo.put(i)
    results: dict[int, dict] = {}
    started: dict[int, float] = {}
    mutex = threading.Condition()

    def work() -> None:
        while True:
            try:
                i = todo.get_nowait()
            except queue.Empty:
                return
            with mutex:
                started[i] = time.monotonic()
            try:
                # A budget of its own: a stuck environment's unanswered calls must not cost the others theirs.
                with separate_budget():
                    row = read_environment(sources[i], clock=clock)
            except Exception as exc:  # noqa: BLE001 - one environment's surprise is its row, not the fleet's end
                row = _failed(sources[i], f"could not be read ({type(exc).__name__})")
            with mutex:
                if i not in results:  # not already given up on
                    results[i] = row
                    mutex.notify_all()
                else:
                    return  # this thread overran its environment: its replacement carries on

    def spawn() -> None:
        threading.Thread(target=work, name="fleet", daemon=True).start()

    for _ in range(min(max(1, workers), len(sources))):
        spawn()
    with mutex:
        while len(results) < len(sources):
            now = time.monotonic()
            overdue = [i for i, t in started.items() if i not in results and now - t >= deadline]
            for i in overdue:
                results[i] = _failed(sources[i], f"was not read within {deadline:.0f} s (its endpoint did not finish "
                                                 "answering); the other environments were read without it")
                spawn()
            waits = [deadline - (now - t) for i, t in started.items() if i not in results]
            mutex.wait(timeout=max(0.05, min(waits, default=1.0)))
    return [results[i] for i in range(len(sources))]
