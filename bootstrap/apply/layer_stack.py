"""A layer's stack as every operation meets it: whether the layer can run from here at all, whether its
stack is used, created or was lost, and the ledger record each write to it leaves."""

from __future__ import annotations

from typing import Optional

from bootstrap.apply.services import Services
from bootstrap.apply.steps import LayerStep, StackAction, kubernetes_endpoint, stack_action
from bootstrap.engine.errors import StackLost
from bootstrap.records.runs import RunLog
from bootstrap.target import Target


def layer_skip_reason(target: Target, step: LayerStep, services: Services) -> Optional[str]:
    if step.skip_reason or not step.needs_kubernetes:
        return step.skip_reason
    outputs = target.engine.outputs("cluster").values
    endpoint = kubernetes_endpoint(outputs)
    if endpoint is None:
        return ("the cluster layer exports no reachable API endpoint (cluster_endpoint is missing), so there is "
                "no Kubernetes API to install Flux into; apply the cluster layer first")
    host, port = endpoint
    why = services.probe(host, port)
    if why:
        return (f"the cluster API at {host}:{port} is not reachable from here ({why}); a private endpoint "
                "needs a run from inside the VPC (or endpoint_public_access with your address allowed)")
    return None


def pulumi_never_ran(store) -> bool:
    """Whether no Pulumi command has ever run on the state bucket: there is no `.pulumi/meta.yaml`, which every
    command writes on its first use of a bucket (pkg/backend/diy/backend.go:330, ensurePulumiMeta in meta.go:
    65-112 and WriteTo :151-169), and no stack under `.pulumi/stacks/`. Then no stack exists, and asking Pulumi
    would write that file first: a write the plan and record roles may not make (AccessDenied)."""
    from bootstrap.records import layout

    if store.get(f"{layout.PULUMI}/meta.yaml") is not None:
        return False
    return next(iter(store.keys(f"{layout.PULUMI}/stacks/", page_size=1)), None) is None


def stack_action_for(target: Target, services: Services, layer: str, operation, *,
                     never_ran: bool = False) -> StackAction:
    """Whether the layer's stack is used, created or reported; StackLost (exit 3) when the ledger knows it
    but the backend no longer has it. `never_ran` (`pulumi_never_ran`): no stack exists, Pulumi is not asked."""
    exists = False if never_ran else target.engine.stack_exists(layer)
    serial = 0 if exists else services.ledger_serial(target.store, layer, target.name)
    action = stack_action(operation, exists, serial)
    if action == "lost":
        raise StackLost(target.name, layer, serial)
    return action


def record_ledger(target: Target, services: Services, log: RunLog, layer: str, operation: str,
                  lineage: Optional[str]) -> Optional[int]:
    # Recorded before the contract check: the state changed whether or not the contract holds, and
    # every stored state version the run produced must be in the ledger.
    with log.phase("ledger", layer) as note:
        rec = services.append_record(target.store, layer, target.name, operation=operation,
                                     run_id=log.record.run_id, git_commit=log.record.git_commit,
                                     lineage=lineage, clock=services.clock)
        serial = getattr(rec, "serial", None)
        note["detail"] = f"serial {serial}"
    return serial
