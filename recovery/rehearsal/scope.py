"""Which layers a rehearsal proves, which it restores only because they are referenced, and in what order.
Pure: decided from the layer graph, the flags and whether the target is an emulator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from bootstrap.apply.steps import EMULATOR_HAS_NO_KUBERNETES, KUBERNETES_LAYERS
from bootstrap.layers import LAYERS, select


@dataclass(frozen=True)
class Step:
    layer: str
    rehearse: bool                    # False: restored only because a rehearsed layer references it
    skip_reason: Optional[str] = None
    references: tuple[str, ...] = ()  # the layers restored before it, whose stacks its program reads


@dataclass(frozen=True)
class Scope:
    layers: tuple[Step, ...]

    @property
    def rehearsed(self) -> tuple[Step, ...]:
        return tuple(s for s in self.layers if s.rehearse)


def references_of(layer: str) -> tuple[str, ...]:
    """Every layer `layer` reads through StackReferences, directly or through another, in layer order."""
    upstream = {lay.name: lay.upstream for lay in LAYERS}
    seen: set[str] = set()
    todo = list(upstream.get(layer, ()))
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(upstream.get(name, ()))
    return tuple(lay.name for lay in LAYERS if lay.name in seen)


def plan_scope(requested: Optional[list[str]], *, emulated: bool) -> Scope:
    """The requested layers (every layer when None) to rehearse, with the layers they reference restored
    first, in layer order, as a recovery of the whole environment would restore them."""
    wanted = [lay.name for lay in select(requested)]
    needed = {ref for name in wanted for ref in references_of(name)} | set(wanted)
    steps = []
    for lay in LAYERS:
        if lay.name not in needed:
            continue
        skip = EMULATOR_HAS_NO_KUBERNETES if emulated and lay.name in KUBERNETES_LAYERS else None
        steps.append(Step(lay.name, lay.name in wanted, skip, references_of(lay.name)))
    return Scope(tuple(steps))


# -- the versions of one layer ------------------------------------------------------------------------


def version_of(key: str, version_id: Optional[str], source: str, when, *, serial: Optional[int] = None,
               sha256: Optional[str] = None, lineage: Optional[str] = None, label: str = "") -> dict:
    """How a record names one stored version of a stack's state. Pure."""
    return {"key": key, "version_id": version_id, "source": source, "serial": serial, "sha256": sha256,
            "lineage": lineage, "last_modified": when.isoformat() if when is not None else None,
            "label": label or f"{source} {key} version {version_id or '-'}"}


def newest_to_rehearse(evaluated, chosen: tuple, serials: dict) -> tuple[list[dict], list[dict]]:
    """Of the stack object's newest versions (`recovery.choice.versions.Candidate`s, evaluated, newest first), those
    to rehearse beside the chosen one, and those never rehearsed with why: a state whose URNs name another
    stack is never restored anywhere, and one that is not integral proves nothing. Pure."""
    rehearse, passed_over = [], []
    for c in evaluated:
        if c.ident == chosen:
            continue
        ev = c.evaluation
        version = version_of(c.key, c.version_id, c.source, c.last_modified, serial=serials.get(c.version_id),
                             sha256=ev.sha256 if ev else None, lineage=ev.lineage if ev else None)
        if ev is not None and ev.foreign:
            passed_over.append({**version, "reason": "its resources' URNs name another stack "
                                f"({', '.join(ev.foreign[:3])}): it is never restored, not even into a scratch backend"})
        elif ev is None or ev.verdict != "integral":
            why = (ev.error if ev and ev.verdict == "unreadable" else
                   f"{len(ev.findings)} integrity findings" if ev and ev.verdict == "damaged" else "not read")
            passed_over.append({**version, "reason": f"{ev.verdict if ev else 'unknown'}: {why}"})
        else:
            rehearse.append(version)
    return rehearse, passed_over
