"""What to do with each pending create an interrupted update left: import, clear, or refuse. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from recovery.survivors.state_vs_live import PendingCreate
from recovery.state.urns import logical_name

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
