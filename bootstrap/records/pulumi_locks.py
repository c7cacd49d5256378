"""Pulumi's own stack locks: who holds them, whether the holder is alive, and removing a dead one.

Pulumi's DIY backend writes `.pulumi/locks/organization/<project>/<stack>/<uuid>.json` holding
`{pid, username, hostname, timestamp}` before an update and deletes it at the end
(pkg/backend/diy/lock.go:39-44 lockContent, :130 Lock, Unlock). A killed update leaves it behind, and every
later operation on the stack fails with "the stack is currently locked". The file has no heartbeat and
records neither the boot nor the pid namespace of its holder, so its pid proves the holder dead only where
groundctl's lock history places that holder in this host's boot and pid namespace
(`bootstrap.records.lock_history`): there, the pid gone or given to a process started after the lock is
death (`bootstrap.records.liveness`). A process started before the lock at that pid on this host may be the
holder: alive, and never removed, `--force` or not. Anything else (another host, a pod or container sharing
the host name, a lock no groundctl run covers, an unreadable file) is unknown and removed only with `--force`.
`pulumi cancel` is never used: it deletes every lock file of the stack without looking
(pkg/backend/diy/backend.go: CancelCurrentUpdate).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Callable, Iterable, Optional

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.kit.errors import Refused
from bootstrap.layers import LAYER_NAMES
from bootstrap.records import layout, proc_probe
from bootstrap.records.liveness import ALIVE, DEAD, GONE, UNKNOWN, Place, Process, process_verdict
from bootstrap.records.lock_history import LockHistory
from bootstrap.kit.untrusted import MAX_PID, Unreadable, epoch, load_record, text, when, whole

MAX_PULUMI_LOCK_BYTES = 64 * 1024

Probe = Callable[[int], Process]
PlaceAt = Callable[[str, float], Optional[Place]]


@dataclass(frozen=True)
class PulumiLock:
    """One of Pulumi's own stack locks, as read from the bucket and judged from this host."""
    layer: str
    key: str
    pid: Optional[int]
    username: Optional[str]
    hostname: Optional[str]
    timestamp: Optional[str]
    unreadable: Optional[str] = None   # why the lock file cannot be read (it still blocks Pulumi)
    holder_state: Optional[str] = None  # dead | alive | unknown, once judged
    reason: Optional[str] = None
    etag: Optional[str] = None

    @property
    def holder(self) -> str:
        if self.unreadable:
            return f"an unreadable lock file ({self.unreadable})"
        return f"{self.username}@{self.hostname} (pid {self.pid}, since {self.timestamp})"

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("etag")
        return d


def parse(layer: str, key: str, body: Optional[bytes], etag: Optional[str] = None) -> PulumiLock:
    """A lock file as Pulumi writes it; an unreadable one is kept, with the reason, since it still locks."""
    try:
        d = load_record(body, key, max_bytes=MAX_PULUMI_LOCK_BYTES, kind="Pulumi lock file")
        return PulumiLock(layer, key, whole(d, "pid", high=MAX_PID), text(d, "username", max_len=256, empty=True),
                          text(d, "hostname", max_len=256), when(d, "timestamp"), etag=etag)
    except Unreadable as exc:
        return PulumiLock(layer, key, None, None, None, None, unreadable=exc.reason, etag=etag)
    except ValueError as exc:
        return PulumiLock(layer, key, None, None, None, None, unreadable=str(exc), etag=etag)


def judge(lock: PulumiLock, here: Place, probe: Probe, place_at: PlaceAt = lambda host, at: None) -> PulumiLock:
    """The lock with its holder judged dead, alive or unknown, and why. Pure apart from `probe` (what this host
    shows at a pid) and `place_at` (where groundctl's lock history places a run on a host at a time)."""
    if lock.unreadable:
        return replace(lock, holder_state=UNKNOWN, reason=(
            f"the lock file cannot be read ({lock.unreadable}), so its holder is unknown; Pulumi refuses to run "
            "while it is there"))
    since = epoch(lock.timestamp)
    local = lock.hostname == here.host
    placed = place_at(lock.hostname, since) if local else None
    state, why = process_verdict(placed or Place(lock.hostname), lock.pid, since, here,
                                 probe(lock.pid) if local else GONE)
    if state == UNKNOWN and local and placed is None:
        why += ("; Pulumi's lock records neither, and no groundctl run that held the environment lock on this "
                "host when it was written says where it ran")
    if state == UNKNOWN:
        why += "; Pulumi's lock has no heartbeat to expire"
    return replace(lock, holder_state=state, reason=why)


def read_locks(store: ObjectStore, environment: str, layers: Iterable[str] = LAYER_NAMES) -> tuple[PulumiLock, ...]:
    found = []
    for layer in layers:
        for key, _size, _mod in store.keys(layout.pulumi_locks_prefix(layer, environment)):
            obj = store.get(key)
            if obj is not None:
                found.append(parse(layer, key, obj.body, obj.etag))
    return tuple(found)


def judge_all(store: ObjectStore, environment: str, *, here: Place, probe: Probe,
              layers: Iterable[str] = LAYER_NAMES) -> tuple[PulumiLock, ...]:
    """Pulumi's locks on these layers of the environment, each judged."""
    history = LockHistory(store, environment)
    return tuple(judge(p, here, probe, history.place_at) for p in read_locks(store, environment, layers))


def break_decision(locks: tuple[PulumiLock, ...], force: bool) -> Optional[str]:
    """Why these judged locks must be left alone (None: remove them all). Pure.

    A holder shown alive wins over `force`: force is for what cannot be proven, not for what is known."""
    alive = [p for p in locks if p.holder_state == ALIVE]
    if alive:
        return "; ".join(f"{p.holder}: {p.reason}" for p in alive)
    unknown = [p for p in locks if p.holder_state != DEAD]
    if unknown and not force:
        return "; ".join(f"{p.holder}: {p.reason}" for p in unknown)
    return None


def broken_key(environment: str, layer: str, stamp: str, lock_key: str) -> str:
    name = lock_key.rsplit("/", 1)[-1].removesuffix(".json")
    return f"{layout.GROUNDCTL}/locks/broken/{environment}/pulumi-{layer}-{stamp}-{name}.json"


def break_locks(store: ObjectStore, environment: str, layer: str, *, force: bool, by: str, at: str,
                here: Optional[Place] = None, probe: Probe = proc_probe.process) -> tuple[PulumiLock, ...]:
    """Remove the Pulumi locks of one stack (`<layer>/<environment>`) whose holders are gone; a copy of each,
    with who removed it and why, is kept under `.groundctl/locks/broken/<env>/` first. Refused otherwise."""
    locks = judge_all(store, environment, here=here or proc_probe.here(), probe=probe, layers=(layer,))
    stack = f"{layer}/{environment}"
    if not locks:
        raise Refused(f"The Pulumi stack {stack} holds no lock; there is nothing to break.")
    why_not = break_decision(locks, force)
    if why_not is not None:
        live = any(p.holder_state == ALIVE for p in locks)
        raise Refused(
            f"Refusing to remove Pulumi's lock on {stack}: {why_not}. "
            + ("Wait for that update to finish; a lock whose holder is alive is never removed."
               if live else
               f"If you know that update is dead (check on its host), `groundctl lock break {environment} "
               f"--pulumi {layer} --force` removes it and records that you did.")
        )
    stamp = at.replace(":", "").replace("-", "")
    for p in locks:
        obj = store.get(p.key)
        if obj is None:
            continue  # released between the listing and now
        record = {"environment": environment, "layer": layer, "key": p.key, "broken_by": by, "at": at,
                  "forced": p.holder_state != DEAD, "holder_state": p.holder_state, "reason": p.reason,
                  "lock_body": obj.body.decode("utf-8", "replace")}
        store.put(broken_key(environment, layer, stamp, p.key), json.dumps(record, sort_keys=True, indent=2).encode())
        if not store.delete_if_match(p.key, obj.etag) and store.get(p.key) is not None:
            raise Refused(f"Pulumi's lock {p.key} changed while it was being removed, so it was left alone. "
                          f"Run `groundctl lock status {environment}` again.")
    return locks


def refuse_restore_under_lock(store: ObjectStore, project: str, stack: str, here: Optional[Place] = None,
                              probe: Probe = proc_probe.process) -> None:
    """Refused while Pulumi holds a lock on the stack about to be restored.

    A live update rewrites the stack object at its next checkpoint (pkg/backend/diy/state.go: saveStack),
    overwriting the restored state; a dead one's lock makes every phase after the restore fail, so the
    restore would be written with no way forward."""
    locks = judge_all(store, stack, here=here or proc_probe.here(), probe=probe, layers=(project,))
    if not locks:
        return
    holders = "; ".join(f"{p.holder}: {p.reason}" for p in locks)
    if any(p.holder_state == ALIVE for p in locks):
        step = "Wait for that update to finish, then re-run the recovery"
    elif all(p.holder_state == DEAD for p in locks):
        step = f"Remove it with `groundctl lock break {stack} --pulumi {project}`, then re-run the recovery"
    else:
        step = (f"Check on its host that the update is gone, remove it with `groundctl lock break {stack} --pulumi "
                f"{project} --force`, then re-run the recovery")
    raise Refused(f"Pulumi holds a lock on the stack {project}/{stack}, so its state is not restored (an update "
                  f"still running would overwrite it at its next checkpoint): {holders}. {step}.")


def pulumi_hint(store: ObjectStore, environment: str) -> str:
    """A sentence for a message about groundctl's lock: which Pulumi locks there are, and the command for them."""
    layers = sorted({p.layer for p in read_locks(store, environment)})
    if not layers:
        return ""
    return (f" Pulumi holds a stack lock on {', '.join(layers)}: `groundctl lock status {environment}` shows its "
            f"holder, and `groundctl lock break {environment} --pulumi <layer>` removes it once that holder is gone.")
