"""The engine boundary: the only place that knows about the Pulumi Automation API.

Above this line everything works on `Plan`, `OperationResult` and plain dicts. An engine is bound to
one environment; every method takes the layer it acts on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

from bootstrap.plan import Plan

ProgressFn = Callable[[str], None]


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
    operation: str  # up | destroy | refresh | import
    counts: dict[str, int] = field(default_factory=dict)
    outputs: StackOutputs = field(default_factory=lambda: StackOutputs({}))


class Engine(Protocol):
    def preview(self, layer: str, *, refresh: bool = False, expect_no_changes: bool = False,
                on_progress: Optional[ProgressFn] = None) -> Plan: ...

    def up(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult: ...

    def refresh(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult: ...

    def destroy(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult: ...

    def outputs(self, layer: str) -> StackOutputs: ...

    def export_state(self, layer: str) -> dict:
        """The stack's deployment. Holds plaintext secrets: never write it to disk unencrypted."""
        ...

    def import_state(self, layer: str, state: dict) -> None: ...

    def import_resources(self, layer: str, import_plan: dict, *,
                         on_progress: Optional[ProgressFn] = None) -> OperationResult:
        """Adopt existing resources; `import_plan` is the `pulumi import --file` document."""
        ...

    def cancel(self, layer: str) -> None: ...

    def set_config(self, layer: str, key: str, value: str, *, secret: bool = False) -> None: ...
