"""A drill record read back from the state bucket, checked as the untrusted input it is.

`drill history`, `fleet status` and its page read these records; anyone with bucket access (or another
version of groundctl) may have written them, so every field those readers use is checked for its type,
size and form before it is used, and a record that fails is reported as unreadable with its key.
"""

from __future__ import annotations

from typing import Optional

from bootstrap.kit.untrusted import Unreadable, flag, items, load_record, number, obj, outcome, prose, text, when

# recovery.drills.phases.Verdict, and a progress checkpoint's "running" (recovery.drills.report.RUNNING)
OUTCOMES = ("passed", "failed", "refused", "unverified", "dry-run", "running")


def load_drill_record(body: Optional[bytes], key: str) -> dict:
    """The record stored at `key`; raises `Unreadable` naming `key` and the first field that is wrong."""
    d = load_record(body, key, kind="drill record")
    try:
        text(d, "drill_id"), text(d, "kind"), text(d, "environment", optional=True), text(d, "layer", optional=True)
        when(d, "started_at"), when(d, "ended_at", optional=True), number(d, "total_seconds")
        verdict = obj(d, "verdict")
        outcome(verdict, "outcome", known=OUTCOMES, explained=("failed", "refused", "unverified"))
        prose(verdict, "reason", max_len=4096)
        number(verdict, "recovery_seconds", low=0), number(verdict, "rto_seconds", low=0)
        flag(obj(d, "options"), "dry_run")
        for phase in items(d, "phases"):
            if not isinstance(phase, dict):
                raise ValueError("an entry of 'phases' is not an object")
            text(phase, "name"), text(phase, "status"), text(phase, "reason", optional=True, empty=True)
            prose(phase, "message"), prose(phase, "next_step"), flag(phase, "attempted")
            number(phase, "started_at"), number(phase, "ended_at"), obj(phase, "details")
    except ValueError as exc:
        raise Unreadable(key, str(exc)) from None
    return d
