"""The Pulumi CLI processes one layer's `up` starts, counted over a stand-in SDK stack (no binary): each pays the
CLI's start and, with passphrase secrets, the passphrase KDF, so a repeated one is waste (issue 29 §2).

The stand-in counts what the SDK runs for each call (pulumi/automation/_stack.py, _local_workspace.py): `up`
runs the update, then `stack output` twice (masked and --show-secrets) and `stack history`; `outputs()` the
two `stack output` runs.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from bootstrap.spec import load_spec

LINEAGE = "lineage-1"


class CliStack:
    """Plays the SDK's Stack over one clean deployment, appending each CLI process a call starts to `cli`."""

    name = "dev"

    def __init__(self, cli: list, secrets_provider: str, work_dir: str):
        self.cli = cli
        self.deployment = {"resources": [], "secrets_providers": {"type": "cloud", "state": {"url": secrets_provider}}}
        self.workspace = SimpleNamespace(work_dir=work_dir, env_vars={}, pulumi_home=None)

    def _run_pulumi_cmd_sync(self, args):
        from pulumi.automation._cmd import CommandResult

        self.cli.append(" ".join(args[:2]))
        return CommandResult(json.dumps({"version": 3, "deployment": self.deployment}), "", 0)

    def set_all_config(self, config):
        self.cli.append("config set-all")

    def set_config(self, key, value):
        self.cli.append(f"config set {key}")

    def preview(self, *, plan=None, **kwargs):
        self.cli.append("preview")
        if plan:  # `preview --save-plan FILE`
            with open(plan, "w", encoding="utf-8") as fh:
                fh.write("{}")

    def up(self, **kwargs):
        self.cli.append("up")
        outputs = self.outputs()
        self.cli.append("stack history")
        return SimpleNamespace(summary=SimpleNamespace(resource_changes={"update": 1}), outputs=outputs)

    def outputs(self):
        from pulumi.automation import OutputValue

        self.cli.extend(["stack output", "stack output --show-secrets"])
        return {"vpc_id": OutputValue("vpc-1", False)}


@pytest.fixture
def engine_cli(monkeypatch, tmp_path):
    """(engine, cli): a PulumiEngine whose stacks are CliStacks and the CLI processes they started."""
    import pulumi.automation as auto

    import bootstrap.engine.preflight as preflight
    from bootstrap.engine.automation import PulumiEngine

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    engine = PulumiEngine(load_spec("dev"), lineage_for=lambda layer: LINEAGE)
    cli: list[str] = []

    def select_stack(name, *, work_dir, opts):
        cli.append("stack select")
        return CliStack(cli, engine.settings.secrets_provider, work_dir)

    monkeypatch.setattr(auto, "select_stack", select_stack)
    return engine, cli


def test_setting_the_lineage_the_stack_was_configured_with_starts_no_cli(engine_cli):
    # `pulumi config set` rewrites Pulumi.<stack>.yaml in this run's private folder, which only this engine writes:
    # the value the stack was configured with on selection is already there.
    engine, cli = engine_cli
    assert engine.stack_exists("network")
    assert cli == ["stack select", "stack export", "config set-all"]
    engine.set_config("network", "groundctl:lineage", LINEAGE)
    assert cli == ["stack select", "stack export", "config set-all"]
    engine.set_config("network", "groundctl:lineage", "lineage-2")  # a new lineage (a stack made anew)
    engine.set_config("network", "groundctl:lineage", "lineage-2")
    engine.set_config("network", "groundctl:lineage", LINEAGE)
    assert cli[3:] == ["config set groundctl:lineage", "config set groundctl:lineage"]


def test_cli_processes_of_one_layer_up_unchanged_and_applied(engine_cli):
    engine, cli = engine_cli
    # No change: select, the plain export (secrets provider and pending operations), the config, the preview
    # and the contract's outputs read.
    assert engine.stack_exists("network")
    engine.set_config("network", "groundctl:lineage", LINEAGE)
    engine.preview("network", save_plan=True)
    engine.outputs("network")
    assert cli == ["stack select", "stack export", "config set-all", "preview", "stack output",
                   "stack output --show-secrets"]
    # A change: the up's own result carries the outputs the contract checks (bootstrap/apply/layer_up.py).
    del cli[:]
    engine.preview("network", save_plan=True)
    result = engine.up("network", use_saved_plan=True)
    assert result.outputs.values == {"vpc_id": "vpc-1"}
    assert cli == ["preview", "up", "stack output", "stack output --show-secrets", "stack history"]


def test_a_stack_the_caller_placed_opens_without_starting_the_cli(monkeypatch, tmp_path):
    # The rehearsal's scratch stack (issue 28): the caller wrote its state, so no `pulumi version` beyond the
    # process's one check, no `stack select`, no export and no `config set-all`: the plain config lands in this
    # run's settings file as set-all writes it. Decrypting is left to the command that needs it.
    from pathlib import Path

    import yaml
    from pulumi.automation._cmd import CommandResult

    import bootstrap.engine.preflight as preflight
    from bootstrap.engine import layer_stacks
    from bootstrap.engine.automation import PulumiEngine

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(preflight, "require_cli", lambda: "v3.259.0")
    cli: list[str] = []
    provider = "awskms://alias/groundctl-dev-state?region=eu-west-1"
    deployment = {"resources": [], "secrets_providers": {"type": "cloud", "state": {"url": provider}}}

    def run(self, args, cwd, additional_env, on_output=None, on_error=None):
        cli.append(" ".join(a for a in args if a != "--non-interactive"))
        return CommandResult(json.dumps({"version": 3, "deployment": deployment}), "", 0)

    monkeypatch.setattr(layer_stacks._sdk_narrowed()[0], "run", run)
    engine = PulumiEngine(load_spec("dev"), lineage_for=lambda layer: LINEAGE, backend_override=tmp_path.as_uri(),
                          secrets_provider=provider, placed={"network": deployment})
    assert str(engine._command.version) == "3.259.0"
    assert engine.stack_exists("network") and cli == []
    stack = engine._stacks["network"]
    settings = yaml.safe_load((Path(stack.workspace.work_dir) / f"Pulumi.{stack.name}.yaml").read_text())
    assert settings["config"] == engine._plain_config["network"] and settings["config"]["groundctl:lineage"] == LINEAGE
    assert all(isinstance(v, str) for v in settings["config"].values())
    engine.set_config("network", "groundctl:lineage", LINEAGE)
    assert cli == []
    assert engine.export_state("network")["deployment"] == deployment
    assert cli == ["stack export --show-secrets --stack dev"]
