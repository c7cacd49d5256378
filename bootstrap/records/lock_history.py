"""Which run held the environment lock at a given time, and where it ran: what places a Pulumi lock's holder.

Pulumi's lock file records a host name, a pid and a time (pkg/backend/diy/lock.go:39-44, lockContent), not
the boot or pid namespace its process ran in, so its pid alone proves nothing dead. groundctl runs every
Pulumi update as a child of a run that holds the environment lock, and a child shares its parent's boot and
pid namespace, which groundctl's lock records. The bucket is versioned and every heartbeat is a version, so
the versions of `.groundctl/locks/<env>.json` say which run held the environment when Pulumi's lock was
written, even after that run released it. A Pulumi lock no such run covers (a `pulumi` run by hand, a lock
older than the versions kept) stays unplaced: its holder is unknown unless seen alive.
"""

from __future__ import annotations

from typing import Optional

from bootstrap.aws.objectstore import ObjectStore, ObjectVersion
from bootstrap.records import layout
from bootstrap.records.liveness import START_SLACK_SECONDS, Place
from bootstrap.records.lock_object import LockInfo, parse_iso
from bootstrap.kit.untrusted import Unreadable

MAX_VERSIONS = 5000  # versions of the lock object looked at, newest first: a day of one run's heartbeats
MAX_READS = 3        # versions read, nearest the time first: one run's versions differ only in heartbeat


def covers(info: LockInfo, host: str, at: float) -> Optional[Place]:
    """The place of the run this lock version names, when it held the lock on `host` at `at` (by that host's
    clock, which wrote both times) and recorded its boot and pid namespace; None otherwise. Pure."""
    if info.host != host or not info.boot_id or info.pid_ns is None:
        return None
    taken, beat = parse_iso(info.started_at), parse_iso(info.heartbeat_at)
    if not taken - START_SLACK_SECONDS <= at <= beat + info.ttl_seconds:
        return None
    return info.place


class LockHistory:
    """The environment lock's versions, listed once, read a few at a time."""

    def __init__(self, store: ObjectStore, environment: str):
        self.store, self.key = store, layout.lock_key(environment)
        self._versions: Optional[list[ObjectVersion]] = None

    def _listed(self) -> list[ObjectVersion]:
        if self._versions is None:
            found = []
            for n, v in enumerate(self.store.versions(self.key)):
                if n >= MAX_VERSIONS:
                    break
                if v.key == self.key and not v.delete_marker:
                    found.append(v)
            self._versions = found
        return self._versions

    def place_at(self, host: str, at: float) -> Optional[Place]:
        """Where the run that held the environment lock on `host` at `at` ran, if the history says."""
        nearest = sorted(self._listed(), key=lambda v: abs(v.last_modified.timestamp() - at))
        for v in nearest[:MAX_READS]:
            obj = self.store.get(self.key, v.version_id)
            if obj is None:
                continue
            try:
                place = covers(LockInfo.parse(obj.body, obj.etag, self.key), host, at)
            except Unreadable:
                continue
            if place is not None:
                return place
        return None
