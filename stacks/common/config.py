"""Reading a layer's Pulumi config: the shared `groundctl:` keys and typed project keys.

Structured values (lists, node groups) arrive as JSON strings, because that is how groundctl sets
them through the Automation API and how an operator can set them with `pulumi config set`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi

NAMESPACE = "groundctl"


@dataclass(frozen=True)
class Common:
    """Settings every layer reads from the `groundctl:` namespace."""

    environment: str
    layer: str
    lineage: str
    production: bool
    account_id: str | None
    aws_endpoint: str | None

    @property
    def uses_emulator(self) -> bool:
        return bool(self.aws_endpoint)


def common(layer: str) -> Common:
    cfg = pulumi.Config(NAMESPACE)
    return Common(
        # The stack name is the environment name; the key exists so a state file names its env.
        environment=cfg.get("env") or pulumi.get_stack(),
        layer=layer,
        lineage=cfg.get("lineage") or "",
        production=cfg.get_bool("production") or False,
        account_id=cfg.get("accountId") or None,
        aws_endpoint=cfg.get("awsEndpoint") or None,
    )


def json_value(cfg: pulumi.Config, key: str, default: Any) -> Any:
    """A JSON-encoded config value, or `default` when unset; a readable error when malformed."""
    raw = cfg.get(key)
    if raw is None or raw == "":
        return default
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"config {cfg.name}:{key} must be JSON (got {raw[:40]!r}…: {exc.msg}); set it with "
            f"`pulumi config set {cfg.name}:{key} '<json>'`"
        ) from None


def export_lineage(common_settings: Common) -> None:
    """Every layer exports its lineage so a state file names the lineage it belongs to."""
    pulumi.export("groundctl_lineage", common_settings.lineage)


def stack_reference(layer: str) -> pulumi.StackReference:
    """The same environment's stack of an upstream layer (DIY backends use the `organization` org)."""
    return pulumi.StackReference(f"organization/{layer}/{pulumi.get_stack()}")
