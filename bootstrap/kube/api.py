"""A read-only client of a cluster's Kubernetes API, from its kubeconfig.

Plain HTTPS with the kubeconfig's CA and a bearer token (the `kubernetes` package is not a
dependency); an EKS kubeconfig's `aws eks get-token` is computed with botocore (a presigned STS call),
so no `aws` CLI is needed. The token never leaves this module. Callers depend on the `KubeApi`
protocol, so tests answer it with a double.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

import yaml

from bootstrap.kit.errors import BadInput


class KubeApiError(Exception):
    """A Kubernetes API call failed; `status` is the HTTP status, or None when nothing answered."""

    def __init__(self, status: Optional[int], detail: str):
        super().__init__(f"{status or 'no answer'}: {detail}")
        self.status = status
        self.detail = detail


class KubeApi(Protocol):
    def get_json(self, path: str) -> dict: ...


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


def client_for(spec, kubeconfig: str, **kwargs) -> HttpKubeApi:
    """The client for an environment's cluster: an EKS kubeconfig's token is signed with the spec's AWS
    profile and region."""
    import boto3

    session = boto3.Session(profile_name=spec.aws.profile, region_name=spec.aws.region)
    return api_from_kubeconfig(kubeconfig, session=session, **kwargs)
