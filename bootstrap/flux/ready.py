"""Is Flux Ready? Pure decisions over what `bootstrap.flux.status` read.

Two questions. `assess`: are the expected Kustomizations (all of them, or a drill's baseline) present and
Ready? `judge_install`: is the install the flux layer made up: its controllers available, and its root
GitRepository and Kustomization Ready at a revision of the ref the layer asked for, the Kustomization at
the revision its source fetched? Flux names a revision `<tag or branch>@sha1:<hash>`, or `sha1:<hash>` for
a bare commit (fluxcd/pkg git/commit.go, Commit.String). A Stalled or suspended object is terminal: Flux
will not change it on its own. `compare_revisions` says whether a rebuild came back at the same revisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from bootstrap.flux.status import ControllerStatus, KustomizationStatus


@dataclass(frozen=True)
class Readiness:
    outcome: str                    # ready | waiting | stalled
    reason: str                     # Flux's own reason when a condition gives one (BuildFailed, …)
    message: str
    items: tuple[KustomizationStatus, ...] = ()
    controllers: tuple[ControllerStatus, ...] = ()


def assess(items: tuple[KustomizationStatus, ...], expected: Optional[Mapping[str, Optional[str]]] = None,
           sources: tuple[KustomizationStatus, ...] = ()) -> Readiness:
    """Are the expected Kustomizations (all, when None) present and Ready? Stalled is terminal.
    `sources` (the GitRepositories) only explain a Kustomization that waits on one."""
    by_key = {k.key: k for k in items}
    wanted = list(expected) if expected is not None else list(by_key)
    if not wanted:
        return Readiness("waiting", "NoKustomizations", "no Kustomization exists yet", items)
    missing = [k for k in wanted if k not in by_key]
    stalled = [by_key[k] for k in wanted if k in by_key and by_key[k].stalled]
    if stalled:
        s = stalled[0]
        return Readiness("stalled", "Stalled", f"{s.key} is stalled ({s.reason}: {s.message}); Flux will not "
                         "retry it without a change", items)
    if missing:
        return Readiness("waiting", "Missing", f"not there yet: {', '.join(missing)}", items)
    not_ready = [by_key[k] for k in wanted if by_key[k].ready != "True" or not by_key[k].up_to_date]
    if not_ready:
        n = not_ready[0]
        source = next((s for s in sources if s.key == n.source), None)
        why = (f"; its GitRepository {source.key} is {source.state}" if source is not None and source.state != "Ready"
               else "")
        return Readiness("waiting", "NotReady", f"{len(not_ready)} not Ready, e.g. {n.key}: {n.state}{why}", items)
    return Readiness("ready", "AllReady", f"{len(wanted)} Kustomization(s) Ready", items)


@dataclass(frozen=True)
class RevisionCheck:
    same: bool
    missing: tuple[str, ...]
    changed: tuple[tuple[str, Optional[str], Optional[str]], ...]   # (key, before, after)
    extra: tuple[str, ...]

    @property
    def message(self) -> str:
        if self.same:
            return "every Kustomization of the baseline is back at its baseline revision"
        parts = []
        if self.missing:
            parts.append(f"missing: {', '.join(self.missing)}")
        if self.changed:
            parts.append("at another revision: " + ", ".join(f"{k} ({a} → {b})" for k, a, b in self.changed))
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"same": self.same, "missing": list(self.missing), "extra": list(self.extra),
                "changed": [{"key": k, "before": a, "after": b} for k, a, b in self.changed]}


def revisions(items: tuple[KustomizationStatus, ...]) -> dict[str, Optional[str]]:
    return {k.key: k.last_applied_revision for k in items}


def compare_revisions(baseline: Mapping[str, Optional[str]], now: Mapping[str, Optional[str]]) -> RevisionCheck:
    """Same Kustomizations at the same applied revisions? Extra ones are reported, not failed."""
    missing = tuple(sorted(k for k in baseline if k not in now))
    changed = tuple((k, baseline[k], now[k]) for k in sorted(baseline) if k in now and now[k] != baseline[k])
    extra = tuple(sorted(k for k in now if k not in baseline))
    return RevisionCheck(not missing and not changed, missing, changed, extra)


# -- the install the flux layer made ------------------------------------------------------------------

@dataclass(frozen=True)
class Install:
    """What the flux layer asked for: where its controllers run, its root source and Kustomization, the ref."""
    namespace: str
    source: str                     # "namespace/name" of the root GitRepository
    kustomization: str              # "namespace/name" of the root Kustomization
    ref_kind: str                   # tag | commit | branch
    ref: str


def names_ref(revision: Optional[str], kind: str, ref: str) -> bool:
    """Whether a Flux revision is one of the ref: `<ref>@<algo>:<hash>` for a tag or branch, a hash equal
    to the commit for a commit."""
    if not revision:
        return False
    named, _, digest = revision.rpartition("@")
    if kind == "commit":
        return digest.partition(":")[2].lower() == ref.lower()
    return named == ref


def _object_problems(kind: str, key: str, obj: Optional[KustomizationStatus]) -> list[tuple[str, str, bool]]:
    """(reason, message, terminal) for a root object that is not Ready; none when it is."""
    what = f"the root {kind} {key}"
    if obj is None:
        return [("Missing", f"{what} does not exist", False)]
    if obj.suspended:
        return [("Suspended", f"{what} is suspended: Flux applies nothing until it is resumed", True)]
    if not obj.up_to_date:
        return [("NotObserved", f"{what} is {obj.state}", False)]
    if obj.stalled:
        return [(obj.reason or "Stalled", f"{what} is stalled ({obj.reason}: {obj.message}); Flux will not retry "
                 "it without a change", True)]
    if obj.ready != "True":
        return [(obj.reason or "NotReady", f"{what} is {obj.state}", False)]
    return []


def judge_install(install: Install, controllers: tuple[ControllerStatus, ...],
                  kustomizations: tuple[KustomizationStatus, ...],
                  sources: tuple[KustomizationStatus, ...]) -> Readiness:
    """Controllers available, root source and Kustomization Ready at the ref's revision. Every problem is
    named, the cause first (controllers, then the source, then the Kustomization); the reason is the
    first terminal one's, else the first one's."""
    problems: list[tuple[str, str, bool]] = []
    ours = tuple(c for c in controllers if c.namespace == install.namespace)
    if not ours:
        problems.append(("NoControllers", f"no Flux controller Deployment exists in {install.namespace}", False))
    down = [c for c in ours if not c.available]
    if down:
        problems.append(("ControllersUnavailable", "controller(s) not available: "
                         + "; ".join(f"{c.name} ({c.why})" for c in down), False))
    ref = f"{install.ref_kind} {install.ref}"
    source = next((s for s in sources if s.key == install.source), None)
    source_problems = _object_problems("GitRepository", install.source, source)
    if source is not None and not source_problems and not names_ref(source.artifact_revision, install.ref_kind,
                                                                     install.ref):
        source_problems.append(("RevisionMismatch", f"the root GitRepository {install.source} has fetched "
                                f"{source.artifact_revision or 'nothing yet'}, not a revision of the {ref}", False))
    problems += source_problems
    root = next((k for k in kustomizations if k.key == install.kustomization), None)
    root_problems = _object_problems("Kustomization", install.kustomization, root)
    if root is not None and not root_problems:
        applied = root.last_applied_revision
        fetched = source.artifact_revision if source is not None and not source_problems else None
        if not names_ref(applied, install.ref_kind, install.ref):
            root_problems.append(("RevisionMismatch", f"the root Kustomization {install.kustomization} has applied "
                                  f"{applied or 'nothing yet'}, not a revision of the {ref}", False))
        elif fetched is not None and applied != fetched:
            root_problems.append(("RevisionMismatch", f"the root Kustomization {install.kustomization} has applied "
                                  f"{applied}, its source has fetched {fetched}", False))
    problems += root_problems
    if problems:
        terminal = [p for p in problems if p[2]]
        reason = (terminal or problems)[0][0]
        return Readiness("stalled" if terminal else "waiting", reason, "; ".join(p[1] for p in problems),
                         kustomizations, ours)
    return Readiness("ready", "Ready", f"{len(ours)} controller(s) available; the root Kustomization "
                     f"{install.kustomization} Ready at {root.last_applied_revision}", kustomizations, ours)
