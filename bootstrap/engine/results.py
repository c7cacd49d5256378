"""What an engine operation returns: plain values above the boundary, translated from the Automation API's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

# A secret value in a state or an event: an object with this signature key and value
# (sdk/go/common/resource/sig/sig.go Secret), its plaintext encrypted or blinded.
SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")


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


def is_secret(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get(SECRET_SIG[0]) == SECRET_SIG[1]


def holds_secret(value: Any) -> bool:
    """Whether a value from a state or an event is, or holds anywhere within it, a secret. Pure."""
    if is_secret(value):
        return True
    if isinstance(value, Mapping):
        return any(holds_secret(v) for v in value.values())
    return isinstance(value, list) and any(holds_secret(v) for v in value)


def state_root_outputs(deployment: Mapping[str, Any]) -> dict:
    """The outputs of a deployment's root stack resource (none for a stack never updated). Pure."""
    for res in deployment.get("resources") or []:
        if isinstance(res, Mapping) and res.get("type") == "pulumi:pulumi:Stack":
            outputs = res.get("outputs")
            return dict(outputs) if isinstance(outputs, Mapping) else {}
    return {}
