"""What groundctl sees of the engine: the `Engine` protocol. Above it everything works on `Plan`,
`OperationResult` and plain dicts. An engine is bound to one environment; every method takes the layer it
acts on."""

from __future__ import annotations

from typing import Callable, Optional, Protocol, Sequence

from bootstrap.engine.results import OperationResult, StackOutputs
from bootstrap.planning.plan import Plan

ProgressFn = Callable[[str], None]


class Engine(Protocol):
    """Every method but `create_stack` acts on an existing stack and raises StackMissing otherwise."""

    def stack_exists(self, layer: str) -> bool: ...

    def create_stack(self, layer: str) -> None:
        """Create the layer's empty stack; only for the first `up` of a layer the ledger never recorded."""
        ...

    def supports_saved_plans(self) -> bool:
        """Whether `preview(save_plan=True)` then `up(use_saved_plan=True)` ties the apply to the preview."""
        ...

    def preview(self, layer: str, *, refresh: bool = False, expect_no_changes: bool = False,
                save_plan: bool = False, on_progress: Optional[ProgressFn] = None) -> Plan:
        """`save_plan` keeps Pulumi's update plan of this preview for the next `up` of the layer."""
        ...

    def saved_plan(self, layer: str) -> Optional[str]:
        """The update plan the last `preview(save_plan=True)` of the layer saved, as Pulumi wrote it (secret
        values encrypted by the stack's secrets provider), for a reviewer's folder; None when there is none."""
        ...

    def use_reviewed_plan(self, layer: str, text: str) -> None:
        """Make `text` (a plan `saved_plan` gave, on this machine or another) the plan the layer's next
        `up(use_saved_plan=True)` is held to; that up previews against it before it changes anything."""
        ...

    def up(self, layer: str, *, use_saved_plan: bool = False,
           on_progress: Optional[ProgressFn] = None) -> OperationResult:
        """`use_saved_plan`: apply constrained by the plan the last `preview(save_plan=True)` saved (or
        `use_reviewed_plan` gave); an update that would do other than it raises PlanDeviation (exit 3)
        instead of doing more than was approved."""
        ...

    def refresh(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult: ...

    def destroy(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult: ...

    def outputs(self, layer: str) -> StackOutputs: ...

    def export_state(self, layer: str) -> dict:
        """The stack's deployment. Holds plaintext secrets: never write it to disk unencrypted."""
        ...

    def import_resources(self, layer: str, import_plan: dict, *,
                         on_progress: Optional[ProgressFn] = None) -> OperationResult:
        """Adopt existing resources; `import_plan` is the `pulumi import --file` document."""
        ...

    def clear_pending_creates(self, layer: str, urns: Sequence[str], *,
                              on_progress: Optional[ProgressFn] = None) -> OperationResult:
        """Drop these pending CREATE operations from the stack's state, and nothing else.

        Refuses, changing nothing, when the state holds a pending create not in `urns`: Pulumi's way
        to drop them (`refresh --clear-pending-creates`) drops every one. Ones no longer pending are
        ignored. The caller must have adopted any that made a live resource first: a dropped pending
        create is no longer tracked. (No import variant: `refresh --import-pending-creates` turns the
        operation into a pending import, which the refresh then discards without adding the resource;
        pkg/cmd/pulumi/operations/refresh.go pendingCreatesToImports, pkg/backend/snapshot.go, which
        carries only pending creates into the new snapshot.)"""
        ...

    def set_config(self, layer: str, key: str, value: str, *, secret: bool = False) -> None: ...
