"""Reading Pulumi state: checkpoints and stack exports, plain, gzip or zstd, into a frozen `StateDoc`.

Pulumi writes two shapes: the DIY backend's checkpoint (`{"version", "checkpoint": {"stack", "latest"}}`,
the stack named in `stack` in every version, apitype.CheckpointV1-V3) and `pulumi stack export`
(`{"version", "deployment"}`). Both hold one deployment: a manifest, a secrets provider, resources,
pending operations and (newer CLIs) snippets.

Whatever the bytes are, this module either returns a `StateDoc` or raises `NotAState`; it never lets a
Python exception escape. A file that *is* a state but has a damaged resource entry (a field of the wrong
type, an entry that is not an object) still loads: the damage becomes a finding, because an operator
recovering from it wants to see everything else that is in it. The bytes (caps, decompression, JSON) are
`recovery.state.state_bytes`'s, the model is `recovery.state.state_model`'s, and the integrity rules live in
`recovery.lineage.integrity`.
"""

from __future__ import annotations

import gc
import hashlib
from contextlib import contextmanager
from dataclasses import fields
from pathlib import Path
from typing import Any, Iterator, Optional

from bootstrap.layers import LINEAGE_OUTPUT
from recovery.state.state_bytes import NotAState, decompress, load_json, read_state_bytes
from recovery.state.state_model import Finding, Manifest, PendingOperation, Resource, StateDoc

SUPPORTED_VERSIONS = (1, 2, 3, 4)
ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def _type_name(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


class _Fields:
    """Typed reads from one JSON object; a value of the wrong type is recorded, not raised."""

    def __init__(self, obj: dict, where: str, urn: Optional[str], index: Optional[int], findings: list):
        self.obj, self.where, self.urn, self.index, self.findings = obj, where, urn, index, findings
        self.bad: set[str] = set()

    def _wrong(self, key: str, want: str) -> None:
        self.bad.add(key)
        self.findings.append(Finding(
            "malformed-field", self.urn,
            f"{self.where} has '{key}' as {_type_name(self.obj[key])} where Pulumi stores {want}; "
            "Pulumi itself would refuse to load this file.", self.index))

    def str(self, key: str) -> str:
        v = self.obj.get(key)
        if v is None:
            return ""
        if not isinstance(v, str):
            self._wrong(key, "a string")
            return ""
        return v

    def bool(self, key: str) -> bool:
        v = self.obj.get(key)
        if v is None:
            return False
        if not isinstance(v, bool):
            self._wrong(key, "true or false")
            return False
        return v

    def str_list(self, key: str) -> tuple[str, ...]:
        v = self.obj.get(key)
        if v is None:
            return ()
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            self._wrong(key, "a list of URNs")
            return ()
        return tuple(v)

    def prop_deps(self, key: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
        v = self.obj.get(key)
        if v is None:
            return ()
        ok = isinstance(v, dict) and all(
            d is None or (isinstance(d, list) and all(isinstance(x, str) for x in d)) for d in v.values())
        if not ok:
            self._wrong(key, "an object of property name to list of URNs")
            return ()
        return tuple((k, tuple(d or ())) for k, d in v.items())

    def obj_(self, key: str) -> dict:
        v = self.obj.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            self._wrong(key, "an object")
            return {}
        return v


def _str_list(v: Any) -> bool:
    return v.__class__ is list and all(x.__class__ is str for x in v)


def _fast_resource(raw: dict, index: int) -> Optional[Resource]:
    """The resource when every field `_resource` reads has its JSON type (nearly always), else None.

    A state has thousands of resources: each field is read once, its type checked by class, and the
    frozen dataclass filled without its per-field __setattr__ (a tenth of a large state's parse time)."""
    g = raw.get
    urn, typ, rid, parent, provider, deleted_with = (g("urn"), g("type"), g("id"), g("parent"), g("provider"),
                                                     g("deletedWith"))
    for v in (urn, typ, rid, parent, provider, deleted_with):
        if v is not None and v.__class__ is not str:
            return None
    custom, delete, protect, pending = g("custom"), g("delete"), g("protect"), g("pendingReplacement")
    for v in (custom, delete, protect, pending):
        if v is not None and v.__class__ is not bool:
            return None
    deps, replace_with, pdeps, outputs = g("dependencies"), g("replaceWith"), g("propertyDependencies"), g("outputs")
    if (deps is not None and not _str_list(deps)) or (replace_with is not None and not _str_list(replace_with)):
        return None
    if pdeps is not None and (pdeps.__class__ is not dict or
                              not all(d is None or _str_list(d) for d in pdeps.values())):
        return None
    if outputs is not None and outputs.__class__ is not dict:
        return None
    r = _new_resource(Resource)
    r.__dict__.update(zip(_RESOURCE_FIELDS, (
        index, urn or "", typ or "", rid, custom or False, parent or "", provider or "", tuple(deps or ()),
        tuple((k, tuple(d or ())) for k, d in pdeps.items()) if pdeps else (), deleted_with or "",
        tuple(replace_with or ()), delete or False, protect or False, pending or False, outputs or {}, frozenset())))
    return r


_new_resource = object.__new__
_RESOURCE_FIELDS = tuple(f.name for f in fields(Resource))


def _resource(raw: Any, index: int, findings: list, where: str = "resource") -> Optional[Resource]:
    if raw.__class__ is dict and (fast := _fast_resource(raw, index)) is not None:
        return fast
    if not isinstance(raw, dict):
        findings.append(Finding("malformed-resource", None,
                                f"{where} at index {index} is {_type_name(raw)}, not an object; Pulumi "
                                "itself would refuse to load this file.", index))
        return None
    urn = raw.get("urn") if isinstance(raw.get("urn"), str) else None
    f = _Fields(raw, f"{where} at index {index}" + (f" ({urn})" if urn else ""), urn, index, findings)
    rid = raw.get("id")
    if rid is not None and not isinstance(rid, str):
        f._wrong("id", "a string")
        rid = None
    return Resource(
        index=index, urn=f.str("urn"), type=f.str("type"), id=rid, custom=f.bool("custom"),
        parent=f.str("parent"), provider=f.str("provider"), dependencies=f.str_list("dependencies"),
        property_dependencies=f.prop_deps("propertyDependencies"), deleted_with=f.str("deletedWith"),
        replace_with=f.str_list("replaceWith"), delete=f.bool("delete"), protect=f.bool("protect"),
        pending_replacement=f.bool("pendingReplacement"),
        outputs=f.obj_("outputs"), malformed=frozenset(f.bad),
    )


_OWN_RULE = "groundctl's own rule: Pulumi loads it, as it never checks pending operations"


def _pending(raw: Any, index: int, findings: list) -> Optional[PendingOperation]:
    # Pulumi decodes a null operation, resource or type as empty values and checks none of them
    # (pkg/resource/stack/deployment.go, DeserializeOperation); any other wrong JSON type fails its decoder.
    if not isinstance(raw, dict):
        findings.append(Finding(
            "malformed-pending-operation", None,
            f"pending operation {index} is {_type_name(raw)}, not an object"
            + (f" ({_OWN_RULE})." if raw is None else "; Pulumi itself would refuse to load this file."),
            index, rule="groundctl" if raw is None else "pulumi"))
        return None
    res = None
    if raw.get("resource") is None:
        findings.append(Finding("malformed-pending-operation", None,
                                f"pending operation {index} has no resource ({_OWN_RULE}).", index,
                                rule="groundctl"))
    else:
        res = _resource(raw["resource"], index, findings, where="pending operation resource")
    urn = res.urn if res else None
    op_type = _Fields(raw, f"pending operation {index}", urn, index, findings).str("type")
    if raw.get("type") in (None, ""):  # a wrong JSON type is a malformed field, reported above
        findings.append(Finding("malformed-pending-operation", urn,
                                f"pending operation {index} has no operation type ({_OWN_RULE}).", index,
                                rule="groundctl"))
    return PendingOperation(op_type or "unknown", urn or "", res.type if res else "", res.id if res else None)


def _as_list(dep: dict, key: str, source: str) -> list:
    v = dep.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise NotAState(source, f"its '{key}' is {_type_name(v)}, not a list")
    return v


def _snippet_uuid(raw: Any, index: int, findings: list) -> str:
    """The `uuid` of one snippet (apitype.SnippetV1); "" when it has none, for the integrity rules to judge
    (Go decodes a null snippet as an empty one)."""
    if raw is None:
        return ""
    if not isinstance(raw, dict):
        findings.append(Finding("malformed-field", None, f"snippet {index} is {_type_name(raw)}, not an object; "
                                "Pulumi itself would refuse to load this file.", index))
        return ""
    return _Fields(raw, f"snippet {index}", None, index, findings).str("uuid")


def _deployment(dep: Any, source: str) -> tuple[list, list, Optional[Manifest], Optional[str], list, list]:
    """resources, pending operations, manifest, secrets provider type, findings, snippet UUIDs of one deployment."""
    findings: list[Finding] = []
    if dep is None:  # a checkpoint of a stack that never had an update
        return [], [], None, None, findings, []
    if not isinstance(dep, dict):
        raise NotAState(source, f"its deployment is {_type_name(dep)}, not an object")
    manifest = None
    raw_manifest = dep.get("manifest")
    if isinstance(raw_manifest, dict):
        mf = _Fields(raw_manifest, "the manifest", None, None, findings)
        t = raw_manifest.get("time")
        manifest = Manifest(t if isinstance(t, str) else None, mf.str("magic"), mf.str("version"))
    elif raw_manifest is not None:
        findings.append(Finding("malformed-field", None,
                                f"the manifest is {_type_name(raw_manifest)}, not an object.", None))
    sp = dep.get("secrets_providers")
    secrets = sp.get("type") if isinstance(sp, dict) and isinstance(sp.get("type"), str) else None
    resources = [r for i, raw in enumerate(_as_list(dep, "resources", source))
                 if (r := _resource(raw, i, findings)) is not None]
    pending = [p for i, raw in enumerate(_as_list(dep, "pending_operations", source))
               if (p := _pending(raw, i, findings)) is not None]
    snippets = [_snippet_uuid(raw, i, findings) for i, raw in enumerate(_as_list(dep, "snippets", source))]
    return resources, pending, manifest, secrets, findings, snippets


def _version(obj: dict, source: str) -> int:
    v = obj.get("version")
    if isinstance(v, bool) or not isinstance(v, int):
        raise NotAState(source, f"its 'version' is {_type_name(v)}, not a schema version number")
    if v not in SUPPORTED_VERSIONS:
        raise NotAState(source, f"it declares schema version {v}; groundctl reads versions 1 to 4")
    return v


def lineage_of(resources: tuple[Resource, ...]) -> Optional[str]:
    """The `groundctl_lineage` output of the root stack resource, when the program exports it."""
    for r in resources:
        if r.type == ROOT_STACK_TYPE and not r.delete:
            value = r.outputs.get(LINEAGE_OUTPUT)
            return value if isinstance(value, str) and value else None
    return None


def parse_state(raw: bytes, source: str = "the state", *, sha256: Optional[str] = None) -> StateDoc:
    """Parse the bytes of a checkpoint or an export. Raises `NotAState`; never anything else.

    `sha256` is the digest of `raw` when the caller already has it (a download thread hashes the
    bytes while the parser is busy with the previous state)."""
    digest = sha256 or hashlib.sha256(raw).hexdigest()
    data, compression = decompress(raw, source)
    with _collector_paused():
        return _state_doc(load_json(data, source, keep_inputs=False), source, digest, len(raw), compression)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while one state is decoded and modelled.

    A state is a tree of tens of thousands of dicts and lists with no cycles, yet allocating them sets the
    collector off every few hundred objects, each time walking everything young: a fifth of the parse
    time, for nothing to collect. Whoever paused it resumes it, so threads parsing side by side never
    leave it off."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _state_doc(obj: Any, source: str, digest: str, size: int, compression: str) -> StateDoc:
    if not isinstance(obj, dict):
        raise NotAState(source, f"its top level is {_type_name(obj)}, not an object")
    stack: Optional[str] = None
    stack_findings: list[Finding] = []
    if "deployment" in obj:
        kind, version, dep = "export", _version(obj, source), obj["deployment"]
        if dep is None:
            raise NotAState(source, "its 'deployment' is null")
    elif "checkpoint" in obj:
        kind, version = "checkpoint", _version(obj, source)
        cp = obj["checkpoint"] if obj["checkpoint"] is not None else {}
        if not isinstance(cp, dict):
            raise NotAState(source, f"its 'checkpoint' is {_type_name(cp)}, not an object")
        # Every checkpoint version names its stack in `stack` (sdk/go/common/apitype/core.go, CheckpointV1's
        # `json:"stack"`); a pre-2018 `target` key is unknown to Pulumi, which reads no stack name from it.
        stack = _Fields(cp, "the checkpoint", None, None, stack_findings).str("stack") or None
        dep = cp.get("latest")
    elif "version" not in obj and ("latest" in obj or "stack" in obj):
        # Checkpoints from before Pulumi versioned them are a bare version-1 checkpoint
        # (pkg/resource/stack/checkpoint.go, `case 0`).
        kind, version = "checkpoint", 0
        stack = _Fields(obj, "the checkpoint", None, None, stack_findings).str("stack") or None
        dep = obj.get("latest")
    else:
        raise NotAState(source, "it has neither a 'checkpoint' nor a 'deployment' section")
    resources, pending, manifest, secrets, findings, snippets = _deployment(dep, source)
    res = tuple(resources)
    return StateDoc(
        kind=kind, version=version, stack=stack, resources=res, pending_operations=tuple(pending),
        secrets_provider=secrets, manifest=manifest, lineage=lineage_of(res), sha256=digest, size=size,
        compression=compression, schema_findings=tuple(stack_findings + findings), snippet_uuids=tuple(snippets),
    )


def read_state_file(path: str | Path) -> StateDoc:
    return parse_state(read_state_bytes(path), str(Path(path)))
