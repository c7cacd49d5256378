"""Waiting for Flux to be Ready, through the Kubernetes API of the (rebuilt) cluster.

Readiness is Flux's own: each Kustomization (kustomize.toolkit.fluxcd.io/v1) carries a `Ready`
condition with a status, a reason and a message, and `status.lastAppliedRevision` says which source
revision it applied (kept apart from `lastAttemptedRevision`); a Ready condition counts only once
`status.observedGeneration` has caught up with `metadata.generation`. The GitRepositories
(source.toolkit.fluxcd.io/v1) are read too, so a Kustomization waiting on its source says why the
source is not Ready; an API that does not serve Flux's kinds at all (404: the CRDs are not installed)
is Flux not being there, not an API failure. The decisions are pure functions
(`parse_kustomizations`, `assess`, `compare_revisions`, `backoff_delays`); `wait_ready` polls an
injected `KubeApi` with backoff and jitter until everything expected is Ready, something stalls, or
the timeout passes. The product client is plain HTTPS with the kubeconfig's CA and a bearer token
(the `kubernetes` package is not a dependency); an EKS kubeconfig's `aws eks get-token` is computed
with botocore (a presigned STS call), so no `aws` CLI is needed. The token never leaves this module.
"""

from __future__ import annotations

import base64
import json
import random
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping, Optional, Protocol

import yaml

from bootstrap.errors import BadInput

GROUP, VERSION, PLURAL = "kustomize.toolkit.fluxcd.io", "v1", "kustomizations"
KUSTOMIZATIONS_PATH = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
GITREPOSITORIES_PATH = "/apis/source.toolkit.fluxcd.io/v1/gitrepositories"


class KubeApiError(Exception):
    """A Kubernetes API call failed; `status` is the HTTP status, or None when nothing answered."""

    def __init__(self, status: Optional[int], detail: str):
        super().__init__(f"{status or 'no answer'}: {detail}")
        self.status = status
        self.detail = detail


class KubeApi(Protocol):
    def get_json(self, path: str) -> dict: ...


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


# -- the product client: plain HTTPS with the kubeconfig ----------------------------------------------

@dataclass(frozen=True)
class KubeTarget:
    server: str
    ca_pem: Optional[str]
    token: Optional[str] = field(default=None, repr=False)
    exec_command: tuple[str, ...] = ()
    eks_cluster: Optional[str] = None
    region: Optional[str] = None


def _bad_kubeconfig(what: str) -> BadInput:
    return BadInput(f"The cluster's kubeconfig cannot be used: {what}. Check the cluster layer's `kubeconfig` "
                    "output (it is rebuilt by `groundctl up <env> --layers cluster`).")


def parse_kubeconfig(text: str) -> KubeTarget:
    """Server, CA and credentials of the kubeconfig's current context (JSON or YAML). Pure."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        raise _bad_kubeconfig("it is neither JSON nor YAML") from None
    if not isinstance(doc, dict):
        raise _bad_kubeconfig("it is not a mapping")

    def named(kind: str, name: Optional[str]) -> dict:
        entries = [e for e in doc.get(kind) or [] if isinstance(e, dict)]
        entry = next((e for e in entries if e.get("name") == name), entries[0] if entries else None)
        if entry is None:
            raise _bad_kubeconfig(f"it has no {kind}")
        return entry

    context = named("contexts", doc.get("current-context")).get("context") or {}
    cluster = named("clusters", context.get("cluster")).get("cluster") or {}
    user = named("users", context.get("user")).get("user") or {}
    server = cluster.get("server")
    if not server:
        raise _bad_kubeconfig("its cluster has no server")
    ca = cluster.get("certificate-authority-data")
    ca_pem = base64.b64decode(ca).decode() if ca else None
    exec_ = user.get("exec") or {}
    command = tuple([exec_["command"], *(exec_.get("args") or [])]) if exec_.get("command") else ()
    eks, region = None, None
    if "get-token" in command and "--cluster-name" in command:
        eks = command[command.index("--cluster-name") + 1]
        region = command[command.index("--region") + 1] if "--region" in command else None
    return KubeTarget(server.rstrip("/"), ca_pem, user.get("token"), command, eks, region)


def eks_token(cluster_name: str, region: str, session=None) -> str:
    """What `aws eks get-token` prints: a presigned STS GetCallerIdentity URL, bound to the cluster."""
    import boto3
    from botocore.signers import RequestSigner

    session = session or boto3.Session(region_name=region)
    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4",
                           session.get_credentials(), session.events)
    url = signer.generate_presigned_url(
        {"method": "GET", "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
         "body": {}, "headers": {"x-k8s-aws-id": cluster_name}, "context": {}},
        region_name=region, expires_in=60, operation_name="")
    return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


def _exec_token(command: tuple[str, ...]) -> str:
    try:
        out = subprocess.run(list(command), capture_output=True, text=True, timeout=60, check=True)
        return json.loads(out.stdout)["status"]["token"]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        raise KubeApiError(None, f"the kubeconfig's credential command ({command[0]}) gave no token") from None


class HttpKubeApi:
    """GET-only client over urllib: TLS verified against the kubeconfig's CA, bearer token auth."""

    TOKEN_LIFETIME = 600.0  # EKS tokens last 15 minutes; refresh well before

    def __init__(self, target: KubeTarget, *, timeout: float = 10.0, session=None,
                 clock: Callable[[], float] = time.time):
        self.target = target
        self.timeout = timeout
        self.session = session
        self.clock = clock
        self._token: Optional[str] = None
        self._token_at = 0.0
        self._ssl = ssl.create_default_context(cadata=target.ca_pem) if target.ca_pem else None

    def _bearer(self) -> Optional[str]:
        t = self.target
        if t.token:
            return t.token
        if not (t.eks_cluster or t.exec_command):
            return None
        if self._token is None or self.clock() - self._token_at > self.TOKEN_LIFETIME:
            if t.eks_cluster and t.region:
                self._token = eks_token(t.eks_cluster, t.region, self.session)
            else:
                self._token = _exec_token(t.exec_command)
            self._token_at = self.clock()
        return self._token

    def get_json(self, path: str) -> dict:
        request = urllib.request.Request(self.target.server + path, headers={"Accept": "application/json"})
        token = self._bearer()
        if token:
            request.add_unredirected_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._ssl) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            # The body is the API's Status object: its message says what is wrong, never the token.
            try:
                detail = json.loads(exc.read()).get("message") or exc.reason
            except ValueError:
                detail = exc.reason
            raise KubeApiError(exc.code, str(detail)) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise KubeApiError(None, f"{self.target.server} did not answer ({reason})") from None


def api_from_kubeconfig(text: str, **kwargs) -> HttpKubeApi:
    return HttpKubeApi(parse_kubeconfig(text), **kwargs)
