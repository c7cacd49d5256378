"""A plan and an engine result in words: the one-line summaries the console, the run record and status show."""

from __future__ import annotations

from bootstrap.kit import console
from bootstrap.planning.plan import NO_CHANGE_OPS, Plan


def plan_summary(plan: Plan) -> str:
    if plan.skipped_reason:
        return f"skipped: {plan.skipped_reason}"
    counts = {op: n for op, n in plan.counts.items() if op not in NO_CHANGE_OPS}
    text = ", ".join(f"{n} to {op}" for op, n in counts.items()) or "no changes"
    return text + (f" ({len(plan.risky)} risky)" if plan.risky else "")


def counts_text(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {op}" for op, n in sorted(counts.items()))


def show_plan(plan: Plan) -> None:
    console.info(f"  {plan.layer}: {plan_summary(plan)}")
    for change, reason in plan.risky:
        console.warn(f"{plan.layer}: {change.operation} {change.name} ({change.type}): {reason}")
