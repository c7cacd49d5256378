"""What an engine operation returns: plain values above the boundary, translated from the Automation API's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class StackOutputs:
    values: dict
    secret_keys: frozenset[str] = frozenset()

    def public(self) -> dict:
        """The outputs with secret values masked, safe to print or store."""
        return {k: ("[secret]" if k in self.secret_keys else v) for k, v in self.values.items()}


@dataclass(frozen=True)
class OperationResult:
    layer: str
    operation: str  # up | destroy | refresh | import | clear-pending-creates
    counts: dict[str, int] = field(default_factory=dict)
    outputs: StackOutputs = field(default_factory=lambda: StackOutputs({}))


def outputs_from_automation(output_map: Mapping[str, Any] | None) -> StackOutputs:
    """Stack outputs, remembering which ones Pulumi holds as secrets."""
    items = dict(output_map or {})
    return StackOutputs({k: getattr(v, "value", v) for k, v in items.items()},
                        frozenset(k for k, v in items.items() if getattr(v, "secret", False)))

