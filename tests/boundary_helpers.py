"""Shared set-up for the engine-boundary tests that run the real `pulumi` CLI on a file:// backend."""

from __future__ import annotations

import textwrap
from pathlib import Path

from bootstrap.engine.automation import PulumiEngine
from bootstrap.spec import load_spec

PASSPHRASE = "canary-passphrase-Bd71"


def write_program(stacks: Path, layer: str, source: str) -> Path:
    folder = stacks / layer
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text(f"name: {layer}\nruntime: python\n")
    (folder / "__main__.py").write_text(textwrap.dedent(source))
    return folder


def file_engine(tmp_path: Path, monkeypatch, *, spec_name: str = "local", lineage: str | None = "lin-1",
                spec=None, **kwargs) -> PulumiEngine:
    """A PulumiEngine on tmp_path/stacks with a file:// backend under tmp_path/state."""
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "home"))  # keeps the test away from ~/.pulumi
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    return PulumiEngine(spec or load_spec(spec_name), endpoint_url="http://127.0.0.1:9",
                        lineage_for=lambda layer: lineage, stacks_dir=tmp_path / "stacks",
                        backend_override=f"file://{state}", **kwargs)
