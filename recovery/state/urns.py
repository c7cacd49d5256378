"""Pulumi URNs, and which entries of a state's resource list are resources at all.

A URN is `urn:pulumi:<stack>::<project>::<qualified type>::<name>`; a provider reference is
`<provider URN>::<provider id>`. Shared by the import plans, the state-versus-live classification and
the pending-create resolution. Pure.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

ROOT_STACK = "pulumi:pulumi:Stack"
PROVIDER_PREFIX = "pulumi:providers:"
NOT_IMPORTED = frozenset({ROOT_STACK, "pulumi:pulumi:StackReference"})


def urn_parts(urn: str) -> tuple[str, str, str, str] | None:
    """`urn:pulumi:<stack>::<project>::<qualified type>::<name>` → (stack, project, qtype, name)."""
    if not isinstance(urn, str) or not urn.startswith("urn:pulumi:"):
        return None
    parts = urn[len("urn:pulumi:"):].split("::", 3)
    if len(parts) != 4:
        return None
    return parts[0], parts[1], parts[2], parts[3]


def logical_name(urn: str) -> str:
    parts = urn_parts(urn)
    return parts[3] if parts else urn


def provider_urn(reference: str) -> str:
    """A provider reference is `<urn>::<id>`; the URN is everything before the last `::`."""
    return reference.rsplit("::", 1)[0] if reference.count("::") >= 4 else reference


def is_default_provider(urn: str) -> bool:
    name = logical_name(urn)
    return name == "default" or name.startswith("default_")


def expected_urn(stack: str, project: str, typ: str, name: str, parent_urn: str | None) -> str:
    """The URN Pulumi gives a resource: the parent's qualified type is prefixed unless it is the stack."""
    qualified = typ
    if parent_urn:
        parent = urn_parts(parent_urn)
        if parent and parent[2] != ROOT_STACK:
            qualified = f"{parent[2]}${typ}"
    return f"urn:pulumi:{stack}::{project}::{qualified}::{name}"


def live_resources(resources: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Drop `delete: true` leftovers and anything without a usable URN/type."""
    out = []
    for res in resources:
        if not isinstance(res, Mapping) or res.get("delete") is True:
            continue
        if not isinstance(res.get("urn"), str) or not isinstance(res.get("type"), str):
            continue
        out.append(res)
    return out
