"""The version a recovery would choose today, by the recovery's own code: the guided flow's read phases
(Assess, Candidates, Lineage/serial, Choose) run on the state bucket, ledger and tamper check included.
They only read; the services that write are never handed over (calling one is a bug)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from recovery.guide import choosing, reading
from recovery.guide.model import Condition, GuideOptions, GuideServices
from recovery.guide.run import Run

READ_PHASES = (reading.assess, reading.candidates, reading.lineage, choosing.choose)


def _never(*_args, **_kwargs):
    raise AssertionError("a rehearsal reads the recovery's choice only: nothing may write through it")


@dataclass
class Chosen:
    """What the recovery's read phases found for one layer."""

    conditions: tuple[Condition, ...]
    run: Run                              # its candidates, ledger, evidence and evaluator, for --newest

    @property
    def last(self) -> Condition:
        return self.conditions[-1]

    @property
    def never_deployed(self) -> bool:
        return self.last.reason == "NeverDeployed"

    @property
    def option(self):
        """The chosen candidate (a `recovery.choice.choose.Option`) when a recovery would restore one, else None."""
        choice = self.run.choice
        return choice.chosen if choice is not None and choice.allowed else None

    @property
    def lineage(self) -> Optional[str]:
        option = self.option
        return (option.lineage if option else None) or (self.run.evidence.lineage if self.run.evidence else None)

    def summary(self) -> dict:
        c = self.last
        return {"reason": c.reason, "message": c.message, "next_step": c.next_step,
                "skipped": [s["candidate"] + ": " + s["reason"] for s in (c.details.get("skipped") or [])][:20]}


def choose_version(store, environment: str, layer: str) -> Chosen:
    """Run the recovery's read phases for `layer` and stop where the recovery would stop."""
    svc = GuideServices(store=store, engine=_never, inventory=_never, lock_factory=_never,
                        confirm=lambda _q: False, append_record=_never)
    run = Run(GuideOptions(environment, layer, run_id=f"rehearse-{layer}"), svc)
    conditions = []
    try:
        for phase in READ_PHASES:
            cond = phase(run)
            conditions.append(cond)
            if cond.status in ("refused", "failed"):
                break
    finally:
        run.close()
    return Chosen(tuple(conditions), run)
