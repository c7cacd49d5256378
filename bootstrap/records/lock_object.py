"""The environment lock's object: where it lives, what it holds, and reading it.

`.groundctl/locks/<env>.json` names the run that holds the environment (owner, host, pid, run id and
its last heartbeat) and where its process runs: the boot and pid namespace, without which its pid proves
nothing (`bootstrap.records.liveness`). The protocol that writes it is `bootstrap.records.locks`; judging and
breaking a lock someone else holds is `bootstrap.records.lock_status`. Both keep what they remove under
`broken_key` first.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Optional

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from bootstrap.records.liveness import Place
from bootstrap.records.proc_probe import BOOT_ID, MAX_NS_INODE
from bootstrap.kit.untrusted import MAX_PID, Unreadable, epoch, load_record, text, when, whole

# A lock object groundctl writes is ~300 bytes; anything near this is not one.
MAX_LOCK_BYTES = 64 * 1024


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
    # Older groundctl wrote neither: such a holder is never proven dead by its pid, only stale by its heartbeat.
    boot_id: Optional[str] = None
    pid_ns: Optional[int] = None
    etag: Optional[str] = None

    @property
    def place(self) -> Place:
        return Place(self.host, self.boot_id, self.pid_ns)

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
                       boot_id=_boot_id(d), pid_ns=whole(d, "pid_ns", low=1, high=MAX_NS_INODE, optional=True),
                       etag=etag)
        except ValueError as exc:
            raise Unreadable(key, str(exc)) from None


def _boot_id(d: dict) -> Optional[str]:
    value = text(d, "boot_id", optional=True, max_len=36)
    if value is not None and not BOOT_ID.fullmatch(value):
        raise ValueError("field 'boot_id' is not a boot id (a lower-case UUID)")
    return value


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


def broken_key(environment: str, stamp: str) -> str:
    return f"{layout.GROUNDCTL}/locks/broken/{environment}/{stamp}.json"
