"""Whether the environment lock is held and by whom, whether its holder is alive, and breaking a lock
whose holder is gone.

The verdict (alive, dead, unknown or stale: `bootstrap.records.liveness`) is a pure function of the lock,
its heartbeat's age by the bucket's clock, this host's place and what this host shows at the holder's pid
(`bootstrap.records.proc_probe`, passed in as `probe`). `break_lock` removes a dead or stale lock (any lock,
with `force`), keeping the object under `broken_key` first. Pulumi's own stack locks are listed beside it.
The protocol that holds the lock (acquire, heartbeat, release) is `bootstrap.records.locks`.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.kit.errors import Refused
from bootstrap.records import layout
from bootstrap.records import proc_probe
from bootstrap.records.liveness import ALIVE, BREAKABLE, GONE, UNKNOWN, Place, Process, lock_verdict
from bootstrap.records.lock_object import LockInfo, broken_key, iso, parse_iso, read_lock
from bootstrap.records.pulumi_locks import PulumiLock, judge_all, pulumi_hint

Probe = Callable[[int], Process]

UNREADABLE_OWNER = "(unreadable lock object)"  # the owner `break_lock` reports for a lock it could not read


@dataclass(frozen=True)
class LockStatus:
    environment: str
    holder: Optional[LockInfo]
    stale: bool             # dead or stale: broken without --force
    reason: str
    heartbeat_age_seconds: Optional[float]
    pulumi_locks: tuple[PulumiLock, ...] = ()
    unreadable: Optional[str] = None  # the lock object exists but cannot be parsed
    verdict: Optional[str] = None     # alive | dead | unknown | stale, for a readable lock

    def to_dict(self) -> dict:
        return {
            "environment": self.environment,
            "held": self.holder is not None or self.unreadable is not None,
            "holder": asdict(self.holder) if self.holder else None,
            "stale": self.stale,
            "verdict": self.verdict,
            "reason": self.reason,
            "heartbeat_age_seconds": self.heartbeat_age_seconds,
            "unreadable": self.unreadable,
            "pulumi_locks": [p.to_dict() for p in self.pulumi_locks],
        }


def judge_lock(info: LockInfo, age: float, here: Place, probe: Probe) -> tuple[str, str]:
    """(verdict, why) of a lock whose heartbeat is `age` seconds old; the probe is asked only about a holder
    named with this host's name."""
    seen = probe(info.pid) if info.host == here.host else GONE
    return lock_verdict(info.place, info.pid, parse_iso(info.started_at), here, seen, heartbeat_age=age,
                        ttl=info.ttl_seconds)


def heartbeat_age(obj, info: LockInfo, local_now: float) -> float:
    """How long ago the holder last wrote the lock, by the bucket's clock.

    Every heartbeat rewrites the object, so its LastModified against the response's Date header is the
    age as S3 sees it. The holder's own `heartbeat_at` is used only when the store reports no times:
    a holder whose clock runs slow would otherwise look dead while it is alive.
    """
    modified, server = getattr(obj, "last_modified", None), getattr(obj, "server_time", None)
    if modified is not None and server is not None:
        return max(0.0, (server - modified).total_seconds())
    return local_now - parse_iso(info.heartbeat_at)


def pulumi_locks(store: ObjectStore, environment: str, here: Optional[Place] = None,
                 probe: Probe = proc_probe.process) -> tuple[PulumiLock, ...]:
    """Pulumi's stack locks on every layer of the environment, each with its holder judged."""
    return judge_all(store, environment, here=here or proc_probe.here(), probe=probe)


def lock_status(store: ObjectStore, environment: str, *, clock: Callable[[], float] = time.time,
                here: Optional[Place] = None, probe: Probe = proc_probe.process,
                age_of: Callable[..., float] = heartbeat_age, with_pulumi_locks: bool = True) -> LockStatus:
    here = here or proc_probe.here()
    obj, info, why = read_lock(store, environment)
    # Pulumi's locks cost a listing per layer; a fleet-wide view reads only groundctl's own lock.
    plocks = pulumi_locks(store, environment, here, probe) if with_pulumi_locks else ()
    if obj is None:
        return LockStatus(environment, None, False, "no groundctl lock is held", None, plocks)
    if info is None:
        key = layout.lock_key(environment)
        return LockStatus(environment, None, False, f"the lock object {key} cannot be read ({why}); only "
                          f"`groundctl lock break {environment} --force` removes it", None, plocks, unreadable=key)
    age = age_of(obj, info, clock())
    state, reason = judge_lock(info, age, here, probe)
    return LockStatus(environment, info, state in BREAKABLE, reason, round(age, 3), plocks, verdict=state)


def break_lock(store: ObjectStore, environment: str, *, force: bool, by: str,
               clock: Callable[[], float] = time.time, here: Optional[Place] = None,
               probe: Probe = proc_probe.process, age_of: Callable[..., float] = heartbeat_age) -> LockInfo:
    """Remove a lock whose holder is dead or stale (or any lock, with `force`), recording who did it first."""
    obj, info, why = read_lock(store, environment)
    if obj is None:
        raise Refused(f"Environment '{environment}' is not locked by groundctl; there is nothing to break."
                      + pulumi_hint(store, environment))
    now = clock()
    if info is None:
        if not force:
            raise Refused(
                f"The lock object {layout.lock_key(environment)} cannot be read ({why}), so whether its holder is "
                f"alive is unknown. If you are sure no run is active, re-run with `groundctl lock break "
                f"{environment} --force`: the object is kept under {layout.GROUNDCTL}/locks/broken/ first."
            )
        state, reason = UNKNOWN, f"the lock object could not be read ({why})"
        info = LockInfo(environment, UNREADABLE_OWNER, "unknown", -1, "unknown", "", "", 0, etag=obj.etag)
    else:
        state, reason = judge_lock(info, age_of(obj, info, now), here or proc_probe.here(), probe)
    breakable = state in BREAKABLE
    if not breakable and not force:
        raise Refused(
            f"Refusing to break the lock on '{environment}' held by {info.holder}: {reason}. "
            + ("Wait for that run to finish; if you know it is dead" if state == ALIVE else
               "groundctl cannot tell from here whether that run is alive: check on its host; once you know it "
               "is gone")
            + f", `groundctl lock break {environment} --force` overrides this check and is recorded."
        )
    record = {"environment": environment, "broken_by": by, "at": iso(now), "forced": bool(force and not breakable),
              "stale": breakable, "verdict": state, "reason": reason,
              "lock": {k: v for k, v in asdict(info).items() if k != "etag"},
              "lock_body": obj.body.decode("utf-8", "replace")}
    store.put(broken_key(environment, iso(now).replace(":", "").replace("-", "")),
              json.dumps(record, sort_keys=True, indent=2).encode())
    if not store.delete_if_match(layout.lock_key(environment), obj.etag) and store.get(
            layout.lock_key(environment)) is not None:
        raise Refused(
            f"The lock on '{environment}' changed while it was being broken (its holder heartbeat or a new run "
            f"took it), so it was left alone. Run `groundctl lock status {environment}` again."
        )
    return info
