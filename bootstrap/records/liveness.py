"""Whether a lock's holder is alive, dead, unknown or stale: a pure verdict over plain facts.

A lock names its holder's host and pid, and that alone proves little. Pods with host networking and some CI
runners share a host name but not a pid namespace, so a pid missing here may be running there; a machine
keeps its name across a reboot (and a clone takes it); and pids are reused, so the process that holds the
holder's pid now may be a stranger started after the holder died. A pid is evidence only where the holder's
place is proven to be this one: the same host name, the same boot (/proc/sys/kernel/random/boot_id) and the
same pid namespace (the inode of /proc/self/ns/pid). There, no process with that pid, or one started after
the lock was taken, means the holder has exited (a pid is given again only once its process is gone), and a
process started before the lock may be the holder.

Elsewhere the pid says nothing, and only a heartbeat can: within its TTL the holder is alive wherever it
runs; more than `STALE_TTLS` TTLs without one and the lock is stale (a holder that cannot write its heartbeat
for a TTL gives the lock up before writing anything more, `EnvironmentLock.check`); in between it is unknown,
which only `--force` breaks. Pulumi's locks carry no heartbeat and never become stale.

The facts are read at the edge (`bootstrap.records.proc_probe`) and passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

ALIVE, DEAD, UNKNOWN, STALE = "alive", "dead", "unknown", "stale"
BREAKABLE = frozenset({DEAD, STALE})  # broken without --force
STALE_TTLS = 3
# How much later than the lock a process may seem to have started and still be its holder. A start time is
# worked out from the time since boot against the wall clock now; clock steps and slewing since the holder
# started move it. Erring here calls a stranger alive (still broken once stale, or with --force), never the
# holder dead.
START_SLACK_SECONDS = 60.0


@dataclass(frozen=True)
class Place:
    """Where a process runs: a host name, and when known its boot and pid namespace."""
    host: str
    boot_id: Optional[str] = None
    pid_ns: Optional[int] = None

    def differs(self, here: "Place") -> Optional[str]:
        """Why a process recorded at this place is provably not among `here`'s processes (None: not provably)."""
        if self.host != here.host:
            return f"it ran on another host ({self.host}), whose processes cannot be checked from here"
        if self.boot_id and here.boot_id and self.boot_id != here.boot_id:
            return (f"it ran on a host named {self.host} like this one but in another boot (this machine has "
                    "restarted since, or another machine has its name)")
        if self.pid_ns is not None and here.pid_ns is not None and self.pid_ns != here.pid_ns:
            return (f"it ran on a host named {self.host} like this one but in another pid namespace (a pod or "
                    "container sharing the host name), whose pids are not this one's")
        return None

    def same_as(self, here: "Place") -> bool:
        """Proven the same: host name, boot and pid namespace all recorded and equal."""
        return (self.host == here.host and bool(self.boot_id) and self.boot_id == here.boot_id
                and self.pid_ns is not None and self.pid_ns == here.pid_ns)


@dataclass(frozen=True)
class Process:
    """What this host shows at a pid: whether a process runs there, and since when (epoch seconds)."""
    running: bool
    started: Optional[float] = None  # None while running: its start could not be read


GONE = Process(False)


def _at(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def process_verdict(holder: Place, pid: int, since: float, here: Place, seen: Process) -> tuple[str, str]:
    """(alive | dead | unknown, why) for a holder recorded at `holder` with `pid`, which took its lock at
    `since`, given what this host (`here`) shows at that pid (`seen`). Pure."""
    elsewhere = holder.differs(here)
    if elsewhere:
        return UNKNOWN, f"{elsewhere}, so pid {pid} says nothing from here"
    if seen.running and (seen.started is None or seen.started <= since + START_SLACK_SECONDS):
        started = "when it started cannot be read" if seen.started is None else f"started {_at(seen.started)}"
        return ALIVE, f"pid {pid} is running on this host ({here.host}; {started}, lock taken {_at(since)})"
    if not holder.same_as(here):
        return UNKNOWN, (f"the lock does not record which boot and pid namespace its holder ran in, so pid {pid} "
                         f"{'being gone' if not seen.running else 'now belonging to a later process'} on this host "
                         f"proves nothing (a pod or container may share the host name {here.host})")
    if not seen.running:
        return DEAD, (f"pid {pid} is gone from this host ({here.host}, the holder's boot and pid namespace): the "
                      "holder has exited")
    return DEAD, (f"pid {pid} now belongs to a process started {_at(seen.started)}, after the lock was taken "
                  f"({_at(since)}): the holder has exited and its pid was given again")


def lock_verdict(holder: Place, pid: int, since: float, here: Place, seen: Process, *,
                 heartbeat_age: float, ttl: int) -> tuple[str, str]:
    """(alive | dead | unknown | stale, why) for groundctl's own lock, whose holder also writes a heartbeat
    (`heartbeat_age` seconds ago, by the bucket's clock) every few seconds of its `ttl`. Pure."""
    state, why = process_verdict(holder, pid, since, here, seen)
    beat = f"the heartbeat is {heartbeat_age:.0f}s old (TTL {ttl}s)"
    if state == DEAD:
        return DEAD, f"{why}; {beat}"
    if heartbeat_age > STALE_TTLS * ttl:
        return STALE, (f"{beat}, more than {STALE_TTLS} TTLs: a holder that cannot write its heartbeat for a TTL "
                       f"gives the lock up, so nothing holds it ({why})")
    if state == ALIVE:
        return ALIVE, f"{why}; {beat}: the holder is alive"
    if heartbeat_age <= ttl:
        return ALIVE, f"{beat}, within its TTL: the holder is alive ({why})"
    return UNKNOWN, (f"{beat}, past its TTL, and {why}; it is stale once the heartbeat is {STALE_TTLS} TTLs old, "
                     "and `--force` breaks it before that (recorded)")
