"""State versus live: which state resources are live, which live resources are survivors the state lost,
and what each pending create left behind. Matched by (type, import ID). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from recovery.survivors.import_ids import import_id, import_id_from_state
from recovery.state.urns import NOT_IMPORTED, PROVIDER_PREFIX, live_resources, logical_name


@dataclass(frozen=True)
class LiveItem:
    """One live resource found by inventory, with what an import needs."""

    type: str
    name: str | None          # logical name: the `groundctl:name` tag, or the naming convention for children
    import_id: str
    arn: str | None = None
    parent_name: str | None = None  # the tagged parent it was found through, for children
    layer: str | None = None
    region: str | None = None       # the region it was found in (picks the provider of that region)


@dataclass(frozen=True)
class StateRef:
    urn: str
    type: str
    name: str
    import_id: str | None


@dataclass(frozen=True)
class PendingCreate:
    urn: str
    type: str
    name: str
    live: LiveItem | None


@dataclass(frozen=True)
class Classification:
    in_state_and_live: tuple[tuple[StateRef, LiveItem], ...]
    survivors: tuple[LiveItem, ...]             # live, not in state: import
    in_state_not_live: tuple[StateRef, ...]     # to drop after the operator confirms
    not_checked: tuple[StateRef, ...]           # types inventory cannot see: neither confirmed nor denied
    pending_creates: tuple[PendingCreate, ...]  # a create was in flight; live ones are also survivors
    unnamed: tuple[LiveItem, ...] = ()          # tagged but without `groundctl:name`: cannot be named

    def counts(self) -> dict[str, int]:
        return {"in_state_and_live": len(self.in_state_and_live), "survivors": len(self.survivors),
                "in_state_not_live": len(self.in_state_not_live), "not_checked": len(self.not_checked),
                "pending_creates": len(self.pending_creates), "unnamed": len(self.unnamed)}


def classify(state_resources: Sequence[Mapping[str, Any]], live: Sequence[LiveItem],
             pending_operations: Sequence[Mapping[str, Any]] = (),
             inventoried_types: Iterable[str] | None = None) -> Classification:
    """Match state and live by (type, import ID); by (type, logical name) only where the ID is unknown.

    `inventoried_types` are the types inventory looked for; a state resource of another type is
    `not_checked` rather than "not live", so nothing is dropped on missing evidence.
    """
    covered = set(inventoried_types) if inventoried_types is not None else {i.type for i in live}
    by_id = {(i.type, i.import_id): i for i in live}
    by_name = {(i.type, i.name): i for i in live if i.name}
    used: set[int] = set()
    matched: list[tuple[StateRef, LiveItem]] = []
    missing: list[StateRef] = []
    unchecked: list[StateRef] = []

    for res in live_resources(state_resources):
        typ = res["type"]
        if res.get("custom") is not True or typ in NOT_IMPORTED or typ.startswith(PROVIDER_PREFIX):
            continue
        ident = import_id_from_state(res)
        ref = StateRef(res["urn"], typ, logical_name(res["urn"]), ident.value)
        # By name only when the state cannot say its ID: a same-named live resource with another ID
        # is a replacement made outside Pulumi, reported as "not live" + a survivor, never merged.
        hit = by_id.get((typ, ident.value)) if ident.value else by_name.get((typ, ref.name))
        if hit is not None:
            matched.append((ref, hit))
            used.add(id(hit))
        elif typ in covered:
            missing.append(ref)
        else:
            unchecked.append(ref)

    pending: list[PendingCreate] = []
    for op in pending_operations:
        if not isinstance(op, Mapping) or op.get("type") != "creating":
            continue
        res = op.get("resource")
        if not isinstance(res, Mapping) or not isinstance(res.get("urn"), str):
            continue
        typ, name = str(res.get("type", "")), logical_name(res["urn"])
        ident = import_id(typ, {**(res.get("inputs") or {}), **(res.get("outputs") or {})}, res.get("id"))
        hit = (by_id.get((typ, ident.value)) if ident.value else None) or by_name.get((typ, name))
        pending.append(PendingCreate(res["urn"], typ, name, hit))

    survivors = tuple(i for i in live if id(i) not in used and i.name)
    unnamed = tuple(i for i in live if id(i) not in used and not i.name)
    return Classification(tuple(matched), survivors, tuple(missing), tuple(unchecked), tuple(pending), unnamed)
