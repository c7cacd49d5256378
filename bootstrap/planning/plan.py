"""What a preview says will happen, as plain data, and which of it is risky.

Everything above the engine boundary works on these values, never on Automation API objects.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass

# Operations as the Pulumi engine names them (StepOp, pkg/resource/deploy/step.go).
# Not a change, exactly as Pulumi's HasChanges (pkg/engine/update.go) counts: `discard` drops a resource
# that was only read from state, and `read-replacement` re-reads one; neither touches anything live.
# The diff key of a resource a refresh found deleted (it is gone, not changed), set by the engine's event reading
# and read by the drift rule.
DELETED_MARK = "<deleted>"

NO_CHANGE_OPS = frozenset({"same", "read", "discard", "read-replacement"})
# Steps whose Apply deletes or supersedes a real resource. `discard-replaced` and `remove-pending-replace`
# only edit the state (a read resource, or one already deleted by a delete-before-replace): they are
# changes, but nothing live goes away, so they need no --allow-destroy.
DESTRUCTIVE_OPS = frozenset({"delete", "replace", "create-replacement", "delete-replaced", "import-replacement"})

# Types whose loss loses data or identity: replacing or deleting one is never routine.
STATEFUL_TYPES = frozenset({
    "aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2", "aws:kms/key:Key", "aws:eks/cluster:Cluster",
    "aws:ec2/vpc:Vpc", "aws:ec2/eip:Eip", "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
    "kubernetes:core/v1:Secret",
})


@dataclass(frozen=True)
class ResourceChange:
    urn: str
    type: str
    operation: str
    diff_keys: tuple[str, ...] = ()
    protected: bool = False

    @property
    def name(self) -> str:
        return self.urn.rsplit("::", 1)[-1]


@dataclass(frozen=True)
class Plan:
    layer: str
    environment: str
    changes: tuple[ResourceChange, ...]
    skipped_reason: str | None = None
    not_deployed: bool = False  # the stack does not exist yet (skipped_reason says so): nothing was previewed

    @property
    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(c.operation for c in self.changes).items()))

    @property
    def has_changes(self) -> bool:
        return any(c.operation not in NO_CHANGE_OPS for c in self.changes)

    @property
    def risky(self) -> tuple[tuple[ResourceChange, str], ...]:
        return tuple((c, r) for c in self.changes if (r := risk_reason(c, self.layer)))

    @property
    def fingerprint(self) -> str:
        """Identifies what would be applied: the sorted (URN, operation, diff keys) set.

        Two previews with the same fingerprint would make the same changes, so an approved plan can
        be compared with a fresh one before applying.
        """
        items = sorted(
            (c.urn, c.operation, sorted(c.diff_keys)) for c in self.changes if c.operation not in NO_CHANGE_OPS
        )
        return hashlib.sha256(json.dumps(items).encode()).hexdigest()

    def to_dict(self) -> dict:
        return {
            "layer": self.layer,
            "environment": self.environment,
            "skipped_reason": self.skipped_reason,
            "not_deployed": self.not_deployed,
            "counts": self.counts,
            "fingerprint": self.fingerprint,
            "changes": [
                {"urn": c.urn, "type": c.type, "name": c.name, "operation": c.operation,
                 "diff_keys": list(c.diff_keys), "protected": c.protected}
                for c in self.changes
            ],
            "risky": [{"urn": c.urn, "operation": c.operation, "reason": r} for c, r in self.risky],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        return cls(
            layer=data["layer"],
            environment=data["environment"],
            skipped_reason=data.get("skipped_reason"),
            not_deployed=bool(data.get("not_deployed")),
            changes=tuple(
                ResourceChange(c["urn"], c["type"], c["operation"], tuple(c.get("diff_keys", ())), bool(c.get("protected")))
                for c in data["changes"]
            ),
        )


def risk_reason(change: ResourceChange, layer: str) -> str | None:
    """Why a change needs more than a routine approval, or None when it does not."""
    op = change.operation
    if op in NO_CHANGE_OPS:
        return None
    if change.protected and op in DESTRUCTIVE_OPS:
        return "deletes or replaces a protected resource; Pulumi will refuse until protection is removed"
    if op in DESTRUCTIVE_OPS:
        if change.type in STATEFUL_TYPES:
            return f"{op} of a stateful resource ({change.type}): its data or identity is lost"
        return f"{op}: the existing resource goes away"
    if layer == "backend":
        return "changes the state backend that every other layer's state lives in"
    if change.protected:
        return "changes a protected resource"
    return None
