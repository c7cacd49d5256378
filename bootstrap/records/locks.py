"""The environment lock: one run at a time per environment, held in the state bucket.

`.groundctl/locks/<env>.json` is created with a conditional write (If-None-Match: *), refreshed by
a heartbeat thread with If-Match on the ETag it last wrote, and deleted on release only if it is
still ours. It records the holder's boot and pid namespace beside its host and pid, so that a lock left by
a run proven dead from here (same boot and pid namespace, its pid gone or given again) is taken over at
once, and the takeover recorded; any other holder makes acquiring fail, naming it. The lock object itself
is `bootstrap.records.lock_object`; its verdict (a holder whose process cannot be checked from here is
alive within its TTL, `default_ttl`: 2 minutes at the default call deadline, and stale after three) and
breaking it are `bootstrap.records.lock_status`.
"""

from __future__ import annotations

import getpass
import json
import os
import threading
import time
from dataclasses import asdict, replace
from typing import Callable, Optional

from bootstrap.records import layout
from bootstrap.kit.interrupts import shielded
from bootstrap.kit.errors import CloudError, GroundctlError, LockHeld, Refused
from bootstrap.aws.clients import call_deadline
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import proc_probe
from bootstrap.records.liveness import DEAD, STALE_TTLS, Place, Process
from bootstrap.records.lock_object import LockInfo, broken_key, iso, read_lock
from bootstrap.records.lock_status import heartbeat_age, judge_lock


def _read_lock(store: ObjectStore, environment: str):
    obj, info, _why = read_lock(store, environment)
    return obj, info


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
                 settle_seconds: float = 0.2, here: Optional[Place] = None,
                 probe: Callable[[int], Process] = proc_probe.process):
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
        self.here = here or proc_probe.here()
        self.host = host or self.here.host
        self.pid = pid if pid is not None else os.getpid()
        self.settle_seconds = settle_seconds
        self.probe = probe
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
        mine = LockInfo(self.environment, self.owner, self.host, self.pid, self.run_id, now, now, self.ttl_seconds,
                        self.here.boot_id, self.here.pid_ns)
        body = mine.body()
        dead = None  # (object, holder, why) of a lock whose holder is proven dead: taken over, not waited out
        for _ in range(3):
            if (self.store.put_if_absent(self.key, body) if dead is None
                    else self.store.put_if_match(self.key, body, dead[0].etag)):
                # An emulator's If-None-Match check may not be atomic under concurrency: two writers can
                # both be told they created the object. Unless the store's are (S3's, groundctl's emulator's),
                # let any racing write land, then read back; the last write is what everyone sees, so exactly
                # one writer finds its own bytes.
                if self.settle_seconds and not getattr(self.store, "atomic_conditional_writes", False):
                    time.sleep(self.settle_seconds)
                obj = self.store.get(self.key)
                if obj is not None and obj.body == body:
                    self.info = replace(mine, etag=obj.etag)
                    self._written = time.monotonic()
                    if dead is not None:
                        self._record_takeover(*dead)
                    return self.info
            elif self.settle_seconds and not getattr(self.store, "atomic_conditional_writes", False):
                time.sleep(self.settle_seconds)  # so the holder we name is the one that stays
            obj, info = _read_lock(self.store, self.environment)
            why = self._dead(obj, info) if obj is not None and info is not None else None
            dead = (obj, info, why) if why is not None else None
            if obj is None or dead is not None:
                continue  # released between our attempt and the read, or left by a run that has exited
            raise LockHeld(self.environment, info.holder if info else
                           f"an unreadable lock object at {self.key} (inspect it with `groundctl lock status`)")
        raise LockHeld(self.environment, "another run that keeps taking and releasing it")

    def _dead(self, obj, holder: LockInfo) -> Optional[str]:
        """Why the holder is proven dead (None: it is not). Only dead, not stale: a stale lock is broken by hand."""
        state, why = judge_lock(holder, heartbeat_age(obj, holder, self.clock()), self.here, self.probe)
        return why if state == DEAD else None

    def _record_takeover(self, obj, holder: LockInfo, why: str) -> None:
        record = {"environment": self.environment, "broken_by": f"{self.owner}@{self.host} (run {self.run_id})",
                  "at": iso(self.clock()), "forced": False, "stale": True, "verdict": DEAD, "taken_over": True,
                  "reason": why,
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
                f"next run on {self.host} (in this boot and pid namespace) takes it over at once; from elsewhere "
                f"`groundctl lock break {self.environment} --force` removes it once {self.ttl_seconds} s have passed "
                f"since its last heartbeat, and `groundctl lock break {self.environment}` after "
                f"{STALE_TTLS * self.ttl_seconds} s, when it is stale.")


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (containers): the uid still identifies the owner
        return f"uid-{os.getuid()}"
