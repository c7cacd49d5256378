"""The guide's plain data: its options, the services it does I/O through, the `Condition` each phase
ends in, and the `Transcript` of a whole run."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from bootstrap.records import ledger as led
from recovery.choice import choose as ch


@dataclass(frozen=True)
class Condition:
    phase: str
    status: str            # achieved | refused | failed | skipped | not-attempted
    reason: str
    message: str
    next_step: str = ""
    attempted: bool = True
    details: dict = field(default_factory=dict)
    exit_code: Optional[int] = None  # set when an error stopped the phase: the exit code its class stands for

    def to_dict(self) -> dict:
        return {"phase": self.phase, "status": self.status, "attempted": self.attempted,
                "achieved": self.status == "achieved", "reason": self.reason, "message": self.message,
                "next_step": self.next_step, "details": self.details, "exit_code": self.exit_code}


@dataclass(frozen=True)
class GuideOptions:
    environment: str
    layer: str
    yes: bool = False
    dry_run: bool = False
    flags: ch.Flags = ch.Flags()
    clear_unchecked_creates: bool = False  # pending creates inventory cannot see were checked by hand: made nothing
    run_id: str = field(default_factory=lambda: f"recover-{uuid.uuid4().hex[:12]}")

    @property
    def project(self) -> str:
        return self.layer

    @property
    def expected_stack(self) -> str:
        return f"organization/{self.layer}/{self.environment}"


@dataclass
class GuideServices:
    store: Any
    engine: Callable[[], Any]                     # built lazily: a dry run never needs it
    inventory: Callable[[str, str], Any]           # (environment, layer) -> recovery.survivors.inventory.Inventory
    lock_factory: Callable                         # (store, environment, run_id) -> context manager
    confirm: Callable[[str], bool]
    append_record: Callable = led.append_record
    clock: Callable[[], float] = time.time
    lock_status: Optional[Callable] = None         # (store, environment) -> LockStatus
    after_restore_step: Optional[Callable[[int, str], None]] = None
    # Raises (a GroundctlError saying what is missing) when the phases after a write could not run: called
    # once, before the first phase that writes, so nothing is written when the way forward is blocked. It is
    # given the chosen state's providers ({"resources": [...]}, None when nothing was chosen): the refresh and
    # import after the restore run the plugin versions they are bound to.
    ready: Optional[Callable[[Optional[dict]], None]] = None
    # Flux's own readiness (`bootstrap.flux.check.flux_readiness`), waited for once a recovered flux layer's
    # plan is clean; None where there is no Kubernetes API to ask (the emulator) or the layer is not flux.
    flux_ready: Optional[Callable[[], Any]] = None
    # The secrets provider the environment holds its states to (None: not known here, and not checked before
    # the restore): a chosen version encrypted with another is refused before anything is written.
    secrets_provider: Optional[Callable[[], Optional[str]]] = None


@dataclass(frozen=True)
class Transcript:
    environment: str
    layer: str
    run_id: str
    started_at: str
    finished_at: str
    options: dict
    conditions: tuple[Condition, ...]
    outcome: str            # complete | nothing-to-do | dry-run | refused | declined | incomplete
    downloads: int = 0

    @property
    def exit_code(self) -> int:
        """docs/exit-codes.md's contract; a stop caused by an error exits as that error's class does (no
        credentials: 4, whether or not it was a dry run)."""
        stop = next((c for c in self.conditions if c.status in ("refused", "failed")), None)
        if stop is not None and stop.exit_code is not None:
            return stop.exit_code
        return {"complete": 0, "nothing-to-do": 0, "dry-run": 0, "refused": 3, "declined": 3}.get(self.outcome, 1)

    def to_dict(self) -> dict:
        return {"environment": self.environment, "layer": self.layer, "run_id": self.run_id,
                "started_at": self.started_at, "finished_at": self.finished_at, "options": self.options,
                "outcome": self.outcome, "complete": self.outcome == "complete", "exit_code": self.exit_code,
                "state_downloads": self.downloads, "phases": [c.to_dict() for c in self.conditions]}


class Stop(Exception):
    """Raised by a phase to end the run with `outcome` (the operator declined a write)."""

    def __init__(self, outcome: str):
        self.outcome = outcome
