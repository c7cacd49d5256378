"""The digest of an image tag, read through the registry's OCI distribution API (GET /v2/<name>/manifests/<tag>),
with the anonymous bearer-token exchange a registry such as Docker Hub asks for (a 401 whose WWW-Authenticate
names a realm, service and scope: distribution's token specification). The digest is the sha256 of the manifest
bytes as served, which must equal any Docker-Content-Digest the registry states."""

from __future__ import annotations

import hashlib
import json
import re
import urllib.parse
from typing import Callable

from bootstrap.pins.fetch import Answer, FetchProblem

MAX_MANIFEST_BYTES = 4 << 20
MAX_TOKEN_BYTES = 64 * 1024
ACCEPT = ", ".join(("application/vnd.oci.image.index.v1+json",
                    "application/vnd.docker.distribution.manifest.list.v2+json",
                    "application/vnd.oci.image.manifest.v1+json",
                    "application/vnd.docker.distribution.manifest.v2+json"))
_REFERENCE = re.compile(r"(?P<name>[a-z0-9]+(?:[._/-][a-z0-9]+)*):(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})")
_PARAM = re.compile(r'(\w+)="([^"]*)"')


class RegistryProblem(ValueError):
    pass


def split_reference(reference: str) -> tuple[str, str]:
    """('library/python', '3.11.11-slim-bookworm') for 'python:3.11.11-slim-bookworm' (Docker Hub's official
    images live under library/). Pure."""
    match = _REFERENCE.fullmatch(reference)
    if not match:
        raise RegistryProblem(f"{reference[:120]!r} is not an image reference such as python:3.11-slim")
    name = match["name"]
    return (name if "/" in name else f"library/{name}"), match["tag"]


def bearer_challenge(header: str) -> dict[str, str]:
    """The parameters of a `Bearer realm="…",service="…",scope="…"` challenge; {} for any other. Pure."""
    if not header.lower().startswith("bearer "):
        return {}
    return dict(_PARAM.findall(header[7:]))


def _token(challenge: dict[str, str], registry: str, fetch: Callable[..., Answer], deadline: float) -> str:
    realm = challenge.get("realm", "")
    parsed = urllib.parse.urlsplit(realm)
    # An https registry may send us only to an https realm: its token is no secret, but its answer decides.
    if parsed.scheme not in ("https", "http") or (parsed.scheme == "http" and not registry.startswith("http://")):
        raise RegistryProblem(f"the registry {registry} names the token realm {realm[:120]!r}, not an https URL")
    query = {k: challenge[k] for k in ("service", "scope") if k in challenge}
    url = realm + ("&" if parsed.query else "?") + urllib.parse.urlencode(query)
    answer = fetch(url, max_bytes=MAX_TOKEN_BYTES, deadline=deadline)
    try:
        doc = json.loads(answer.body)
        token = doc.get("token") or doc.get("access_token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token or len(token) > 16384 or not token.isprintable():
        raise RegistryProblem(f"the token endpoint {realm[:120]} did not answer a token")
    return token


def image_digest(reference: str, registry: str, fetch: Callable[..., Answer],
                 deadline: float = 120.0) -> tuple[str, str]:
    """(sha256 hex, manifest URL read) of `reference`'s tag at `registry` (a base URL such as
    https://registry-1.docker.io, or a mirror of it)."""
    name, tag = split_reference(reference)
    url = f"{registry.rstrip('/')}/v2/{name}/manifests/{tag}"
    headers = {"Accept": ACCEPT}
    try:
        answer = fetch(url, max_bytes=MAX_MANIFEST_BYTES, headers=headers, deadline=deadline)
    except FetchProblem as exc:
        challenge = bearer_challenge(exc.headers.get("www-authenticate", "")) if exc.status == 401 else {}
        if not challenge:
            raise
        token = _token(challenge, registry, fetch, deadline)
        answer = fetch(url, max_bytes=MAX_MANIFEST_BYTES, deadline=deadline,
                       headers={**headers, "Authorization": f"Bearer {token}"})
    digest = hashlib.sha256(answer.body).hexdigest()
    stated = answer.headers.get("docker-content-digest", "")
    if stated and stated != f"sha256:{digest}":
        raise RegistryProblem(f"{url} states digest {stated[:80]} but its manifest's bytes have sha256:{digest}")
    try:
        kind = json.loads(answer.body).get("mediaType", "")
    except (ValueError, AttributeError):
        raise RegistryProblem(f"{url} did not answer an image manifest (not JSON)") from None
    if kind and kind not in ACCEPT:
        raise RegistryProblem(f"{url} answered a {str(kind)[:80]}, not an image index or manifest")
    return digest, url
