"""The pending operations an interrupted update leaves in a deployment, and the rule for dropping them:
only pending creates, only the ones decided on, and never while other pending operations are there. Pure."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from bootstrap.errors import Refused


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
        "see the README's Layers section for running Pulumi by hand), and run `groundctl recover` again.")


def unexpected_pending_creates(deployment: Mapping[str, Any], urns: Sequence[str]) -> list[str]:
    """The deployment's pending creates that are not in `urns`: clearing them all would drop these. Pure."""
    allowed = set(urns)
    return [u for u in pending_create_urns(deployment) if u not in allowed]
