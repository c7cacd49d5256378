"""The environment lock: one run at a time per environment, held in the state bucket.

`.groundctl/locks/<env>.json` is created with a conditional write (If-None-Match: *), refreshed by
a heartbeat thread with If-Match on the ETag it last wrote, and deleted on release only if it is
still ours. Whether a lock is stale is a pure decision (`staleness`) over the lock, its age by the
bucket's clock, this host's name and a pid probe: a holder on this host is dead as soon as its process
is gone (and the next run on this host takes such a lock over at once, recording it); a holder elsewhere
only when its heartbeat is older than the TTL (`default_ttl`: 2 minutes at the default call deadline).
Pulumi's own stack locks are listed beside it.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Callable, Optional

from bootstrap.records import layout
from bootstrap.interrupts import shielded
from bootstrap.errors import CloudError, GroundctlError, LockHeld, Refused
from bootstrap.aws.clients import call_deadline
from bootstrap.records.pulumi_locks import PulumiLock, judge, pulumi_hint, read_locks
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.untrusted import MAX_PID, Unreadable, epoch, load_record, text, whole, when

# A lock object groundctl writes is ~300 bytes; anything near this is not one.
MAX_LOCK_BYTES = 64 * 1024
UNREADABLE_OWNER = "(unreadable lock object)"  # the owner `break_lock` reports for a lock it could not read


def iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(s: str) -> float:
    return epoch(s)


@dataclass(frozen=True)
class LockInfo:
    environment: str
    owner: str
    host: str
    pid: int
    run_id: str
    started_at: str
    heartbeat_at: str
    ttl_seconds: int
    etag: Optional[str] = None

    @property
    def holder(self) -> str:
        return (f"{self.owner}@{self.host} (pid {self.pid}, run {self.run_id}, started {self.started_at}, "
                f"last heartbeat {self.heartbeat_at})")

    def body(self) -> bytes:
        d = asdict(self)
        d.pop("etag")
        return json.dumps(d, sort_keys=True).encode()

    @classmethod
    def parse(cls, body: Optional[bytes], etag: Optional[str] = None, key: str = "the lock object") -> "LockInfo":
        """The lock stored at `key`; raises `Unreadable` (naming the key and why) for anything else."""
        d = load_record(body, key, max_bytes=MAX_LOCK_BYTES, kind="lock object")
        try:
            return cls(environment=text(d, "environment"), owner=text(d, "owner", max_len=256),
                       host=text(d, "host", max_len=256), pid=whole(d, "pid", high=MAX_PID),
                       run_id=text(d, "run_id", max_len=256), started_at=when(d, "started_at"),
                       heartbeat_at=when(d, "heartbeat_at"), ttl_seconds=whole(d, "ttl_seconds", low=1, high=86400),
                       etag=etag)
        except ValueError as exc:
            raise Unreadable(key, str(exc)) from None


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


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 probes without sending)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it is just not ours
    return True


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


# -- I/O helpers -----------------------------------------------------------------------------------

def read_lock(store: ObjectStore, environment: str):
    """(the stored object or None, its LockInfo or None, why it cannot be read or None)."""
    key = layout.lock_key(environment)
    obj = store.get(key)
    if obj is None:
        return None, None, None
    try:
        info = LockInfo.parse(obj.body, obj.etag, key)
    except Unreadable as exc:
        return obj, None, exc.reason
    if info.environment != environment:
        return obj, None, f"it names the environment '{info.environment}', not '{environment}'"
    return obj, info, None


def _read_lock(store: ObjectStore, environment: str):
    obj, info, _why = read_lock(store, environment)
    return obj, info


# -- the lock --------------------------------------------------------------------------------------

HEARTBEAT_SECONDS = 15.0
MIN_TTL_SECONDS = 120


def default_ttl(deadline: float) -> int:
    """How long a lock lives without a heartbeat before another host may judge it stale.

    A beat (a conditional write and its read-back) may spend a call deadline each, retried through
    throttling; the TTL outlasts a missed beat and a slow one, so a holder working through a storm is never
    judged dead. Two minutes at the default 40 s deadline; twice the deadline plus 30 s when it is raised.
    """
    return int(max(MIN_TTL_SECONDS, 2 * deadline + 30))


class EnvironmentLock:
    """Context manager: acquire on enter (LockHeld naming the holder), heartbeat, release in finally.

    While held, `lost` is set if the lock was broken or taken by someone else; long steps should call
    `check()` between phases so the run stops instead of writing state without the lock.
    """

    def __init__(self, store: ObjectStore, environment: str, run_id: str, *, ttl_seconds: Optional[int] = None,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, clock: Callable[[], float] = time.time,
                 owner: Optional[str] = None, host: Optional[str] = None, pid: Optional[int] = None,
                 settle_seconds: float = 0.2, alive: Callable[[int], bool] = pid_alive):
        ttl_seconds = default_ttl(call_deadline()) if ttl_seconds is None else ttl_seconds
        if heartbeat_seconds >= ttl_seconds:
            raise ValueError("heartbeat_seconds must be shorter than ttl_seconds")
        self.store = store
        self.environment = environment
        self.run_id = run_id
        self.ttl_seconds = ttl_seconds
        self.heartbeat_seconds = heartbeat_seconds
        self.clock = clock
        self.owner = owner or current_user()
        self.host = host or socket.gethostname()
        self.pid = pid if pid is not None else os.getpid()
        self.settle_seconds = settle_seconds
        self.alive = alive
        self.key = layout.lock_key(environment)
        self.lost = threading.Event()
        self.lost_reason: Optional[str] = None
        self.heartbeat_errors = 0
        self.info: Optional[LockInfo] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._mutex = threading.Lock()
        self._written = time.monotonic()  # when the lock object last took a write of ours

    def acquire(self) -> LockInfo:
        # An interrupt between the conditional write and the read-back would leave a lock nobody knows
        # it holds; it is held until this returns, when the caller's `finally` can release the lock.
        with shielded():
            return self._acquire()

    def _acquire(self) -> LockInfo:
        now = iso(self.clock())
        mine = LockInfo(self.environment, self.owner, self.host, self.pid, self.run_id, now, now, self.ttl_seconds)
        body = mine.body()
        dead = None  # (object, holder) of a lock whose holder has exited this host: taken over, not waited out
        for _ in range(3):
            if (self.store.put_if_absent(self.key, body) if dead is None
                    else self.store.put_if_match(self.key, body, dead[0].etag)):
                # The emulator's If-None-Match check is not atomic under concurrency: two writers can
                # both be told they created the object. Let any racing write land, then read back;
                # the last write is what everyone sees, so exactly one writer finds its own bytes.
                if self.settle_seconds:
                    time.sleep(self.settle_seconds)
                obj = self.store.get(self.key)
                if obj is not None and obj.body == body:
                    self.info = replace(mine, etag=obj.etag)
                    self._written = time.monotonic()
                    if dead is not None:
                        self._record_takeover(*dead)
                    return self.info
            elif self.settle_seconds:
                time.sleep(self.settle_seconds)  # so the holder we name is the one that stays
            obj, info = _read_lock(self.store, self.environment)
            dead = (obj, info) if obj is not None and info is not None and self._exited(info) else None
            if obj is None or dead is not None:
                continue  # released between our attempt and the read, or left by a run that has exited
            raise LockHeld(self.environment, info.holder if info else
                           f"an unreadable lock object at {self.key} (inspect it with `groundctl lock status`)")
        raise LockHeld(self.environment, "another run that keeps taking and releasing it")

    def _exited(self, holder: LockInfo) -> bool:
        # Only this machine's processes can be probed: a holder named with another host is judged by its TTL.
        return (holder.host == socket.gethostname() and holder.pid != os.getpid()
                and not self.alive(holder.pid))

    def _record_takeover(self, obj, holder: LockInfo) -> None:
        record = {"environment": self.environment, "broken_by": f"{self.owner}@{self.host} (run {self.run_id})",
                  "at": iso(self.clock()), "forced": False, "stale": True, "taken_over": True,
                  "reason": f"the holder's pid {holder.pid} is gone from this host ({holder.host})",
                  "lock": {k: v for k, v in asdict(holder).items() if k != "etag"},
                  "lock_body": obj.body.decode("utf-8", "replace")}
        stamp = iso(self.clock()).replace(":", "").replace("-", "")
        self.store.put(broken_key(self.environment, stamp), json.dumps(record, sort_keys=True, indent=2).encode())

    def _beat(self) -> None:
        with self._mutex:
            if self.info is None or self.lost.is_set():
                return
            nxt = replace(self.info, heartbeat_at=iso(self.clock()), etag=None)
            try:
                ok = self.store.put_if_match(self.key, nxt.body(), self.info.etag or "")
                obj = self.store.get(self.key) if ok else None
            except GroundctlError:
                self.heartbeat_errors += 1  # throttled or unreachable: try again at the next beat
                silent = time.monotonic() - self._written
                if silent > self.ttl_seconds:
                    # Other hosts may now judge the lock stale and break it: stop writing as if it were ours.
                    self.lost_reason = (f"its heartbeat could not be written for {silent:.0f} s, longer than its TTL "
                                        f"({self.ttl_seconds} s), so another run may have judged it stale")
                    self.lost.set()
                return
            if obj is not None and obj.body == nxt.body():
                self.info = replace(nxt, etag=obj.etag)
                self._written = time.monotonic()
                return
            _, now_info = _read_lock(self.store, self.environment)
            self.lost_reason = (f"the lock on '{self.environment}' was broken or taken over"
                                + (f"; it is now held by {now_info.holder}" if now_info else ""))
            self.lost.set()

    def _run(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            try:
                self._beat()
            except Exception:  # noqa: BLE001 - a background thread must not die printing a traceback
                self.heartbeat_errors += 1
            if self.lost.is_set():
                return

    def check(self) -> None:
        """Raise when the lock was lost; call between phases of a long run."""
        if self.lost.is_set():
            raise Refused(f"This run ({self.run_id}) no longer holds the environment lock: {self.lost_reason}. "
                          f"It stopped before writing anything more. Check `groundctl lock status "
                          f"{self.environment}` and re-run when the environment is free.")

    def release(self) -> bool:
        """Remove the lock if it is still ours. True when this call removed it."""
        with shielded():
            return self._release()

    def _release(self) -> bool:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(5.0, self.heartbeat_seconds))
        with self._mutex:
            if self.info is None or self.lost.is_set():
                return False
            obj = self.store.get(self.key)
            if obj is None or obj.body != self.info.body():
                return False
            removed = self.store.delete_if_match(self.key, obj.etag)
            if not removed:  # a retried delete whose first attempt landed is refused; look again
                now_obj = self.store.get(self.key)
                removed = now_obj is None or now_obj.body != self.info.body()
            self.info = None
            return removed

    def __enter__(self) -> "EnvironmentLock":
        try:
            self.acquire()
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"lock-heartbeat-{self.environment}",
                                            daemon=True)
            self._thread.start()
        except BaseException:
            # `with` never calls __exit__ when __enter__ raises: an interrupt held until the lock was
            # written must not strand it.
            self.release()
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.release()
        except GroundctlError as failure:
            note = self._left_behind(failure)
            if exc is None:
                raise CloudError(f"The run's work is done, but {note}") from None
            if isinstance(exc, GroundctlError):  # the run's own failure stays the one reported, saying this too
                exc.message = f"{exc.message} Also, {note}"
                exc.args = (exc.message,)
            else:
                exc.add_note(note)

    def _left_behind(self, failure: GroundctlError) -> str:
        """What happens to a lock this run could not release, and what to run."""
        why = failure.message.split(". ")[0].rstrip(".")  # what went wrong; the re-run is said once, by the run
        return (f"the environment lock {self.key} could not be released ({why}) and is left behind, "
                f"naming this run ({self.run_id}, pid {self.pid} on {self.host}). Once this process has exited, the "
                f"next run on {self.host} takes it over at once; from another host it is stale {self.ttl_seconds} s "
                f"after its last heartbeat, when `groundctl lock break {self.environment}` removes it.")


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): the uid still identifies the owner
        return f"uid-{os.getuid()}"


# -- status and break ------------------------------------------------------------------------------

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


def broken_key(environment: str, stamp: str) -> str:
    return f"{layout.GROUNDCTL}/locks/broken/{environment}/{stamp}.json"


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

