"""The parsed model of a Pulumi state: a frozen `StateDoc` of resources, pending operations and findings.

Plain frozen data, built by `recovery.state.state_parse` and read by the integrity rules, the candidate
evaluation and the CLI; nothing here reads or decodes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

PENDING_MEANING = {
    "creating": "Pulumi started creating this resource and never recorded the result: it may exist in "
                "the cloud without being in state. Look for it by its tags; if found, import it.",
    "updating": "Pulumi started updating this resource and never recorded the result: it exists, but its "
                "real settings may differ from state. A refresh shows the difference.",
    "deleting": "Pulumi started deleting this resource and never recorded the result: it may or may not "
                "still exist. Check in the cloud before deciding to keep or drop it.",
    "reading": "Pulumi started reading this external resource; nothing was changed in the cloud. A "
               "refresh settles it.",
    "importing": "Pulumi started importing this resource: it exists in the cloud, and may or may not have "
                 "been adopted into state. Import it again if it is missing from state.",
}


@dataclass(frozen=True)
class Finding:
    """One integrity problem: a stable code, the URN concerned (if any), and a plain sentence. `rule` says
    whose rule it breaks: "pulumi" (Pulumi would refuse the state too) or "groundctl" (a check of
    groundctl's own, stricter than Pulumi)."""

    code: str
    urn: Optional[str]
    message: str
    index: Optional[int] = None
    rule: str = "pulumi"

    def to_dict(self) -> dict:
        return {"code": self.code, "urn": self.urn, "message": self.message, "index": self.index,
                "rule": self.rule}


@dataclass(frozen=True)
class Manifest:
    time: Optional[str]
    magic: str
    version: str


@dataclass(frozen=True)
class Resource:
    index: int
    urn: str
    type: str
    id: Optional[str]
    custom: bool
    parent: str = ""
    provider: str = ""
    dependencies: tuple[str, ...] = ()
    property_dependencies: tuple[tuple[str, tuple[str, ...]], ...] = ()
    deleted_with: str = ""
    replace_with: tuple[str, ...] = ()
    delete: bool = False
    protect: bool = False
    pending_replacement: bool = False
    outputs: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    # Fields whose stored value had the wrong JSON type (normalised to empty here, reported as findings).
    malformed: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        parts = self.urn.split("::", 3)
        return parts[3] if len(parts) == 4 else ""


@dataclass(frozen=True)
class PendingOperation:
    type: str
    urn: str
    resource_type: str
    id: Optional[str]

    @property
    def meaning(self) -> str:
        return PENDING_MEANING.get(
            self.type, f"'{self.type}' is not an operation type Pulumi writes; treat the resource as unknown.")

    def to_dict(self) -> dict:
        return {"type": self.type, "urn": self.urn, "resource_type": self.resource_type, "id": self.id,
                "meaning": self.meaning}


@dataclass(frozen=True)
class StateDoc:
    kind: str                      # "checkpoint" | "export"
    version: int
    stack: Optional[str]
    resources: tuple[Resource, ...]
    pending_operations: tuple[PendingOperation, ...]
    secrets_provider: Optional[str]
    manifest: Optional[Manifest]
    lineage: Optional[str]
    sha256: str
    size: int
    compression: str               # "none" | "gzip" | "zstd"
    schema_findings: tuple[Finding, ...] = ()
    snippet_uuids: tuple[str, ...] = ()  # one per snippet in the deployment, "" where it has none

    def counts_by_type(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.resources:
            counts[r.type] = counts.get(r.type, 0) + 1
        return dict(sorted(counts.items()))
