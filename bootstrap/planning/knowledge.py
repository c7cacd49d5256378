"""How much of a Pulumi saved plan is known: its planned input values, and which of them are unknown. Pure.

A saved plan holds, per resource, the inputs the update must set (`resourcePlans.<urn>.goal.inputDiff`, its
`adds` and `updates`: sdk/go/common/apitype/plan.go). A value the preview could not compute is written as
Pulumi's unknown placeholder (pkg/resource/stack/deployment.go:66), and an unknown value in a plan accepts any
value at all when the plan is applied (pkg/resource/deploy/plan.go:38-43, 385-526). So a plan whose values were
made unknown after the review constrains nothing, while its URNs, operations and field names, all the
fingerprint covers, stay the same. Counting the unknown values, and naming where they are, lets the apply
refuse a plan that is less known than the one the reviewer saw.

Only field paths are kept, never a value: a secret stays an opaque leaf (its ciphertext is not read).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterator

from bootstrap.kit.untrusted import decode_json

UNKNOWN = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"  # computedValuePlaceholder
_SIGNATURE = "4dabf18193072939515e22adb298388d"  # a secret, an asset, an archive or a resource reference


@dataclass(frozen=True)
class Knowledge:
    values: int  # planned input values (leaves) in the plan's goals
    unknown: tuple[str, ...]  # "<urn> <field path>" of each planned value that is unknown, sorted

    @property
    def unknown_count(self) -> int:
        return len(self.unknown)

    @property
    def unknown_sha256(self) -> str:
        return hashlib.sha256("\n".join(self.unknown).encode()).hexdigest()

    def summary(self) -> str:
        return f"{self.unknown_count} of {self.values} planned value{'s' if self.values != 1 else ''} unknown"


class NotASavedPlan(ValueError):
    """The text is not a Pulumi saved plan."""


def knowledge(text: str) -> Knowledge:
    """What a saved plan's text knows; NotASavedPlan when it is not one."""
    try:
        doc = decode_json(text)
    except ValueError as exc:
        raise NotASavedPlan(f"it is not JSON ({exc})") from None
    plans = _resource_plans(doc)
    if plans is None:
        raise NotASavedPlan("it holds no resourcePlans")
    values, unknown = 0, []
    for urn in sorted(plans):
        goal = plans[urn].get("goal") if isinstance(plans[urn], dict) else None
        diff = goal.get("inputDiff") if isinstance(goal, dict) else None
        for part in ("adds", "updates"):
            props = diff.get(part) if isinstance(diff, dict) else None
            for key in sorted(props) if isinstance(props, dict) else ():
                for path, value in _leaves(props[key], str(key)):
                    values += 1
                    if value == UNKNOWN:
                        unknown.append(f"{urn} {path}")
    return Knowledge(values, tuple(sorted(unknown)))


def _resource_plans(doc: Any) -> dict | None:
    # `preview --save-plan` writes the plan itself; the versioned envelope ({"version", "plan"}) is read too.
    if isinstance(doc, dict) and isinstance(doc.get("plan"), dict) and "version" in doc:
        doc = doc["plan"]
    if not isinstance(doc, dict):
        return None
    plans = doc.get("resourcePlans", {} if "manifest" in doc else None)
    return plans if isinstance(plans, dict) else None


def _leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and _SIGNATURE not in value and value:
        for key in sorted(value):
            yield from _leaves(value[key], f"{path}.{key}")
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    else:
        yield path, value
