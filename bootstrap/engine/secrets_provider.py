"""Which secrets provider a stack's state is encrypted with, and whether a run may go on with it.

A stack's secrets provider and data key are recorded in two places: its settings file (beside the project
file, one per machine) and its state (`secrets_providers`, in the bucket). groundctl never keeps the
settings file from one run to the next, so Pulumi is told to take the provider from the state
(PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER: pkg/cmd/pulumi/stack/secrets.go, the fallback when the
settings name no provider). That alone keeps a second machine on the state's provider; the check below
refuses a run whose environment expects another provider, instead of Pulumi re-encrypting the state with
whichever it was handed (pkg/backend/snapshot.go: the base snapshot's manager is kept only when compatible).
Pure.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional
from urllib.parse import parse_qs, urlsplit

from bootstrap.kit.errors import Refused

PASSPHRASE = "passphrase"


def state_provider(deployment: Mapping[str, Any]) -> Optional[str]:
    """'passphrase', the provider URL (cloud providers) or the type, of a deployment; None when it has none."""
    providers = deployment.get("secrets_providers")
    if not isinstance(providers, Mapping) or not isinstance(providers.get("type"), str):
        return None
    kind = providers["type"]
    state = providers.get("state")
    if kind == "cloud" and isinstance(state, Mapping) and isinstance(state.get("url"), str):
        return state["url"][:500]
    return kind[:100]


def _identity(provider: str) -> tuple:
    """What names a key: the scheme, the key id and the region; not how the key is reached (an endpoint)."""
    if provider == PASSPHRASE or "://" not in provider:
        return (provider,)
    url = urlsplit(provider)
    region = parse_qs(url.query).get("region", [""])[0]
    return (url.scheme, (url.netloc + url.path).strip("/"), region)


def same_provider(a: str, b: str) -> bool:
    return _identity(a) == _identity(b)


def check_state_provider(found: Optional[str], expected: str, *, environment: str, layer: str) -> None:
    """Refuse (changing nothing) when the state is encrypted with another provider than the environment's."""
    if found is None or same_provider(found, expected):
        return
    raise Refused(
        f"The state of layer '{layer}' in environment '{environment}' keeps its secrets with the secrets "
        f"provider {found!r}, but this environment uses {expected!r}. groundctl does not change a state's "
        "secrets provider, so nothing was run. Check that the spec and the endpoint are the ones this "
        "environment was created with; to move the state to another provider on purpose, run `pulumi stack "
        "change-secrets-provider` on that stack first, then run the command again.")
