"""Import plans in `pulumi import --file` format, and the state-versus-live classification.

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
from typing import Any, Iterable, Mapping, Sequence

from recovery.import_ids import import_id, import_id_from_state, rule_for

ROOT_STACK = "pulumi:pulumi:Stack"
PROVIDER_PREFIX = "pulumi:providers:"
NOT_IMPORTED = frozenset({ROOT_STACK, "pulumi:pulumi:StackReference"})


# --- URNs ------------------------------------------------------------------------------------------

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


# --- The plan --------------------------------------------------------------------------------------

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


def _live_resources(resources: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Drop `delete: true` leftovers and anything without a usable URN/type."""
    out = []
    for res in resources:
        if not isinstance(res, Mapping) or res.get("delete") is True:
            continue
        if not isinstance(res.get("urn"), str) or not isinstance(res.get("type"), str):
            continue
        out.append(res)
    return out


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
    live = _live_resources(resources)
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


# --- State versus live -----------------------------------------------------------------------------

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

    for res in _live_resources(state_resources):
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


def plan_for_survivors(survivors: Sequence[LiveItem], state_resources: Sequence[Mapping[str, Any]] = (),
                       declared_parents: Mapping[tuple[str, str], str] | None = None) -> ImportPlan:
    """The plan that adopts survivors into a stack that still has the rest of its state.

    Each survivor's provider is the state's explicit provider for its package when there is exactly
    one, or the one whose region is the survivor's (the backend has a replica-region provider);
    otherwise none, with a note. `declared_parents` maps (type, logical name) to the parent URN the program gives it
    (from a preview or the mock run); without it, survivors are children of the stack.
    """
    providers: dict[str, list[tuple[str, str | None]]] = {}  # package → [(urn, region)]
    for res in _live_resources(state_resources):
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
    by_urn = {r["urn"]: r for r in _live_resources(state_resources)}
    return ImportPlan(name_table, tuple(entries), tuple(skipped), tuple(notes),
                      provider_inputs=_provider_inputs(name_table, by_urn))


# --- Pending creates -------------------------------------------------------------------------------

CLEAR_UNCHECKED_FLAG = "--allow-clear-unchecked-creates"


@dataclass(frozen=True)
class PendingDecision:
    """What to do with one pending create: `import` (it made a live resource, which is, or will be, in
    state under its URN), `clear` (it made nothing, or what it made is already tracked), or `refuse`."""

    urn: str
    type: str
    action: str                  # import | clear | refuse
    reason: str                  # one sentence for the operator
    import_id: str | None = None
    flag: str | None = None      # the flag that lifts a refusal, or that allowed a clear
    tracked: bool = False        # its URN is (or will be) a resource in state

    def to_dict(self) -> dict[str, Any]:
        return {"urn": self.urn, "type": self.type, "action": self.action, "reason": self.reason,
                "import_id": self.import_id, "flag": self.flag, "tracked": self.tracked}


@dataclass(frozen=True)
class PendingResolution:
    decisions: tuple[PendingDecision, ...]

    @property
    def refused(self) -> tuple[PendingDecision, ...]:
        return tuple(d for d in self.decisions if d.action == "refuse")

    @property
    def to_drop(self) -> tuple[str, ...]:
        """The pending operations to remove from state: all of them, once none is refused."""
        return () if self.refused else tuple(d.urn for d in self.decisions)

    @property
    def never_made(self) -> frozenset[str]:
        """URNs whose create made nothing: the program still declares them, so a preview shows them
        as creates until the next `up` makes them."""
        return frozenset(d.urn for d in self.decisions if d.action == "clear" and not d.tracked)

    def summary(self) -> str:
        by = {a: [logical_name(d.urn) for d in self.decisions if d.action == a] for a in ("import", "clear", "refuse")}
        return "; ".join(f"{a}: {', '.join(names)}" for a, names in by.items() if names) or "none"

    def to_dict(self) -> dict[str, Any]:
        return {"decisions": [d.to_dict() for d in self.decisions],
                "imported": [d.urn for d in self.decisions if d.action == "import"],
                "cleared": [d.urn for d in self.decisions if d.action == "clear"],
                "refused": [d.urn for d in self.refused]}


def resolve_pending(pending: Sequence[PendingCreate], covered_types: Iterable[str], tracked_urns: Iterable[str],
                    *, clear_unchecked: bool = False) -> PendingResolution:
    """Decide each pending create. Pure.

    `covered_types` are the types inventory looked for; `tracked_urns` the URNs that are (or, after the
    planned import, will be) resources in state. A live resource is never dropped from tracking: a
    live pending create is `import` only when its URN is tracked, else refused. One that inventory
    could not see is refused unless it is already tracked or the operator vouches for it with
    `clear_unchecked`, because clearing it could orphan a live resource.
    """
    covered, tracked = set(covered_types), set(tracked_urns)
    out: list[PendingDecision] = []
    for p in pending:
        if p.live is not None:
            if p.urn in tracked:
                out.append(PendingDecision(p.urn, p.type, "import", f"live as '{p.live.import_id}' and adopted into "
                                           "state under this URN; only its pending operation goes",
                                           p.live.import_id, tracked=True))
            else:
                out.append(PendingDecision(
                    p.urn, p.type, "refuse", f"live as '{p.live.import_id}' but not in state under this URN, so "
                    "clearing it would drop a live resource from tracking: import it by hand (`pulumi import "
                    f"{p.type} {p.name} {p.live.import_id}` in the layer's folder), then run the recovery again",
                    p.live.import_id))
        elif p.urn in tracked:
            out.append(PendingDecision(p.urn, p.type, "clear", "already in state as a resource: only its pending "
                                       "operation goes", tracked=True))
        elif p.type in covered:
            out.append(PendingDecision(p.urn, p.type, "clear", f"inventory looked for {p.type} and found nothing "
                                       "live: the create made nothing, and the next `up` makes it"))
        elif clear_unchecked:
            out.append(PendingDecision(p.urn, p.type, "clear", f"inventory cannot see {p.type}; cleared on the "
                                       f"operator's word ({CLEAR_UNCHECKED_FLAG}) that it made nothing",
                                       flag=CLEAR_UNCHECKED_FLAG))
        else:
            out.append(PendingDecision(
                p.urn, p.type, "refuse", f"inventory cannot see {p.type}, so whether the interrupted create made "
                "it is unknown and clearing could orphan a live resource: check by hand whether it exists; if it "
                f"does, import it (`pulumi import {p.type} {p.name} <id>` in the layer's folder), if it does not, "
                f"run the recovery again with {CLEAR_UNCHECKED_FLAG}", flag=CLEAR_UNCHECKED_FLAG))
    return PendingResolution(tuple(out))
