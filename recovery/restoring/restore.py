"""Restoring a chosen state version: the shell that writes, under the environment lock.

Three writes, in this order, each skipped when a previous run already made it, so a run killed at any
point (kill -9 included) is completed by running it again:

1. **quarantine**: the displaced current object is copied server-side to
   `.groundctl/quarantine/<project>/<stack>/<time>.json` (its own S3 time), or, when the current object
   is a delete marker, that is noted. Skipped when the current object already holds the chosen bytes.
2. **copy**: the chosen version is copied server-side (from its version id) as a new current version
   of the stack object. Skipped when the current object already holds the chosen bytes.
3. **record**: a ledger record with operation `restore` for the new current version. The ledger
   itself refuses to record one stored object twice.

Before any of them, and before the lock is taken, a chosen version encrypted with another secrets provider
than the environment's is refused (`bootstrap.engine.secrets_provider.check_state_provider`, the decision the
engine makes before every operation): restored, it would be refused by every phase after it, so a refusal
leaves the bucket as it was.

Nothing here deletes or overwrites a version: copies add versions, and a stack object under another
compression suffix that would shadow the restored one is hidden by a delete marker after it is
quarantined (its versions stay). Which version to restore is decided elsewhere (`recovery.choice.choose`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Callable, Optional

from bootstrap.engine.secrets_provider import check_state_provider, state_provider
from bootstrap.kit.errors import Refused
from bootstrap.records import layout
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records.pulumi_locks import refuse_restore_under_lock
from recovery.state.state_bytes import decompress, load_json

STEPS = ("lock", "quarantine", "copy", "record", "release")
AfterStep = Callable[[int, str], None]


@dataclass(frozen=True)
class RestorePlan:
    project: str
    stack: str
    environment: str
    source_key: str
    source_version: str
    source_sha256: str
    lineage: Optional[str] = None
    secrets_provider: Optional[str] = None  # the environment's; None: not checked (the engine checks later)

    @property
    def dest_key(self) -> str:
        return layout.stack_key(self.project, self.stack, suffix_for(self.source_key))


@dataclass(frozen=True)
class StepResult:
    name: str
    done: bool            # this run wrote something
    detail: str

    def to_dict(self) -> dict:
        return {"step": self.name, "wrote": self.done, "detail": self.detail}


@dataclass(frozen=True)
class RestoreResult:
    plan: RestorePlan
    steps: tuple[StepResult, ...]
    new_version: Optional[str]
    serial: Optional[int]
    quarantined: tuple[str, ...] = ()
    delete_marker_displaced: Optional[str] = None
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict:
        return {"dest_key": self.plan.dest_key, "source_key": self.plan.source_key,
                "source_version": self.plan.source_version, "sha256": self.plan.source_sha256,
                "new_version": self.new_version, "serial": self.serial, "quarantined": list(self.quarantined),
                "delete_marker_displaced": self.delete_marker_displaced,
                "steps": [s.to_dict() for s in self.steps], "notes": list(self.notes)}


def suffix_for(key: str) -> str:
    """The stack-object suffix matching a candidate's compression, read from Pulumi's naming."""
    name = key.rsplit("/", 1)[-1]
    if ".json.gz" in name:
        return ".json.gz"
    if ".json.zst" in name:
        return ".json.zst"
    return ".json"


def stamp(when: datetime) -> str:
    return when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


# -- what is there now (reads only) ----------------------------------------------------------------


@dataclass(frozen=True)
class Current:
    key: str
    version_id: Optional[str]
    last_modified: Optional[datetime]
    sha256: Optional[str]          # None for a delete marker
    delete_marker: bool = False


def current_objects(store: ObjectStore, project: str, stack: str) -> list[Current]:
    """The newest version (or delete marker) of each stack key (.json, .json.gz, .json.zst)."""
    keys = set(layout.stack_keys(project, stack))
    newest: dict[str, object] = {}
    for v in store.versions(layout.stack_key(project, stack)):
        if v.key in keys and v.is_latest:
            newest[v.key] = v
    out = []
    for key, v in sorted(newest.items()):
        if v.delete_marker:
            out.append(Current(key, v.version_id, v.last_modified, None, True))
            continue
        obj = store.get(key, v.version_id)
        sha = hashlib.sha256(obj.body).hexdigest() if obj is not None else None
        out.append(Current(key, v.version_id, v.last_modified, sha))
    return out


def _quarantine(store: ObjectStore, plan: RestorePlan, cur: Current) -> tuple[str, bool]:
    """Copy `cur` to quarantine unless a copy of it is already there; (key, wrote)."""
    base = stamp(cur.last_modified or datetime.now(timezone.utc))
    prefix = layout.quarantine_key(plan.project, plan.stack, base)[: -len(".json")]
    existing = {k for k, _s, _m in store.keys(prefix)}
    for name in (base, f"{base}-{(cur.version_id or 'none')[:12]}"):
        key = layout.quarantine_key(plan.project, plan.stack, name)
        if key in existing:
            obj = store.get(key)
            if obj is not None and hashlib.sha256(obj.body).hexdigest() == cur.sha256:
                return key, False  # a previous run quarantined it already
            continue  # another displaced object had the same time: use the longer name
        store.copy_version(cur.key, cur.version_id, key)
        return key, True
    raise RuntimeError(f"quarantine names for {cur.key} are all taken")  # not reachable: the names differ


def _deployment(doc) -> dict:
    """The deployment of a checkpoint (`checkpoint.latest`) or an export (`deployment`); empty for anything else."""
    if not isinstance(doc, dict):
        return {}
    dep = doc.get("deployment")
    if dep is None and isinstance(doc.get("checkpoint"), dict):
        dep = doc["checkpoint"].get("latest")
    return dep if isinstance(dep, dict) else {}


def refuse_another_provider(store: ObjectStore, plan: RestorePlan) -> None:
    """Refused when the chosen version keeps its secrets with another provider than the environment's."""
    if plan.secrets_provider is None:
        return
    source = f"{plan.source_key} version {plan.source_version}"
    obj = store.get(plan.source_key, plan.source_version)
    doc = load_json(decompress(obj.body, source)[0], source) if obj is not None else None
    try:
        check_state_provider(state_provider(_deployment(doc)), plan.secrets_provider, environment=plan.environment,
                             layer=plan.project)
    except Refused as exc:
        raise Refused(f"The chosen version ({source}) was not restored, and nothing was written. "
                      f"{exc.message}") from None


# -- the restore -----------------------------------------------------------------------------------


def restore(store: ObjectStore, plan: RestorePlan, *, lock_factory: Callable, run_id: str,
            append_record: Callable, after_step: Optional[AfterStep] = None,
            clock: Callable[[], float] = time.time) -> RestoreResult:
    """Quarantine, copy and record under the environment lock; every step idempotent."""
    def done(n: int) -> None:
        if after_step is not None:
            after_step(n, STEPS[n - 1])

    steps: list[StepResult] = []
    notes: list[str] = []
    quarantined: list[str] = []
    marker: Optional[str] = None
    refuse_another_provider(store, plan)
    with lock_factory(store, plan.environment, run_id) as lock:
        steps.append(StepResult("lock", True, f"holding the lock on '{plan.environment}' as run {run_id}"))
        done(1)
        check = getattr(lock, "check", lambda: None)
        # groundctl's lock keeps groundctl out, not Pulumi: a live update would overwrite the restored state.
        refuse_restore_under_lock(store, plan.project, plan.stack)

        # 1. quarantine whatever is current and is not already the chosen state.
        currents = current_objects(store, plan.project, plan.stack)
        dest_now = next((c for c in currents if c.key == plan.dest_key), None)
        already = dest_now is not None and not dest_now.delete_marker and dest_now.sha256 == plan.source_sha256
        wrote = False
        for cur in currents:
            if cur.delete_marker:
                if cur.key == plan.dest_key:
                    marker = cur.version_id
                    notes.append(f"the displaced current object {cur.key} was a delete marker (version "
                                 f"{cur.version_id}); there was nothing to quarantine")
                continue
            if cur.key == plan.dest_key and already:
                continue
            key, w = _quarantine(store, plan, cur)
            quarantined.append(key)
            wrote = wrote or w
        if dest_now is None:
            notes.append(f"{plan.dest_key} did not exist: there was nothing to quarantine")
        steps.append(StepResult("quarantine", wrote, ", ".join(quarantined) or "nothing to quarantine"))
        done(2)
        check()

        # 2. the chosen version becomes the current one (a new version; older ones untouched).
        new_version = dest_now.version_id if already else None
        if already:
            steps.append(StepResult("copy", False, f"{plan.dest_key} already holds the chosen state"))
        else:
            new_version = store.copy_version(plan.source_key, plan.source_version, plan.dest_key)
            steps.append(StepResult("copy", True, f"copied {plan.source_key} version {plan.source_version} "
                                                  f"to {plan.dest_key} as version {new_version}"))
        # A stack object under another suffix would shadow the restored one: hide it (versions stay).
        for cur in currents:
            if cur.key != plan.dest_key and not cur.delete_marker:
                store.delete(cur.key)
                notes.append(f"{cur.key} was quarantined and hidden behind a delete marker so that Pulumi "
                             f"reads {plan.dest_key}")
        done(3)
        check()

        # 3. the ledger learns about it (append_record never records one stored object twice).
        rec = append_record(store, plan.project, plan.stack, operation="restore", run_id=run_id,
                            lineage=plan.lineage, clock=clock, state_key=plan.dest_key, state_version=new_version)
        serial = getattr(rec, "serial", None)
        steps.append(StepResult("record", getattr(rec, "run_id", None) == run_id,
                                f"ledger serial {serial} ({getattr(rec, 'operation', 'restore')})"))
        done(4)
    steps.append(StepResult("release", True, "released the environment lock"))
    return RestoreResult(plan, tuple(steps), new_version, serial, tuple(quarantined), marker, tuple(notes))
