"""Whether the environment lock is held and by whom, whether it is stale, and breaking a stale one.

Whether a lock is stale is a pure decision (`staleness`) over the lock, its age by the bucket's clock,
this host's name and a pid probe: a holder on this host is dead as soon as its process is gone; a holder
elsewhere only when its heartbeat is older than the lock's TTL. `break_lock` removes a stale lock (any
lock, with `force`), keeping the object under `broken_key` first. Pulumi's own stack locks are listed
beside it. The protocol that holds the lock (acquire, heartbeat, release) is `bootstrap.records.locks`.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.errors import Refused
from bootstrap.records import layout
from bootstrap.records.lock_object import LockInfo, broken_key, iso, parse_iso, pid_alive, read_lock
from bootstrap.records.pulumi_locks import PulumiLock, judge, pulumi_hint, read_locks

UNREADABLE_OWNER = "(unreadable lock object)"  # the owner `break_lock` reports for a lock it could not read


@dataclass(frozen=True)
class LockStatus:
    environment: str
    holder: Optional[LockInfo]
    stale: bool
    reason: str
    heartbeat_age_seconds: Optional[float]
    pulumi_locks: tuple[PulumiLock, ...] = ()
    unreadable: Optional[str] = None  # the lock object exists but cannot be parsed

    def to_dict(self) -> dict:
        return {
            "environment": self.environment,
            "held": self.holder is not None or self.unreadable is not None,
            "holder": asdict(self.holder) if self.holder else None,
            "stale": self.stale,
            "reason": self.reason,
            "heartbeat_age_seconds": self.heartbeat_age_seconds,
            "unreadable": self.unreadable,
            "pulumi_locks": [p.to_dict() for p in self.pulumi_locks],
        }


def staleness(info: LockInfo, age: float, this_host: str,
              alive: Callable[[int], bool]) -> tuple[bool, str, float]:
    """(stale, reason, heartbeat age in seconds). Pure apart from the `alive` probe it is given.

    `age` is measured by the bucket's clock (see `heartbeat_age`). A holder on this host whose pid is
    gone is dead at once, whatever the age: a Ctrl-C'd or killed run must not block the next for a TTL.
    """
    if info.host == this_host and not alive(info.pid):
        return True, (f"the holder's pid {info.pid} is gone from this host ({this_host}); its heartbeat is "
                      f"{age:.0f}s old"), age
    if age <= info.ttl_seconds:
        return False, (f"the heartbeat is {age:.0f}s old, within its TTL of {info.ttl_seconds}s: the holder "
                       "is alive"), age
    if info.host == this_host:
        return False, (f"the heartbeat is {age:.0f}s old (TTL {info.ttl_seconds}s), but the holder's pid "
                       f"{info.pid} is still running on this host ({this_host})"), age
    return True, (f"the heartbeat is {age:.0f}s old (TTL {info.ttl_seconds}s); the holder ran on another "
                  f"host ({info.host}), whose processes cannot be checked from here, so the expired "
                  "heartbeat is the evidence"), age


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


def pulumi_locks(store: ObjectStore, environment: str, this_host: Optional[str] = None,
                 alive: Callable[[int], bool] = pid_alive) -> tuple[PulumiLock, ...]:
    """Pulumi's stack locks on every layer of the environment, each with its holder judged."""
    host = this_host or socket.gethostname()
    return tuple(judge(p, host, alive) for p in read_locks(store, environment))


def lock_status(store: ObjectStore, environment: str, *, clock: Callable[[], float] = time.time,
                this_host: Optional[str] = None, alive: Callable[[int], bool] = pid_alive,
                age_of: Callable[..., float] = heartbeat_age, with_pulumi_locks: bool = True) -> LockStatus:
    obj, info, why = read_lock(store, environment)
    # Pulumi's locks cost a listing per layer; a fleet-wide view reads only groundctl's own lock.
    plocks = pulumi_locks(store, environment, this_host, alive) if with_pulumi_locks else ()
    if obj is None:
        return LockStatus(environment, None, False, "no groundctl lock is held", None, plocks)
    if info is None:
        key = layout.lock_key(environment)
        return LockStatus(environment, None, False, f"the lock object {key} cannot be read ({why}); only "
                          f"`groundctl lock break {environment} --force` removes it", None, plocks, unreadable=key)
    age = age_of(obj, info, clock())
    stale, reason, age = staleness(info, age, this_host or socket.gethostname(), alive)
    return LockStatus(environment, info, stale, reason, round(age, 3), plocks)


def break_lock(store: ObjectStore, environment: str, *, force: bool, by: str,
               clock: Callable[[], float] = time.time, this_host: Optional[str] = None,
               alive: Callable[[int], bool] = pid_alive, age_of: Callable[..., float] = heartbeat_age) -> LockInfo:
    """Remove a stale lock (or any lock, with `force`), recording who did it first."""
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
        stale, reason = False, f"the lock object could not be read ({why})"
        info = LockInfo(environment, UNREADABLE_OWNER, "unknown", -1, "unknown", "", "", 0, obj.etag)
    else:
        stale, reason, _age = staleness(info, age_of(obj, info, now), this_host or socket.gethostname(), alive)
    if not stale and not force:
        raise Refused(
            f"Refusing to break the lock on '{environment}' held by {info.holder}: {reason}. Wait for that "
            f"run to finish; if you know it is dead, `groundctl lock break {environment} --force` overrides "
            "this check and is recorded."
        )
    record = {"environment": environment, "broken_by": by, "at": iso(now), "forced": bool(force and not stale),
              "stale": stale, "reason": reason, "lock": {k: v for k, v in asdict(info).items() if k != "etag"},
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
