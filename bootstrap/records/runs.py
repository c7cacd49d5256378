"""The run record: what one `up`/`destroy` run attempted and what it achieved, for audit and resume.

Stored at `.groundctl/runs/<env>/<run_id>.json` in the state bucket and rewritten before and after every
phase that changes something (and when a phase fails), so a run that dies part-way still says where it
stopped. Attempted and achieved are kept apart per layer (a layer whose `up` was attempted but failed says
so). Nothing secret is ever stored: only counts, fingerprints, serials and messages, and every message is
passed through `redact` with the secret values the run knows of (passphrase, deploy key, secret outputs)
before it is kept.
"""

from __future__ import annotations

import json
import secrets as _secrets
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from typing import Callable, Iterable, Iterator, Optional

from bootstrap.kit.errors import GroundctlError, Refused
from bootstrap.records.layout import run_key
from bootstrap.kit.masking import mask_text
from bootstrap.kit import untrusted

# Layer outcomes. "not-reached" is a layer the run meant to handle but stopped before.
ACHIEVED = ("pending", "applied", "unchanged", "destroyed", "previewed", "skipped", "refused", "failed", "not-reached")
REDACTED = "[redacted]"
# Phases that change something besides the record (the state backend, the lock, a stack's state, the ledger). The
# stored record names each as running before it starts and says how it ended before the next phase starts, so a
# run that dies anywhere leaves a record naming every change it made or was making. The phases between two of them
# only read (and decide), and their ends ride along with the next save: one `up` of a layer saves its record 8
# times, not once per phase boundary (~15 PUTs).
MUTATING = frozenset({"backend", "lock", "create", "adopt", "up", "destroy", "ledger", "unlock"})
# Phases long enough that the record should say "running" while they run: the mutating ones, the previews, the
# wait for Flux.
SAVED_AT_START = MUTATING | {"preview", "re-preview", "flux-ready"}


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_run_id(clock: Callable[[], float] = time.time) -> str:
    """Sortable by start time, unique across hosts: 20261202T104400Z-3f9a1c."""
    stamp = datetime.fromtimestamp(clock(), tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{_secrets.token_hex(3)}"


def git_commit() -> Optional[str]:
    """The commit of the checkout groundctl runs from (recorded with each run), or None."""
    import subprocess

    from bootstrap.layers import STACKS_DIR

    try:
        out = subprocess.run(["git", "-C", str(STACKS_DIR.parent), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and len(sha) == 40 else None


def redact(text: str, secret_values: Iterable[str]) -> str:
    return mask_text(text, secret_values, REDACTED)


@dataclass(frozen=True)
class Phase:
    name: str
    started_at: str
    ended_at: Optional[str] = None
    outcome: str = "running"  # running | ok | failed | refused | skipped | interrupted
    detail: str = ""
    seconds: Optional[float] = None


@dataclass(frozen=True)
class LayerRun:
    layer: str
    attempted: str  # up | destroy | preview | drift
    achieved: str = "pending"
    message: str = ""
    counts: dict = field(default_factory=dict)
    fingerprint: Optional[str] = None
    serial: Optional[int] = None
    # What tied the apply to the approved preview: "reviewed-plan" (`up --plan` with the plan the reviewed
    # preview saved, from --plan-dir), "saved-plan" (`up --plan` with the plan saved by this run's gated
    # preview) or "re-preview" (the fingerprint of a fresh preview under the lock matched).
    applied_with: Optional[str] = None
    phases: tuple[Phase, ...] = ()


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    environment: str
    command: str
    started_at: str
    options: dict = field(default_factory=dict)
    ended_at: Optional[str] = None
    outcome: str = "running"  # running | succeeded | failed | refused | interrupted
    stopped_at: Optional[str] = None  # "<layer>/<phase>" or "<phase>" where a run stopped
    message: str = ""
    git_commit: Optional[str] = None
    phases: tuple[Phase, ...] = ()
    layers: tuple[LayerRun, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)

    def layer(self, name: str) -> Optional[LayerRun]:
        return next((lay for lay in self.layers if lay.layer == name), None)


def error_outcome(exc: BaseException) -> str:
    return "refused" if isinstance(exc, Refused) else "failed"


class RunLog:
    """Builds a RunRecord phase by phase and, once a sink is attached, saves it where a crash would otherwise
    lose what the run changed: at the start of each phase in SAVED_AT_START, before the phase after a mutating
    one, when a phase fails and at the finish.

    The sink is attached only once the state bucket is known to exist (after the backend step);
    until then the record is kept in memory and written at the first save that can happen.
    """

    def __init__(self, record: RunRecord, *, clock: Callable[[], float] = time.time,
                 secret_values: Callable[[], Iterable[str]] = tuple):
        self.record = record
        self.clock = clock
        self._secret_values = secret_values
        self._sink: Optional[Callable[[str, bytes], object]] = None
        self.save_error: Optional[str] = None
        self._owed = False  # a mutating phase ended (or the sink came) since the last stored save
        self.saves = 0  # PUTs of the record, for the tests that pin how many one run costs

    # -- persistence --------------------------------------------------------------------------------

    @property
    def key(self) -> str:
        return run_key(self.record.environment, self.record.run_id)

    @property
    def stored(self) -> bool:
        return self._sink is not None and self.save_error is None

    def attach(self, sink: Callable[[str, bytes], object]) -> None:
        # Stored before the next phase starts, with the phase that attached it ended.
        self._sink = sink
        self._owed = True

    def to_bytes(self) -> bytes:
        text = json.dumps(self.record.to_dict(), indent=2, sort_keys=True)
        return redact(text, self._secret_values()).encode()

    def save(self) -> None:
        if self._sink is None:
            return
        try:
            self.saves += 1
            self._sink(self.key, self.to_bytes())
            self.save_error = None
            self._owed = False
        except GroundctlError as exc:
            # Losing the audit record must not hide the real outcome of the run; it is reported.
            self.save_error = self.clean(exc.message)

    def clean(self, text: str) -> str:
        return redact(text, self._secret_values())

    # -- building -----------------------------------------------------------------------------------

    def _update(self, **changes) -> None:
        # Saved where `phase` and `finish` say, not on every change: each PUT is a round trip and a version in the
        # bucket.
        self.record = replace(self.record, **changes)

    def plan_layers(self, layers: list[str], attempted: str) -> None:
        self._update(layers=tuple(LayerRun(name, attempted, "not-reached") for name in layers))

    def set_layer(self, name: str, **changes) -> None:
        if "message" in changes:
            changes["message"] = self.clean(changes["message"])
        self._update(layers=tuple(replace(lay, **changes) if lay.layer == name else lay for lay in self.record.layers))

    @contextmanager
    def phase(self, name: str, layer: Optional[str] = None) -> Iterator[dict]:
        """Record a phase's start, end and outcome. The yielded dict may carry `detail`/`outcome`."""
        start = self.clock()
        self._put_phase(layer, Phase(name, iso(start)))
        if name in SAVED_AT_START or self._owed:
            self.save()
        note: dict = {}
        try:
            yield note
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                message, outcome = "interrupted (Ctrl-C or SIGTERM)", "interrupted"
            else:
                message = self.clean(getattr(exc, "message", None) or type(exc).__name__)
                outcome = error_outcome(exc) if isinstance(exc, Exception) else "failed"
            self._end_phase(layer, name, start, outcome, message)
            where = f"{layer}/{name}" if layer else name
            self._update(stopped_at=where)
            self.save()
            raise
        self._end_phase(layer, name, start, note.get("outcome", "ok"), self.clean(note.get("detail", "")))
        if name in MUTATING:
            self._owed = True

    def _put_phase(self, layer: Optional[str], phase: Phase) -> None:
        if layer is None:
            self._update(phases=self.record.phases + (phase,))
        else:
            self._update(layers=tuple(replace(lay, phases=lay.phases + (phase,)) if lay.layer == layer else lay
                                      for lay in self.record.layers))

    def _end_phase(self, layer, name, start, outcome, detail) -> None:
        end = self.clock()

        def close(phases: tuple[Phase, ...]) -> tuple[Phase, ...]:
            out = list(phases)
            for i in range(len(out) - 1, -1, -1):
                if out[i].name == name and out[i].outcome == "running":
                    out[i] = replace(out[i], ended_at=iso(end), outcome=outcome, detail=detail,
                                     seconds=round(end - start, 3))
                    break
            return tuple(out)

        if layer is None:
            self._update(phases=close(self.record.phases))
        else:
            self._update(layers=tuple(replace(lay, phases=close(lay.phases)) if lay.layer == layer else lay
                                      for lay in self.record.layers))

    def finish(self, outcome: str, message: str = "") -> RunRecord:
        self._update(outcome=outcome, message=self.clean(message), ended_at=iso(self.clock()))
        self.save()
        return self.record


def start_run(environment: str, command: str, options: dict, *, clock: Callable[[], float] = time.time,
              run_id: Optional[str] = None, git_commit: Optional[str] = None,
              secret_values: Callable[[], Iterable[str]] = tuple) -> RunLog:
    record = RunRecord(run_id or new_run_id(clock), environment, command, iso(clock()), dict(options),
                       git_commit=git_commit)
    return RunLog(record, clock=clock, secret_values=secret_values)


RUN_OUTCOMES = ("running", "succeeded", "failed", "refused", "interrupted")
PHASE_OUTCOMES = ("running", "ok", "failed", "refused", "skipped", "interrupted")


def load_record(data: Optional[bytes], key: str = "the run record") -> dict:
    """A stored run record, as the dict it was saved as, checked field by field (it is untrusted input: another
    version of groundctl or anyone with bucket access may have written it); raises `Unreadable` naming `key`."""
    d = untrusted.load_record(data, key, kind="run record")
    try:
        for name in ("run_id", "environment", "command"):
            untrusted.text(d, name)
        untrusted.outcome(d, "outcome", known=RUN_OUTCOMES, explained=("failed", "refused"), reason="message",
                          optional=False)
        untrusted.when(d, "started_at"), untrusted.when(d, "ended_at", optional=True)
        untrusted.text(d, "stopped_at", optional=True), untrusted.prose(d, "message")
        for phase in untrusted.items(d, "phases") + [p for lay in untrusted.items(d, "layers")
                                                      for p in untrusted.items(_object(lay), "phases")]:
            _object(phase)
            untrusted.text(phase, "name"), untrusted.prose(phase, "detail")
            untrusted.outcome(phase, "outcome", known=PHASE_OUTCOMES, explained=(), optional=False)
            untrusted.number(phase, "seconds")
        for lay in untrusted.items(d, "layers"):
            untrusted.text(lay, "layer"), untrusted.text(lay, "attempted"), untrusted.text(lay, "achieved")
            untrusted.prose(lay, "message")
    except ValueError as exc:
        raise untrusted.Unreadable(key, str(exc)) from None
    return d


def _object(v: object) -> dict:
    if not isinstance(v, dict):
        raise ValueError(f"an entry is a {untrusted.type_name(v)}, not an object")
    return v
