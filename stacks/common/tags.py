"""Tags every groundctl AWS resource carries, so recovery can find and import survivors by tag.

`groundctl:env` and `groundctl:layer` are the same for every resource of a layer and ride on the
provider's default tags. `groundctl:name` differs per resource (it is the Pulumi logical name), so it
cannot be a provider default: each taggable resource gets it explicitly through `named()`.
"""

from __future__ import annotations

from stacks.common.naming import TAG_ENV, TAG_LAYER, TAG_NAME


def default_tags(environment: str, layer: str) -> dict[str, str]:
    """The provider-level tags shared by every resource of one layer in one environment."""
    return {TAG_ENV: environment, TAG_LAYER: layer}


def named(logical_name: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The per-resource tags: the logical name, plus any resource-specific tags (e.g. EKS subnet roles)."""
    tags = dict(extra or {})
    tags[TAG_NAME] = logical_name
    return tags
