"""The recovery point: what restoring the chosen state loses compared with the newest known state.

Pure, over the decision's `Choice` (`recovery.choice.choose`) and the resource URNs of the chosen state and of
the newest one that could be read; when none newer can be read, the ledger head's resource count is
all that says what is lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from recovery.choice.choose import Choice, Option


@dataclass(frozen=True)
class RecoveryPoint:
    """What restoring the chosen state loses compared with the newest known state."""

    newest_label: str
    chosen_label: str
    serials_lost: tuple[int, ...]
    resources_lost: tuple[str, ...]        # URNs in the newest known state, not in the chosen one
    resources_gained: tuple[str, ...]      # URNs in the chosen state, not in the newest known one
    newest_readable: bool
    versions_displaced: int
    chosen_resources: int = 0
    head_resources: Optional[int] = None   # the ledger head's count, when the newest state cannot be read

    @property
    def loses_nothing(self) -> bool:
        return not self.serials_lost and not self.resources_lost

    def to_dict(self) -> dict:
        return {"newest_known": self.newest_label, "chosen": self.chosen_label, "serials_lost": list(self.serials_lost),
                "resources_lost": list(self.resources_lost), "resources_gained": list(self.resources_gained),
                "newest_readable": self.newest_readable, "versions_displaced": self.versions_displaced,
                "chosen_resources": self.chosen_resources, "head_resources": self.head_resources,
                "loses_nothing": self.loses_nothing}


def recovery_point(choice: Choice, chosen_urns: Iterable[str], newest: Optional[Option],
                   newest_urns: Optional[Iterable[str]], head_resources: Optional[int] = None) -> RecoveryPoint:
    """Compare the chosen state with the newest known one (`newest_urns` None when it cannot be read)."""
    assert choice.chosen is not None
    mine = set(chosen_urns)
    theirs = set(newest_urns) if newest_urns is not None else None
    return RecoveryPoint(
        newest_label=newest.label() if newest else choice.chosen.label(),
        chosen_label=choice.chosen.label(),
        serials_lost=choice.serials_lost,
        resources_lost=tuple(sorted(theirs - mine)) if theirs is not None else (),
        resources_gained=tuple(sorted(mine - theirs)) if theirs is not None else (),
        newest_readable=theirs is not None,
        versions_displaced=len(choice.newer),
        chosen_resources=len(mine),
        head_resources=head_resources if theirs is None else None,
    )


def newest_readable(choice: Choice) -> Optional[Option]:
    """The newest candidate at or before which a state could be read: the chosen one or a newer damaged one."""
    for o in choice.newer:
        if o.verdict in ("integral", "damaged") and not o.foreign:  # another stack's resources are not "lost"
            return o
    return choice.chosen


STACK_OBJECT = ("current", "version")  # the stack object's own versions: every state ever written to the stack


def measured_rpo(choice: Choice, at: float) -> tuple[float, tuple[Option, ...]]:
    """What restoring the chosen state at `at` loses: (seconds, the states lost, newest first). The states lost
    are the stack object's versions written after the chosen one (`choice.newer`), save copies of it (its bytes,
    or a ledger position not past its own) and another stack's state; the seconds are the age of the oldest of
    them, or 0 when none exists: the newest state of a stack untouched for weeks loses nothing."""
    chosen = choice.chosen
    assert chosen is not None

    def lost(o: Option) -> bool:
        if o.source not in STACK_OBJECT or o.foreign or (o.sha256 is not None and o.sha256 == chosen.sha256):
            return False
        return o.position is None or chosen.position is None or o.position > chosen.position

    newer = tuple(o for o in choice.newer if lost(o))
    if not newer:
        return 0.0, ()
    return round(max(0.0, at - min(o.when for o in newer).timestamp()), 3), newer
