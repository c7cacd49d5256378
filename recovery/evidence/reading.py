"""Reading every environment's records for `fleet status`: a few S3 calls per environment, each environment
on its own deadline, so one stuck endpoint is that environment's row and never the whole fleet's wait.

Per environment, a number of calls that does not grow with its history; 3 in steady state:
- the environment's summary (`recovery.evidence.summary`): its newest rehearsals' names with their failures'
  reasons, and its bucket's settings as the last drift check read them. Taken only while no drift record is newer
  (`recovery.evidence.summaries`); else, or when it is missing, the REHEARSAL_PAGE newest rehearsal records are
  listed (`recovery.evidence.rehearsal_listing`) and the bucket's versioning, lifecycle and (when the spec asks
  for a replica) replication are read (`recovery.evidence.protection`): 3 or 4 calls more;
- a listing of its newest drift records (named newest first, with their verdict: a small page, and one
  more, bounded, only while a run of drifted or failed checks goes on past it, to date its start), and one listing of
  `.groundctl/` from past `drift/` to `locks/`: drill records are named `<drill_id>--<outcome>-<secs>s`, so it
  names every drill with its verdict and recovery time, every layer's ledger head, and whether the lock exists;
- the latest drill of a kind only when it did not pass (its reason, its failed phase), and the lock object only
  when one is listed. A passing drill's or rehearsal's name says all the status shows of it.
Every record's time comes from its name and is checked against when the bucket wrote it (`listing`): a record
from the future is passed over and counted, never the newest evidence.
Names are trusted as far as drift record names already are: what they claim is what a record of that name
was written for; a body that disagrees would be a planted or hand-edited record.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import islice, takewhile
from typing import Any, Callable, Optional

from bootstrap.aws.clients import separate_budget
from bootstrap.kit.errors import GroundctlError
from bootstrap.layers import LAYER_NAMES
from bootstrap.records import layout
from bootstrap.records.clock import iso
from bootstrap.records.drift import load_drift_record, parse_name
from bootstrap.records.lock_status import lock_status
from recovery.evidence import summaries, summary
from recovery.evidence.drill_record import load_drill_record
from recovery.evidence.listing import checked, from_future, present
from recovery.evidence.protection import read_protection
from recovery.evidence.rehearsal_listing import rehearsals

DRILL_KINDS = ("rebuild-cluster", "state-loss")
OUTCOMES = ("passed", "failed", "refused", "unverified", "dry-run")
MAX_DRILLS_PER_KIND = 50   # the trend needs the last few; a planted flood of keys is not carried further
DRIFT_PAGE = 8             # the newest drift records, one small listing: a run of one result usually ends in it
MAX_DRIFT_STREAK = 200     # a run of drifted (or failed) checks is dated this far back; past it, "at least"
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
        return {"drill_id": drill_id, "kind": kind, "outcome": None, "recovery_seconds": None,
                "at": drill_started(drill_id)}
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
    return {"drill_id": drill_id, "kind": kind, "outcome": outcome, "recovery_seconds": secs,
            "at": drill_started(drill_id)}


def drill_started(drill_id: str) -> Optional[str]:
    """A drill id starts with its UTC start time: `20261202T110000Z-…` → `2026-12-02T11:00:00Z`."""
    stamp = drill_id.split("-", 1)[0]
    try:
        return iso(datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc))
    except ValueError:
        return None


def _stem(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(".json")


def _outcome(key: str) -> Optional[str]:
    named = parse_name(_stem(key))
    return named["outcome"] if named else None


def _drift_at(key: str) -> Optional[str]:
    named = parse_name(_stem(key))
    return named["at"] if named else None


def drift_streak(store, env: str, future: Optional[dict] = None) -> tuple[Optional[str], dict, Optional[datetime]]:
    """The newest drift key not from the future, the run of checks with its result when that is drift or a
    failure ({records, at (the oldest one's time), exact (False when the run goes on past MAX_DRIFT_STREAK
    records)}), and the latest time the bucket wrote one of the newest records. One listing of DRIFT_PAGE keys; one more only
    while the run fills it (or records from the future fill it: those go into `future`)."""
    future = {} if future is None else future
    prefix, skip = layout.drift_prefix(env), summary.key(env)
    newest = [(k, m) for k, m in islice(present(((k, s, m) for k, s, m in store.keys(prefix, page_size=DRIFT_PAGE)
                                                 if k != skip), _drift_at, "drift", future), DRIFT_PAGE)]
    keys = [k for k, _m in newest]
    if not keys:
        return None, {}, None
    # The latest the bucket wrote any of them: a record named earlier may have been written later.
    outcome, written = _outcome(keys[0]), max(m for _k, m in newest)
    if outcome not in ("drift", "failed"):
        return keys[0], {}, written
    run = list(takewhile(lambda k: _outcome(k) == outcome, keys))
    ended = len(run) < len(keys) or len(keys) < DRIFT_PAGE
    if not ended:
        older = present(store.keys(prefix, page_size=MAX_DRIFT_STREAK - len(run), start_after=run[-1]),
                        _drift_at, "drift", {})  # passed over, not counted twice
        for key, _m in islice(older, MAX_DRIFT_STREAK - len(run)):
            if _outcome(key) != outcome:
                ended = True
                break
            run.append(key)
        else:
            ended = len(run) < MAX_DRIFT_STREAK
    return keys[0], {"records": len(run), "at": parse_name(_stem(run[-1]))["at"], "exact": ended}, written


def _drill_at(key: str) -> Optional[str]:
    parsed = parse_drill_name(_stem(key))
    return parsed["at"] if parsed else None


def scan(store, env: str) -> dict:
    """Two listings: the newest drift keys (`drift_streak`: drift records are named newest first), then
    `.groundctl/` from past `drift/` to `locks/`: the drill names per kind (oldest first), the ledger heads and
    whether the lock is listed. (Starting the second listing at the drift records would save a call only
    while the drift history is short; it grows by one record per check.) Records from the future are `future`."""
    base = f"{layout.GROUNDCTL}/"
    found: dict = {"drift_key": None, "drills": {}, "heads": {}, "lock": False, "odd_drills": [], "future": {}}
    found["drift_key"], found["drift_streak"], found["drift_written"] = drift_streak(store, env, found["future"])
    for key, _size, modified in store.keys(base, start_after=f"{base}drift/~"):
        rest = key[len(base):].split("/")
        if rest[0] > "locks":
            break
        if rest[0] == "drills" and len(rest) == 3 and rest[1] == env and key.endswith(".json"):
            parsed = parse_drill_name(_stem(key))
            if parsed is None:
                found["odd_drills"].append(key)
            elif not from_future(key, parsed["at"], modified, "drill", found["future"]):
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


def read_environment(src: Source, *, clock: Callable[[], float] = time.time) -> dict:
    """The raw records of one environment (plain data), or the reason it could not be read."""
    spec = src.spec
    raw: dict = {"environment": spec.name, "bucket": spec.backend.bucket, "problems": []}
    if src.skip:
        return raw | {"skipped": src.skip}
    try:
        store, s3 = src.connect() if src.connect else (src.store, src.s3)
        env, replication = spec.name, bool(spec.backend.replica_region)
        fetched = summaries.fetch(store, env, raw["problems"])
        if fetched == summaries.MISSING_BUCKET:
            raw["protection"] = read_protection(s3, spec.backend.bucket, replication=replication)
            return raw
        found = scan(store, env)
        # The summary stands in for the rehearsal listing and the settings only while no drift check ran after it.
        fetched = summaries.current(fetched, found["drift_written"])
        raw["protection"] = ((fetched and summaries.settings(fetched, replication))
                             or read_protection(s3, spec.backend.bucket, replication=replication))
        if not raw["protection"].get("exists", True):
            return raw
        newest = found["drift_key"]
        raw["drift"], raw["drift_streak"] = None, found["drift_streak"]
        if newest:
            named = parse_name(_stem(newest))
            # A failed check's name carries no reason: its record does, so that one is read in full.
            doc, why = ((named, None) if named and named["outcome"] != "failed"
                        else checked(store, newest, load_drift_record))
            raw["drift"] = doc or (named and named | {"reason": f"its record cannot be read ({why})"})
            if doc and named:  # its time is the name's, checked against the bucket's clock; the body's was not
                raw["drift"] = doc | {"at": named["at"]}
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
                    doc, why = checked(store, item["key"], load_drill_record)
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
        raw["rehearsals"] = ((fetched and summaries.rehearsal_part(fetched, env, found["future"]))
                             or rehearsals(store, env, raw["problems"], found["future"]))
        raw["future"] = found["future"]
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
