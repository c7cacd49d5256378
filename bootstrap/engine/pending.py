"""The pending operations an interrupted update leaves in a deployment, and the two rules over them: no
preview, update or destroy while there are any, and clearing drops only pending creates, only the ones
decided on, and never while other pending operations are there. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from bootstrap.kit.errors import Refused
from bootstrap.kit.untrusted import clip, inert

RESOLVE_RUNBOOK = "runbooks/resolve-pending-operations.md"
MAX_NAMED = 20  # more are counted, not named: the refusal stays one readable paragraph
_DONE = {"preview": "previewed", "plan": "previewed", "drift": "checked for drift", "up": "updated",
         "destroy": "destroyed"}


@dataclass(frozen=True)
class PendingOperation:
    """One operation an interrupted update left: Pulumi's kind (`creating`, `updating`, `deleting`,
    `reading`: sdk/go/common/apitype/core.go:350-359; `importing`: pkg/resource/operation.go:30) and
    its resource."""

    kind: str
    urn: str
    type: str
    name: str

    def describe(self) -> str:
        """`creating aws:ec2/eip:Eip 'nat-0'`, made inert: the state is read from the bucket."""
        return inert(f"{clip(self.kind, 40)} {clip(self.type, 120)} '{clip(self.name, 120)}'", keep_newlines=False)


def pending_operations(deployment: Mapping[str, Any]) -> list[PendingOperation]:
    """Every pending operation of a deployment, in order, whatever its shape. Pure."""
    out = []
    ops = deployment.get("pending_operations") if isinstance(deployment, Mapping) else None
    for op in ops if isinstance(ops, list) else []:
        if not isinstance(op, Mapping):
            out.append(PendingOperation("unknown", "", "(no resource)", "?"))
            continue
        res = op.get("resource") if isinstance(op.get("resource"), Mapping) else {}
        urn = res.get("urn") if isinstance(res.get("urn"), str) else ""
        # `urn:pulumi:<stack>::<project>::<qualified type>::<name>`; the type field wins when present.
        parts = urn.split("::", 3) if urn.startswith("urn:pulumi:") else []
        typ = res.get("type") if isinstance(res.get("type"), str) else (
            parts[2].rsplit("$", 1)[-1] if len(parts) == 4 else "(no resource)")
        name = parts[3] if len(parts) == 4 else (urn or "?")
        out.append(PendingOperation(str(op.get("type") or "unknown"), urn, typ, name))
    return out


class PendingOperationsLeft(Refused):
    """Layers' states hold pending operations: no preview, update or destroy runs until they are resolved.

    Pulumi itself goes ahead: an update only warns (pkg/resource/deploy/deployment_executor.go:183-187,
    printPendingOperationsWarning :90-113), a preview does not even warn (the `!DryRun` there), and the new
    snapshot keeps the pending creates while dropping every other pending operation (pkg/backend/
    snapshot.go:755-772). A create that was cut off may have made its resource, which the update then
    makes again (a second EIP, NAT gateway or launch template; the first one orphaned and billed).

    `by_layer` holds each refused layer's operations in the run's order; one layer reads as that layer's
    refusal, several as the run's."""

    def __init__(self, environment: str, operation: str, by_layer: Mapping[str, Sequence[PendingOperation]]):
        self.environment, self.operation = environment, operation
        self.by_layer = {layer: tuple(ops) for layer, ops in by_layer.items() if ops}
        self.layers = tuple(self.by_layer)
        self.operations = tuple(o for ops in self.by_layer.values() for o in ops)
        creates = [o for o in self.operations if o.kind == "creating"]
        others = [o for o in self.operations if o.kind != "creating"]
        count = f"{len(self.operations)} pending operation{'s' if len(self.operations) != 1 else ''}"
        done = _DONE.get(operation, operation)
        if len(self.layers) == 1:
            subject = (f"Layer '{self.layers[0]}' of environment '{environment}' was not {done}: its state holds "
                       f"{count} an interrupted update left ({_named(self.operations, '; ')})")
        else:
            shown, listed = MAX_NAMED, []
            for layer, ops in self.by_layer.items():
                listed.append(f"layer '{layer}': {_named(ops, ', ', limit=max(shown, 0))}")
                shown -= len(ops)
            subject = (f"Environment '{environment}' was not {done}: the states of its layers "
                       f"{', '.join(repr(lay) for lay in self.layers)} hold {count} an interrupted update left "
                       f"({'; '.join(listed)})")
        steps = []
        if others:
            where = "" if len(self.layers) == 1 else \
                f" (in {_and([lay for lay, ops in self.by_layer.items() if any(o.kind != 'creating' for o in ops)])})"
            steps.append(
                f"{'first ' if creates else ''}the {len(others)} that {'are' if len(others) != 1 else 'is'} not "
                f"a create{where}: check each resource in the cloud, then refresh exactly those resources with "
                f"Pulumi, as {RESOLVE_RUNBOOK} says (a refresh records what is live and drops those operations"
                + ("; it keeps the pending creates)" if creates else ")"))
        if creates:
            recovers = [f"`groundctl recover {environment} {lay}`" for lay, ops in self.by_layer.items()
                        if any(o.kind == "creating" for o in ops)]
            steps.append(
                f"{'then ' if others else ''}the {len(creates)} pending create{'s' if len(creates) != 1 else ''}: "
                f"{_and(recovers)} (with --dry-run first to see what {'it' if len(recovers) == 1 else 'each'} "
                f"will do), which adopt{'s' if len(recovers) == 1 else ''} what a create made and "
                f"drop{'s' if len(recovers) == 1 else ''} the rest")
        super().__init__(
            f"{subject}. Pulumi would go ahead anyway, "
            + ("making a second copy of anything a cut-off create had already made" if creates else "")
            + (" and " if creates and others else "")
            + (("dropping the others" if creates else "dropping them") + " unchecked" if others else "")
            + f", so nothing was changed. Resolve {'; '.join(steps)}. Then run the command again.")


def _named(ops: Sequence[PendingOperation], sep: str, limit: int = MAX_NAMED) -> str:
    named = sep.join(o.describe() for o in ops[:limit])
    if len(ops) > limit:
        named += f"{sep if named else ''}and {len(ops) - limit} more"
    return named


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" and {items[-1]}"


def refuse_pending(environment: str, layer: str, operation: str,
                   deployment: Mapping[str, Any]) -> Optional[PendingOperationsLeft]:
    """The refusal of `operation` (preview, up, destroy) on a layer whose deployment holds pending
    operations, or None when it holds none. Pure."""
    return refuse_pending_layers(environment, operation, {layer: deployment})


def refuse_pending_layers(environment: str, operation: str,
                          deployments: Mapping[str, Optional[Mapping[str, Any]]]) -> Optional[PendingOperationsLeft]:
    """The refusal of a whole run of `operation` (plan, up, destroy, drift) naming every pending operation of
    every layer (`deployments` in the run's order; None for a layer without a state), or None when there is
    none. Pure."""
    found = {layer: pending_operations(dep) for layer, dep in deployments.items() if dep}
    found = {layer: ops for layer, ops in found.items() if ops}
    return PendingOperationsLeft(environment, operation, found) if found else None


def pending_create_urns(deployment: Mapping[str, Any]) -> list[str]:
    """The URNs of a deployment's pending CREATE operations, in order. Pure."""
    out = []
    for op in deployment.get("pending_operations") or []:
        if not isinstance(op, Mapping) or op.get("type") != "creating":
            continue
        res = op.get("resource")
        if isinstance(res, Mapping) and isinstance(res.get("urn"), str):
            out.append(res["urn"])
    return out


def other_pending_operations(deployment: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(type, URN) of every pending operation that is not a create (deleting, updating, reading,
    importing), in order. Any Pulumi update that writes a snapshot drops these: only the base snapshot's
    pending creates are carried into the new one (pkg/backend/snapshot.go, the snapshot manager's
    `snap()`). Pure."""
    out = []
    for op in deployment.get("pending_operations") or []:
        if not isinstance(op, Mapping) or op.get("type") == "creating":
            continue
        res = op.get("resource")
        urn = res.get("urn") if isinstance(res, Mapping) else None
        out.append((str(op.get("type") or "unknown"), urn if isinstance(urn, str) else "(no resource)"))
    return out


def refuse_other_pending(environment: str, layer: str, others: Sequence[tuple[str, str]]) -> Refused:
    """Why pending creates are not cleared while other pending operations are in the state."""
    named = "; ".join(f"{kind} {urn}" for kind, urn in others)
    return Refused(
        f"Layer '{layer}' of environment '{environment}' also has {len(others)} pending operation(s) that are "
        f"not creates ({named}): an interrupted update was changing or deleting these resources. Clearing the "
        "pending creates runs a Pulumi refresh, and every Pulumi update keeps only pending creates, so these "
        "would be dropped silently; nothing was changed. Check each resource in the cloud, then refresh them so "
        f"the state says what is live (in stacks/{layer}: `pulumi refresh --stack {environment} --target <urn>`, "
        f"with the settings {RESOLVE_RUNBOOK} gives), and run `groundctl recover` again.")


def unexpected_pending_creates(deployment: Mapping[str, Any], urns: Sequence[str]) -> list[str]:
    """The deployment's pending creates that are not in `urns`: clearing them all would drop these. Pure."""
    allowed = set(urns)
    return [u for u in pending_create_urns(deployment) if u not in allowed]
