"""When Pulumi refuses an update that deviates from its saved plan: which resource, which fields. Pure.

The engine checks every step against the plan and fails the update at the first that deviates:
- pkg/resource/deploy/step_generator.go:1392 and :1396, "resource <urn> violates plan: <why>", where <why> for
  inputs is pkg/resource/deploy/plan.go:523, "properties changed: <op><op><key>[<values>], …" (plan.go:128);
- pkg/resource/deploy/step_executor.go:278, "resource violates plan: <why>" for outputs (the diagnostic event
  carries the URN);
- pkg/resource/deploy/step_generator.go:441, :449 and :453, "<op> is not allowed by the plan: …" for an
  operation the plan did not foresee;
- pkg/resource/deploy/deployment_executor.go:366-399, "expected resource operations for <urn> but none were
  seen" once the program has run, for a resource the plan has steps for that the program no longer registered
  (a create or update it dropped; a delete only when the resource is in the state). In the update's own preview,
  as `up --plan-dir` runs it, that is before any step has run.
The message quotes the values, and a secret's in plaintext (plan.go:121 prints PropertyValue.String, which for a
secret formats the wrapped value), so nothing but the URN and the names of fields the engine's own diff
reported is taken from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from bootstrap.kit.errors import Refused
from bootstrap.planning.plan import NO_CHANGE_OPS

_UNSEEN = "but none were seen"
_DEVIATES = re.compile(r"violates plan|is not allowed by the plan|expected resource operations for urn:pulumi:\S+ "
                       + _UNSEEN)
_URN = re.compile(r"resource (urn:pulumi:[^\s\]\[]+) violates plan|"
                  r"expected resource operations for (urn:pulumi:[^\s\]\[]+) " + _UNSEEN)
# A field entry of "properties changed: ": the expected and the actual operation, then the key.
_FIELD = re.compile(r"(?:properties changed: |, )[-+~=]{2}([A-Za-z_$][\w$.:-]{0,100})(?=\[|,|$)")


@dataclass(frozen=True)
class Deviation:
    urn: Optional[str]
    fields: tuple[str, ...]
    operation: bool  # an operation (create, update, delete …) the plan did not foresee, not a value
    unseen: bool = False  # the plan had steps for the resource, and the program no longer registered it


def find_deviation(diagnostics: Iterable[tuple[Optional[str], str]], error_text: str,
                   known_fields: Mapping[str, Iterable[str]]) -> Optional[Deviation]:
    """The deviation Pulumi reported, from its diagnostics ((urn, message) pairs) or else its error text; None
    when the failure was something else. `known_fields`: per URN, the field names the engine's diff of the
    layer reported; only those are named (any other name read from the message could be a secret's fragment)."""
    candidates = [(urn, text) for urn, text in diagnostics if text and _DEVIATES.search(text)]
    if not candidates and _DEVIATES.search(error_text or ""):
        candidates = [(None, line) for line in error_text.splitlines() if _DEVIATES.search(line)]
    if not candidates:
        return None
    urn, text = candidates[0]
    found = _URN.search(text)
    urn = urn or (found.group(1) or found.group(2) if found else None)
    if _UNSEEN in text:
        return Deviation(urn, (), False, unseen=True)
    known = set(known_fields.get(urn, ())) if urn else set()
    fields = tuple(dict.fromkeys(f for f in _FIELD.findall(text) if f in known))
    return Deviation(urn, fields, "is not allowed by the plan" in text)


class PlanDeviation(Refused):
    """`pulumi up --plan` refused: the update would do other than the approved plan. `applied`: the steps that
    had run before (none when the update's own preview found the deviation, as it does for any input value);
    `reviewed`: the plan came from a reviewed plan folder (`up --plan-dir`), not from this run's own gate."""

    def __init__(self, environment: str, layer: str, deviation: Deviation, applied: int = 0, reviewed: bool = True):
        self.environment = environment
        self.layer = layer
        self.deviation = deviation
        self.applied = applied
        what = deviation.urn.rsplit("::", 1)[-1] if deviation.urn else "a resource"
        where = f"{what} ({deviation.urn})" if deviation.urn else "a resource Pulumi did not name"
        if deviation.unseen:
            how = ("the approved plan has steps for it, and the program no longer declares it (the program, or the "
                   "config or inputs it reads, changed)")
        elif deviation.operation:
            how = "an operation the approved plan did not have"
        elif deviation.fields:
            how = (f"a value of {', '.join(deviation.fields)} other than the approved plan's (values are not "
                   "shown: one may be a secret)")
        else:
            how = "values other than the approved plan's (values are not shown: one may be a secret)"
        changed = (f"Nothing in {layer} was changed." if not applied else
                   f"{applied} step(s) of the approved plan had run before Pulumi stopped; the state says which.")
        again = (f"Run `groundctl plan {environment}` again and review the new plan (in CI: push to the pull request "
                 "again, or open a new one)." if reviewed else
                 f"Run `groundctl up {environment}` again to review the new plan.")
        super().__init__(
            f"The {layer} layer was not applied: Pulumi's check against the approved plan refused it at {where}: "
            f"{how}. Something changed since the plan was approved (a config value, an upstream output, a fetched "
            f"file). {changed} {again}")


def diagnostics(events: Iterable) -> list[tuple[Optional[str], str]]:
    """The (urn, message) of each error diagnostic among engine events (`EngineEvent`s)."""
    found = []
    for event in events:
        diag = getattr(event, "diagnostic_event", None)
        if diag is not None and str(diag.severity or "").startswith("error"):
            found.append((diag.urn or None, diag.message or ""))
    return found


def applied_steps(events: Iterable) -> int:
    """How many steps that change something finished for real (not in the update's own preview)."""
    count = 0
    for event in events:
        done = getattr(event, "res_outputs_event", None)
        if done is None or done.planning or done.metadata is None:
            continue
        op = getattr(done.metadata.op, "value", done.metadata.op)
        count += str(op) not in NO_CHANGE_OPS and str(op) != "refresh"
    return count
