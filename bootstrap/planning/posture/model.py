"""The shape of a posture rule and its findings, shared by the per-layer rule modules."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Literal, Mapping

from bootstrap.spec import EnvironmentSpec

if TYPE_CHECKING:
    from bootstrap.planning.mockrun import DeclaredResource, ProgramRun

Status = Literal["pass", "fail", "not-applicable"]

SECRET = "[secret]"  # the mock runtime's marker for a secret value (bootstrap.planning.mockrun.SECRET)


def said(value: object) -> str:
    """A declared value as a finding quotes it: never a Python repr (None, True, {'tag': ...})."""
    if value is None or value == "":
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return f"'{value}'"


@dataclass(frozen=True)
class Finding:
    rule: str
    layer: str
    status: Status
    resource: str | None
    message: str

    def to_dict(self) -> dict:
        return {"rule": self.rule, "layer": self.layer, "status": self.status, "resource": self.resource,
                "message": self.message}


@dataclass(frozen=True)
class Context:
    """What a rule may look at. `secret_values` are plaintexts that must appear nowhere (canaries)."""

    spec: EnvironmentSpec
    runs: Mapping[str, "ProgramRun"]
    secret_values: frozenset[str] = field(default_factory=frozenset)

    def of_type(self, layer: str, *types: str) -> list["DeclaredResource"]:
        run = self.runs.get(layer)
        return [r for r in run.resources if r.type in types] if run else []


# A check yields (status, resource name or None, message).
Outcome = tuple[Status, "str | None", str]


@dataclass(frozen=True)
class Rule:
    id: str
    layer: str
    types: tuple[str, ...]
    reason: str
    check: Callable[[Context], Iterable[Outcome]]

    def evaluate(self, ctx: Context) -> list[Finding]:
        if self.layer != "all" and self.layer not in ctx.runs:
            return [Finding(self.id, self.layer, "fail", None, f"the {self.layer} layer was not run")]
        found = [Finding(self.id, self.layer, s, r, m) for s, r, m in self.check(ctx)]
        return found or [Finding(self.id, self.layer, "fail", None,
                                 f"no {' or '.join(self.types)} declared in {self.layer}")]


def each(layer: str, kind: str, judge: Callable[[Context, "DeclaredResource"], Outcome]):
    """A check that judges every resource of type `kind` the layer declares, one outcome each."""

    def check(ctx: Context) -> Iterable[Outcome]:
        return [judge(ctx, r) for r in ctx.of_type(layer, kind)]

    return check


def mock_ref(name: str) -> str:
    # The mock runtime's id for a resource (bootstrap.planning.mockrun.mock_id); kept literal so rules stay pure.
    return f"(id of {name})"


def number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def ok(cond: bool, resource: str | None, good: str, bad: str) -> Outcome:
    return ("pass", resource, good) if cond else ("fail", resource, bad)
