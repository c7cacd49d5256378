"""Waiting for Flux to be Ready, through an injected `KubeApi` (`bootstrap.kube.api`).

`observe` takes one look: the Kustomizations, and, when an `Install` is given, the controllers'
Deployments and the GitRepositories too, judged by the pure functions of `bootstrap.flux.ready`. An API
that does not serve Flux's kinds at all (404: the CRDs are not installed) is Flux not being there, not an
API failure. `wait_ready` polls with exponential backoff and jitter until everything asked for is Ready,
something is terminal (stalled, suspended), or the deadline passes; the last sleep is cut to the time left.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Optional

from bootstrap.flux.ready import Install, Readiness, assess, judge_install, revisions
from bootstrap.flux.status import (GITREPOSITORIES_PATH, GROUP, KUSTOMIZATIONS_PATH, VERSION, ControllerStatus,
                                   KustomizationStatus, deployments_path, parse_controllers, parse_kustomizations)
from bootstrap.kube.api import KubeApi, KubeApiError


def backoff_delays(*, initial: float = 2.0, factor: float = 2.0, maximum: float = 30.0, jitter: float = 0.2,
                   rand: Callable[[], float] = random.random) -> Iterator[float]:
    """Exponential delays capped at `maximum`, each spread by ±`jitter` so pollers do not line up."""
    delay = initial
    while True:
        yield max(0.0, delay * (1 + jitter * (2 * rand() - 1)))
        delay = min(maximum, delay * factor)


@dataclass(frozen=True)
class WaitResult:
    outcome: str                    # ready | stalled | timeout
    reason: str                     # Timeout when time ran out; else the last look's reason
    message: str
    seconds: float
    polls: int
    items: tuple[KustomizationStatus, ...] = ()
    last_error: Optional[str] = None
    last_reason: Optional[str] = None   # why it was not Ready at the last look (Flux's reason when it gave one)
    controllers: tuple[ControllerStatus, ...] = ()

    @property
    def revisions(self) -> dict[str, Optional[str]]:
        return revisions(self.items)

    def to_dict(self) -> dict:
        return {"outcome": self.outcome, "reason": self.reason, "message": self.message, "seconds": self.seconds,
                "polls": self.polls, "last_error": self.last_error, "last_reason": self.last_reason,
                "kustomizations": [k.to_dict() for k in self.items],
                "controllers": [c.to_dict() for c in self.controllers]}


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


def list_controllers(api: KubeApi, namespace: str) -> tuple[ControllerStatus, ...]:
    return parse_controllers(api.get_json(deployments_path(namespace)))


FLUX_NOT_INSTALLED = Readiness("waiting", "FluxNotInstalled", f"the cluster serves no {GROUP}/{VERSION} API: Flux's "
                               "CRDs are not installed (yet)")


def observe(api: KubeApi, expected: Optional[Mapping[str, Optional[str]]] = None,
            install: Optional[Install] = None) -> Readiness:
    """One look at Flux. Without `install`: the expected Kustomizations (all, when None), the GitRepositories
    read only to explain a wait. With it: the install judged first; then, when `expected` is given too
    (a drill's baseline), those Kustomizations as well."""
    try:
        items = list_kustomizations(api)
    except KubeApiError as exc:
        if exc.status == 404:
            return FLUX_NOT_INSTALLED
        raise
    if install is not None:
        sources = list_sources(api)
        judged = judge_install(install, list_controllers(api, install.namespace), items, sources)
        if judged.outcome != "ready" or expected is None:
            return judged
        rest = assess(items, expected, sources)
        if rest.outcome != "ready":
            return Readiness(rest.outcome, rest.reason, rest.message, items, judged.controllers)
        return Readiness("ready", rest.reason, f"{judged.message}; {rest.message}", items, judged.controllers)
    readiness = assess(items, expected)
    if readiness.outcome == "waiting" and readiness.reason == "NotReady":
        readiness = assess(items, expected, list_sources(api))
    return readiness


def wait_ready(api: KubeApi, *, timeout_seconds: float, expected: Optional[Mapping[str, Optional[str]]] = None,
               install: Optional[Install] = None, clock: Callable[[], float] = time.time,
               sleep: Callable[[float], None] = time.sleep, delays: Optional[Iterator[float]] = None) -> WaitResult:
    """Poll `observe` until Ready, terminal, or `timeout_seconds` pass.

    API errors (no answer yet, 401 while access is being granted, 5xx) are retried until the timeout:
    a freshly made cluster takes a while to answer. The last one is reported if time runs out.
    """
    start = clock()
    delays = delays or backoff_delays()
    polls, last, last_error = 0, Readiness("waiting", "NotPolled", "not polled yet"), None
    while True:
        polls += 1
        try:
            last = observe(api, expected, install)
            last_error = None
        except KubeApiError as exc:
            last_error = str(exc)
        elapsed = clock() - start
        if last_error is None and last.outcome in ("ready", "stalled"):
            return WaitResult(last.outcome, last.reason, last.message, round(elapsed, 3), polls, last.items,
                              last_reason=last.reason, controllers=last.controllers)
        remaining = timeout_seconds - elapsed
        if remaining <= 0:
            why = f"the API did not answer usefully ({last_error})" if last_error else last.message
            return WaitResult("timeout", "Timeout", f"not Ready after {round(elapsed)} s: {why}", round(elapsed, 3),
                              polls, last.items, last_error, "KubernetesApiError" if last_error else last.reason,
                              last.controllers)
        sleep(min(next(delays), remaining))
