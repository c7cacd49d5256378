"""Import plans in `pulumi import --file` format: from a whole state, or for live survivors.

The file format is Pulumi's own (pkg/cmd/pulumi/operations/import.go, `importFile`/`importSpec`):
`{"nameTable": {name: urn}, "resources": [{"type", "name", "id", "parent"?, "provider"?, "version"?,
"component"?, "logicalName"?}]}`. `parent` and `provider` are *names*: either another entry's `name`
or a `nameTable` key. A provider must be a `nameTable` URN that already exists in the target stack
(explicit providers are not imported); leaving `provider` out makes Pulumi use (and create) the
default provider of `version`. An explicit provider missing from the target stack is created by the
import from `providerInputs` (name → its serialized inputs, secrets as ciphertext), which every plan here
writes from the state's own provider inputs; without them Pulumi would build it from ambient settings
(wrong region, no assumed role, no allowed account: pkg/resource/deploy/import.go). A child of the root stack needs no `parent`. Component parents are
recreated as `component: true` entries (no id), so children get their original URNs back.
`name` must be unique in the file (it is how entries refer to each other); when two resources share
a logical name, the later one gets a distinct `name` and keeps its URN name in `logicalName`.

Pure: plain dicts in (resources as in a Pulumi deployment), frozen values out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from recovery.survivors.import_ids import import_id_from_state, rule_for
from recovery.survivors.state_vs_live import LiveItem
from recovery.state.urns import (
    NOT_IMPORTED, PROVIDER_PREFIX, ROOT_STACK, expected_urn, is_default_provider, live_resources, logical_name,
    provider_urn, urn_parts,
)


@dataclass(frozen=True)
class ImportEntry:
    type: str
    name: str
    id: str | None = None
    parent: str | None = None
    provider: str | None = None
    version: str | None = None
    component: bool = False
    logical_name: str | None = None  # set only when it differs from `name`
    source_urn: str | None = None    # where it came from (not written to the file)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "name": self.name}
        if self.id is not None:
            out["id"] = self.id
        for key, value in (("parent", self.parent), ("provider", self.provider), ("version", self.version),
                           ("logicalName", self.logical_name)):
            if value:
                out[key] = value
        if self.component:
            out["component"] = True
        return out


@dataclass(frozen=True)
class Skipped:
    urn: str
    type: str
    reason: str


@dataclass(frozen=True)
class ImportPlan:
    name_table: Mapping[str, str]
    resources: tuple[ImportEntry, ...]
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()
    urn_changes: Mapping[str, str] = field(default_factory=dict)  # old URN → URN the import will give
    provider_inputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # nameTable key → inputs

    def to_pulumi_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nameTable": dict(self.name_table), "resources": [e.to_json() for e in self.resources]}
        if self.provider_inputs:
            out["providerInputs"] = {k: dict(v) for k, v in self.provider_inputs.items()}
        return out

    @property
    def custom_count(self) -> int:
        return sum(1 for e in self.resources if not e.component)

    def summary(self) -> dict[str, Any]:
        return {
            "resources": self.custom_count,
            "components": len(self.resources) - self.custom_count,
            "skipped": [{"urn": s.urn, "type": s.type, "reason": s.reason} for s in self.skipped],
            "notes": list(self.notes),
            "urn_changes": dict(self.urn_changes),
        }


class _Names:
    """Allocates unique `name`s for entries and nameTable keys."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def claim(self, wanted: str, typ: str) -> str:
        if wanted not in self.taken:
            self.taken.add(wanted)
            return wanted
        base = f"{wanted}-{typ.rsplit(':', 1)[-1]}"
        candidate, n = base, 2
        while candidate in self.taken:
            candidate, n = f"{base}{n}", n + 1
        self.taken.add(candidate)
        return candidate


def _provider_version(provider: Mapping[str, Any] | None) -> str | None:
    if not provider:
        return None
    for bag in (provider.get("inputs"), provider.get("outputs")):
        if isinstance(bag, Mapping) and isinstance(bag.get("version"), str) and bag["version"]:
            return bag["version"]
    return None


def _provider_inputs(name_table: Mapping[str, str], by_urn: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    """The state's inputs of every explicit provider the plan names, by its nameTable key."""
    out: dict[str, dict] = {}
    for key, urn in name_table.items():
        parts = urn_parts(urn)
        prov = by_urn.get(urn)
        if parts and parts[2].startswith(PROVIDER_PREFIX) and prov is not None and isinstance(prov.get("inputs"), Mapping):
            out[key] = dict(prov["inputs"])
    return out


def plan_from_state(resources: Sequence[Mapping[str, Any]]) -> ImportPlan:
    """The plan that re-adopts every custom resource of a state with its logical name, parent and provider.

    Providers are referenced, never imported; components are recreated; the root stack and stack
    references are left to Pulumi. A resource whose import ID cannot be built is skipped with a reason.
    """
    live = live_resources(resources)
    by_urn: dict[str, Mapping[str, Any]] = {}
    for res in live:
        by_urn.setdefault(res["urn"], res)

    names = _Names()
    name_table: dict[str, str] = {}
    entry_name: dict[str, str] = {}       # URN → the entry name that refers to it
    table_name: dict[str, str] = {}       # URN → its nameTable key
    entries: list[ImportEntry] = []
    skipped: list[Skipped] = []
    notes: list[str] = []
    new_urn: dict[str, str] = {}
    visiting: set[str] = set()

    def table_ref(urn: str, typ: str) -> str:
        if urn not in table_name:
            key = names.claim(logical_name(urn), typ)
            table_name[urn] = key
            name_table[key] = urn
        return table_name[urn]

    def parent_ref(res: Mapping[str, Any]) -> tuple[str | None, str | None]:
        """(name to write as `parent`, the parent's URN in the new stack)."""
        parent = res.get("parent")
        if not isinstance(parent, str) or not parent:
            return None, None
        target = by_urn.get(parent)
        if target is None:
            return table_ref(parent, "Parent"), parent  # dangling: keep the reference, the import reports it
        if target["type"] == ROOT_STACK:
            return None, None
        visit(target)
        if parent in entry_name:
            return entry_name[parent], new_urn.get(parent, parent)
        return table_ref(parent, target["type"]), parent

    def visit(res: Mapping[str, Any]) -> None:
        urn, typ = res["urn"], res["type"]
        if urn in entry_name or urn in visiting or typ in NOT_IMPORTED or typ.startswith(PROVIDER_PREFIX):
            return
        visiting.add(urn)  # guards hostile parent cycles
        if res.get("external") is True:
            skipped.append(Skipped(urn, typ, "read with `get`, not managed: the program reads it again"))
            return
        custom = res.get("custom") is True
        ident = None
        if custom:
            ident = import_id_from_state(res)
            if not ident.ok:
                skipped.append(Skipped(urn, typ, ident.problem or "no import ID"))
                return
            if not ident.verified:
                notes.append(f"{typ}: no documented import ID rule in groundctl; the state id "
                             f"'{ident.value}' is used as is for {logical_name(urn)}")
        parent_name, parent_new_urn = parent_ref(res)
        provider_name, version = None, None
        reference = res.get("provider")
        if custom and isinstance(reference, str) and reference:
            purn = provider_urn(reference)
            prov = by_urn.get(purn)
            if is_default_provider(purn):
                version = _provider_version(prov)
            else:
                provider_name = table_ref(purn, "Provider")
        logical = logical_name(urn)
        name = names.claim(logical, typ)
        entry = ImportEntry(
            type=typ, name=name, id=ident.value if ident else None, parent=parent_name,
            provider=provider_name, version=version, component=not custom,
            logical_name=logical if name != logical else None, source_urn=urn,
        )
        entry_name[urn] = name
        parts = urn_parts(urn)
        if parts:
            new_urn[urn] = expected_urn(parts[0], parts[1], typ, logical, parent_new_urn)
        entries.append(entry)

    for res in live:
        visit(res)

    provider_inputs = _provider_inputs(name_table, by_urn)
    explicit = sorted((key, urn) for key, urn in name_table.items() if urn_parts(urn) and
                      urn_parts(urn)[2].startswith(PROVIDER_PREFIX))  # type: ignore[index]
    for key, urn in explicit:
        if key not in provider_inputs:
            notes.append(f"explicit provider {urn} has no inputs in this state: create it in the target stack "
                         f"first (`pulumi up --target '{urn}'`), then run the import")
    changes = {old: new for old, new in new_urn.items() if old != new}
    if changes:
        notes.append(f"{len(changes)} resource(s) will get a different URN than in this state (the state "
                     "predates Pulumi's parent-type URN encoding, or a parent was not recreated)")
    return ImportPlan(name_table, tuple(entries), tuple(skipped), tuple(notes), changes, provider_inputs)


def plan_for_survivors(survivors: Sequence[LiveItem], state_resources: Sequence[Mapping[str, Any]] = (),
                       declared_parents: Mapping[tuple[str, str], str] | None = None) -> ImportPlan:
    """The plan that adopts survivors into a stack that still has the rest of its state.

    Each survivor's provider is the state's explicit provider for its package when there is exactly
    one, or the one whose region is the survivor's (the backend has a replica-region provider);
    otherwise none, with a note. `declared_parents` maps (type, logical name) to the parent URN the program gives it
    (from a preview or the mock run); without it, survivors are children of the stack.
    """
    providers: dict[str, list[tuple[str, str | None]]] = {}  # package → [(urn, region)]
    for res in live_resources(state_resources):
        typ = res["type"]
        if typ.startswith(PROVIDER_PREFIX) and not is_default_provider(res["urn"]):
            bags = [b for b in (res.get("inputs"), res.get("outputs")) if isinstance(b, Mapping)]
            region = next((b["region"] for b in bags if isinstance(b.get("region"), str)), None)
            providers.setdefault(typ[len(PROVIDER_PREFIX):], []).append((res["urn"], region))
    names = _Names()
    name_table: dict[str, str] = {}
    entries: list[ImportEntry] = []
    skipped: list[Skipped] = []
    notes: list[str] = []

    def ref(urn: str) -> str:
        for key, value in name_table.items():
            if value == urn:
                return key
        key = names.claim(logical_name(urn), "Ref")
        name_table[key] = urn
        return key

    for item in sorted(survivors, key=lambda i: (i.parent_name is not None, i.type, i.name or "")):
        if not item.name:
            skipped.append(Skipped(item.arn or item.import_id, item.type, "no `groundctl:name` tag"))
            continue
        candidates = providers.get(item.type.split(":", 1)[0], [])
        in_region = [urn for urn, region in candidates if item.region and region == item.region]
        chosen = in_region if len(in_region) == 1 else [urn for urn, _ in candidates]
        provider = ref(chosen[0]) if len(chosen) == 1 else None
        if provider is None and candidates:
            notes.append(f"{item.type} {item.name}: several explicit providers could own it; set its "
                         "`provider` in the plan by hand")
        parent_urn = (declared_parents or {}).get((item.type, item.name))
        parent = ref(parent_urn) if parent_urn and urn_parts(parent_urn) and \
            urn_parts(parent_urn)[2] != ROOT_STACK else None  # type: ignore[index]
        name = names.claim(item.name, item.type)
        entries.append(ImportEntry(item.type, name, item.import_id, parent, provider,
                                   logical_name=item.name if name != item.name else None,
                                   source_urn=item.arn))
    if any(rule_for(e.type) is None for e in entries):
        notes.append("some survivor types have no documented import ID rule")
    by_urn = {r["urn"]: r for r in live_resources(state_resources)}
    return ImportPlan(name_table, tuple(entries), tuple(skipped), tuple(notes),
                      provider_inputs=_provider_inputs(name_table, by_urn))
