"""What a layer's `up` must write before its preview can run: the approval gate comes before these writes.

The first `up` of a layer creates its Pulumi stack (an empty checkpoint in the state bucket), and the first
`up` of the backend layer also adopts (imports into that stack) the bucket and key the bootstrap made, so
that its preview plans no second key or bucket. Both change the state before there is a plan to show, so
they are decided here from what is read, shown at a gate of their own, and done only once approved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Setup:
    create_stack: bool = False
    adoption: Optional[dict] = None  # the `pulumi import --file` document the backend's first up imports

    @property
    def needed(self) -> bool:
        return self.create_stack or self.adoption is not None

    @property
    def adopted_names(self) -> list[str]:
        entries = (self.adoption or {}).get("resources") or []
        return [f"{e.get('name')} ({str(e.get('type', '')).rsplit(':', 1)[-1]} {e.get('id')})" for e in entries]


def managed_resources(state: dict) -> list[str]:
    """URNs of the resources a stack manages: neither the root stack nor a provider. Pure."""
    deployment = state.get("deployment") or {}
    return [r["urn"] for r in deployment.get("resources") or []
            if isinstance(r, dict) and isinstance(r.get("urn"), str) and r.get("type") != "pulumi:pulumi:Stack"
            and not str(r.get("type", "")).startswith("pulumi:providers:")]


def decide(layer: str, *, stack_exists: bool, state: Optional[dict], environment: str,
           backend_report: Optional[object]) -> Setup:
    """The writes the layer's `up` needs before its preview. Pure: `state` is the existing stack's export
    (read only for the backend layer), `backend_report` what the bootstrap found or made in this run.

    A backend stack that holds resources owns them already; one without any adopts what the bootstrap made."""
    adoption = None
    if layer == "backend" and backend_report is not None and not (stack_exists and managed_resources(state or {})):
        from bootstrap.aws.backend_import import backend_import_document

        adoption = backend_import_document(environment, backend_report)
    return Setup(create_stack=not stack_exists, adoption=adoption)


def summary(setup: Setup, layer: str, environment: str) -> str:
    """What the setup writes, in words (the gate's question and the run record say it). Pure."""
    parts = []
    if setup.create_stack:
        parts.append(f"create the empty Pulumi stack organization/{layer}/{environment}")
    if setup.adoption is not None:
        names = setup.adopted_names
        parts.append(f"adopt {len(names)} existing resources into it by import (nothing in AWS changes): "
                     + ", ".join(names))
    return " and ".join(parts)
