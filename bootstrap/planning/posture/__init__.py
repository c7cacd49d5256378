"""Posture rules: the security properties each layer promises, checked on what its program declares.

Each rule is a named, pure function over the spec and the layers' mock runs (`ProgramRun`), returning
findings. A rule that should find a resource and finds none fails: a missing versioning resource is
a failure, not a pass by silence. Rules read the values as the mock runtime captured them (see
bootstrap/planning/mockrun.py): ids are `(id of <name>)`, secrets are `[secret]`, computed values are
`(known after apply)`. One module per layer holds that layer's rules; `tags` spans every layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Mapping

from bootstrap.planning.posture import backend, cluster, flux, network, tags
from bootstrap.planning.posture.model import Context, Finding, Rule, Status
from bootstrap.spec import EnvironmentSpec

if TYPE_CHECKING:
    from bootstrap.planning.mockrun import ProgramRun

__all__ = ["RULES", "Finding", "Rule", "Status", "evaluate", "failed_rules", "rule_status", "rules_by_id"]

RULES: tuple[Rule, ...] = backend.RULES + network.RULES + cluster.RULES + flux.RULES + tags.RULES


def rules_by_id() -> dict[str, Rule]:
    return {rule.id: rule for rule in RULES}


def evaluate(spec: EnvironmentSpec, runs: Mapping[str, "ProgramRun"],
             secret_values: Iterable[str] = ()) -> list[Finding]:
    """Every rule's findings, in rule order."""
    ctx = Context(spec, runs, frozenset(secret_values))
    return [f for rule in RULES for f in rule.evaluate(ctx)]


def rule_status(findings: Iterable[Finding]) -> dict[str, Status]:
    """Per rule: fail if any finding failed, pass if any passed, else not-applicable."""
    out: dict[str, Status] = {}
    for f in findings:
        prev = out.get(f.rule)
        if f.status == "fail" or prev == "fail":
            out[f.rule] = "fail"
        elif f.status == "pass" or prev == "pass":
            out[f.rule] = "pass"
        else:
            out[f.rule] = "not-applicable"
    return out


def failed_rules(findings: Iterable[Finding]) -> list[str]:
    return [rule for rule, status in rule_status(findings).items() if status == "fail"]
