"""Waiting for Flux to be Ready, through the Kubernetes API of the (rebuilt) cluster.

Readiness is Flux's own: each Kustomization (kustomize.toolkit.fluxcd.io/v1) carries a `Ready`
condition with a status, a reason and a message, and `status.lastAppliedRevision` says which source
revision it applied (kept apart from `lastAttemptedRevision`); a Ready condition counts only once
`status.observedGeneration` has caught up with `metadata.generation`. The GitRepositories
(source.toolkit.fluxcd.io/v1) are read too, so a Kustomization waiting on its source says why the
source is not Ready; an API that does not serve Flux's kinds at all (404: the CRDs are not installed)
is Flux not being there, not an API failure. The decisions are pure functions
(`parse_kustomizations`, `assess`, `compare_revisions`, `backoff_delays`); `wait_ready` polls an
injected `KubeApi` (`recovery.drills.kube_api`) with backoff and jitter until everything expected is
Ready, something stalls, or the timeout passes.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional

from recovery.drills.kube_api import KubeApi, KubeApiError

GROUP, VERSION, PLURAL = "kustomize.toolkit.fluxcd.io", "v1", "kustomizations"
KUSTOMIZATIONS_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
GITREPOSITORIES_PATH = "/apis/source.toolkit.fluxcd.io/v1/gitrepositories"


# -- pure ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KustomizationStatus:
    namespace: str
    name: str
    ready: str                      # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_applied_revision: Optional[str]
    last_attempted_revision: Optional[str]
    stalled: bool = False
    suspended: bool = False
    up_to_date: bool = True         # observedGeneration has caught up with metadata.generation
    generation: Optional[int] = None
    observed_generation: Optional[int] = None
    source: Optional[str] = None    # the sourceRef as "namespace/name" (Kustomizations only)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def state(self) -> str:
        """Why it is not Ready yet, in words (or that it is)."""
        if not self.up_to_date:
            return (f"not yet observed at generation {self.generation} (Flux last reconciled generation "
                    f"{self.observed_generation})")
        if self.ready == "True":
            return "Ready"
        return f"Ready={self.ready} ({self.reason or 'no reason yet'}: {self.message or 'no message yet'})"

    def to_dict(self) -> dict:
        return {"key": self.key, "ready": self.ready, "reason": self.reason, "message": self.message,
                "last_applied_revision": self.last_applied_revision,
                "last_attempted_revision": self.last_attempted_revision, "stalled": self.stalled,
                "suspended": self.suspended}


def _condition(conditions: list, kind: str) -> dict:
    return next((c for c in conditions if isinstance(c, dict) and c.get("type") == kind), {})


def parse_kustomizations(doc: Mapping) -> tuple[KustomizationStatus, ...]:
    """The Kustomizations of a list response, sorted by namespace/name."""
    out = []
    for item in doc.get("items") or []:
        if not isinstance(item, dict):
            continue
        meta, status = item.get("metadata") or {}, item.get("status") or {}
        conditions = status.get("conditions") or []
        ready = _condition(conditions, "Ready")
        generation, observed = meta.get("generation"), status.get("observedGeneration")
        ref = (item.get("spec") or {}).get("sourceRef") or {}
        source = (f"{ref.get('namespace') or meta.get('namespace', '')}/{ref['name']}"
                  if isinstance(ref, dict) and ref.get("name") and ref.get("kind", "GitRepository") == "GitRepository"
                  else None)
        out.append(KustomizationStatus(
            namespace=str(meta.get("namespace", "")), name=str(meta.get("name", "")),
            ready=str(ready.get("status", "Unknown")), reason=str(ready.get("reason", "")),
            message=str(ready.get("message", "")),
            last_applied_revision=status.get("lastAppliedRevision"),
            last_attempted_revision=status.get("lastAttemptedRevision"),
            stalled=_condition(conditions, "Stalled").get("status") == "True",
            suspended=bool((item.get("spec") or {}).get("suspend")),
            up_to_date=generation is None or observed is None or observed >= generation,
            generation=generation if isinstance(generation, int) else None,
            observed_generation=observed if isinstance(observed, int) else None, source=source))
    return tuple(sorted(out, key=lambda k: k.key))


@dataclass(frozen=True)
class Readiness:
    outcome: str                    # ready | waiting | stalled
    reason: str
    message: str
    items: tuple[KustomizationStatus, ...] = ()


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


def backoff_delays(*, initial: float = 2.0, factor: float = 2.0, maximum: float = 30.0, jitter: float = 0.2,
                   rand: Callable[[], float] = random.random) -> Iterator[float]:
    """Exponential delays capped at `maximum`, each spread by ±`jitter` so pollers do not line up."""
    delay = initial
    while True:
        yield max(0.0, delay * (1 + jitter * (2 * rand() - 1)))
        delay = min(maximum, delay * factor)


# -- polling ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WaitResult:
    outcome: str                    # ready | stalled | timeout
    reason: str
    message: str
    seconds: float
    polls: int
    items: tuple[KustomizationStatus, ...] = ()
    last_error: Optional[str] = None

    @property
    def revisions(self) -> dict[str, Optional[str]]:
        return revisions(self.items)

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "reason": self.reason, "message": self.message, "seconds": self.seconds,
                "polls": self.polls, "last_error": self.last_error,
                "kustomizations": [k.to_dict() for k in self.items]}


def list_kustomizations(api: KubeApi) -> tuple[KustomizationStatus, ...]:
    return parse_kustomizations(api.get_json(KUSTOMIZATIONS_PATH))


def list_sources(api: KubeApi) -> tuple[KustomizationStatus, ...]:
    """The GitRepositories (same fields: Ready condition, generations); none when their API is not served."""
    try:
        return parse_kustomizations(api.get_json(GITREPOSITORIES_PATH))
    except KubeApiError as exc:
        if exc.status == 404:
            return ()
        raise


FLUX_NOT_INSTALLED = Readiness("waiting", "FluxNotInstalled", f"the cluster serves no {GROUP}/{VERSION} API: Flux's "
                               "CRDs are not installed (yet)")


def observe(api: KubeApi, expected: Optional[Mapping[str, Optional[str]]] = None) -> Readiness:
    """One look at Flux: the Kustomizations judged, the GitRepositories read only to explain a wait."""
    try:
        items = list_kustomizations(api)
    except KubeApiError as exc:
        if exc.status == 404:
            return FLUX_NOT_INSTALLED
        raise
    readiness = assess(items, expected)
    if readiness.outcome == "waiting" and readiness.reason == "NotReady":
        readiness = assess(items, expected, list_sources(api))
    return readiness


def wait_ready(api: KubeApi, *, timeout_seconds: float, expected: Optional[Mapping[str, Optional[str]]] = None,
               clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
               delays: Optional[Iterator[float]] = None) -> WaitResult:
    """Poll until the expected Kustomizations are Ready, one stalls, or `timeout_seconds` pass.

    API errors (no answer yet, 401 while access is being granted, 5xx) are retried until the timeout:
    a freshly rebuilt cluster takes a while to answer. The last one is reported if time runs out.
    """
    start = clock()
    delays = delays or backoff_delays()
    polls, last, last_error = 0, Readiness("waiting", "NotPolled", "not polled yet"), None
    while True:
        polls += 1
        try:
            last = observe(api, expected)
            last_error = None
        except KubeApiError as exc:
            last_error = str(exc)
        elapsed = clock() - start
        if last_error is None and last.outcome in ("ready", "stalled"):
            return WaitResult(last.outcome, last.reason, last.message, round(elapsed, 3), polls, last.items)
        remaining = timeout_seconds - elapsed
        if remaining <= 0:
            why = f"the API did not answer usefully ({last_error})" if last_error else last.message
            return WaitResult("timeout", "Timeout", f"not Ready after {round(elapsed)} s: {why}", round(elapsed, 3),
                              polls, last.items, last_error)
        sleep(min(next(delays), remaining))
