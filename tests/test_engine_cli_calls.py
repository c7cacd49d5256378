"""The Pulumi CLI processes one layer's `up` starts, counted over a stand-in SDK stack (no binary): each pays the
CLI's start and, with passphrase secrets, the passphrase KDF, so a repeated one is waste (issue 29 §2).

What the SDK would run for each call (pulumi/automation/_stack.py, _local_workspace.py; see
bootstrap/engine/sdk_objects.py): `select_stack` a `stack select`, `set_all_config` a `config set-all`,
`up` the update then `stack output` twice and `stack history`, `outputs()` the two `stack output` runs.
The engine runs none of those: the export that configures a stack answers whether it exists and what its
outputs are, the settings file is this run's own, and the update's events carry its counts and outputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from bootstrap.engine.results import SECRET_SIG
from bootstrap.spec import load_spec

LINEAGE = "lineage-1"
SECRET = {SECRET_SIG[0]: SECRET_SIG[1], "ciphertext": "v1:abc"}


class CliStack:
    """Plays the SDK's Stack over one clean deployment, appending each CLI process a call starts to `cli`."""

    name = "dev"

    def __init__(self, cli: list, secrets_provider: str, work_dir: str, outputs: dict, shown: dict):
        self.cli = cli
        self.outputs_in_state, self.shown = outputs, shown
        self.deployment = {"resources": [{"type": "pulumi:pulumi:Stack", "urn": "urn:pulumi:dev::network::root",
                                          "outputs": outputs}],
                           "secrets_providers": {"type": "cloud", "state": {"url": secrets_provider}}}
        self.missing = False
        self.workspace = SimpleNamespace(work_dir=work_dir, env_vars={}, pulumi_home=None)

    def _run_pulumi_cmd_sync(self, args):
        from pulumi.automation._cmd import CommandResult
        from pulumi.automation.errors import StackNotFoundError

        self.cli.append(" ".join(args[:2]) + (" --show-secrets" if "--show-secrets" in args else ""))
        if self.missing:
            raise StackNotFoundError(CommandResult("", "error: no stack named 'dev' found", 255))
        if args[:2] == ["stack", "output"]:
            return CommandResult(json.dumps(self.shown), "", 0)
        return CommandResult(json.dumps({"version": 3, "deployment": self.deployment}), "", 0)

    def preview(self, *, plan=None, **kwargs):
        self.cli.append("preview")
        if plan:  # `preview --save-plan FILE`
            with open(plan, "w", encoding="utf-8") as fh:
                fh.write("{}")


def run_up(stack, args, on_event):
    """The update, with the summary and root outputs events Pulumi streams at its end."""
    from pulumi.automation.events import EngineEvent

    stack.cli.append(" ".join(args[:1]))
    root = {"type": "pulumi:pulumi:Stack", "urn": "urn:pulumi:dev::network::root", "id": "", "parent": "",
            "provider": "", "outputs": stack.outputs_in_state}
    for event in ({"sequence": 1, "timestamp": 0, "resOutputsEvent": {"metadata": {
                       "op": "same", "urn": root["urn"], "type": root["type"], "provider": "", "new": root}}},
                  {"sequence": 2, "timestamp": 0, "summaryEvent": {
                       "maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": {"update": 1, "same": 4},
                       "PolicyPacks": {}}}):
        on_event(EngineEvent.from_json(event))


@pytest.fixture
def engine_cli(monkeypatch, tmp_path):
    """(engine, cli, made): a PulumiEngine whose stacks are CliStacks, the CLI processes they started, and what
    they hold (set `outputs`, `shown`, `missing`, or `stored`, the bucket's copy of the state, before the first
    call)."""
    import bootstrap.engine.preflight as preflight
    from bootstrap.engine import sdk_objects
    from bootstrap.engine.automation import PulumiEngine

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    made = SimpleNamespace(stacks=[], outputs={"vpc_id": "vpc-1"}, shown={"vpc_id": "vpc-1"}, missing=False,
                           stored=None)
    engine = PulumiEngine(load_spec("dev"), lineage_for=lambda layer: LINEAGE, state_of=lambda layer: made.stored)
    cli: list[str] = []

    def stack_in(name, work_dir, opts):
        stack = CliStack(cli, engine.settings.secrets_provider, work_dir, made.outputs, made.shown)
        stack.missing = made.missing
        made.stacks.append(stack)
        return stack

    monkeypatch.setattr(sdk_objects, "stack_in", stack_in)
    monkeypatch.setattr(sdk_objects, "run_up", run_up)
    return engine, cli, made


def settings_config(stack) -> dict:
    return yaml.safe_load((Path(stack.workspace.work_dir) / f"Pulumi.{stack.name}.yaml").read_text())["config"]


def test_config_is_written_to_this_runs_settings_file_with_no_cli(engine_cli):
    # Pulumi.<stack>.yaml lives in this run's private folder and only this engine writes it: no `config set`.
    engine, cli, made = engine_cli
    assert engine.stack_exists("network")
    assert cli == ["stack export"]
    config = settings_config(made.stacks[0])
    assert config["groundctl:env"] == "dev" and config["groundctl:lineage"] == LINEAGE
    assert all(isinstance(v, str) for v in config.values())
    engine.set_config("network", "groundctl:lineage", "lineage-2")  # a new lineage (a stack made anew)
    assert settings_config(made.stacks[0])["groundctl:lineage"] == "lineage-2"
    assert settings_config(made.stacks[0])["groundctl:env"] == "dev"  # the rest kept
    assert cli == ["stack export"]


def test_a_missing_stack_is_found_by_the_export_alone(engine_cli):
    engine, cli, made = engine_cli
    made.missing = True
    assert engine.stack_exists("network") is False
    assert cli == ["stack export"]


def test_cli_processes_of_one_layer_up_unchanged_and_applied(engine_cli):
    engine, cli, _ = engine_cli
    # No change: the plain export (existence, secrets provider, pending operations, outputs) and the preview.
    assert engine.stack_exists("network")
    engine.set_config("network", "groundctl:lineage", LINEAGE)
    engine.preview("network", save_plan=True)
    assert engine.outputs("network").values == {"vpc_id": "vpc-1"}
    assert cli == ["stack export", "preview"]
    # A change: the update's own events carry its counts and the outputs the contract checks.
    del cli[:]
    engine.preview("network", save_plan=True)
    result = engine.up("network", use_saved_plan=True)
    assert result.outputs.values == {"vpc_id": "vpc-1"} and result.counts == {"same": 4, "update": 1}
    assert engine.outputs("network").values == {"vpc_id": "vpc-1"}
    assert cli == ["preview", "up"]


def test_secret_outputs_cost_one_read_of_their_plaintext_and_stay_marked(engine_cli):
    engine, cli, made = engine_cli
    made.outputs = {"vpc_id": "vpc-1", "token": SECRET, "nested": {"inner": SECRET}}
    made.shown = {"vpc_id": "vpc-1", "token": "t0ken-value", "nested": {"inner": "n3sted"}}
    outputs = engine.outputs("network")
    assert outputs.values == made.shown and outputs.secret_keys == {"token"}
    assert cli == ["stack export", "stack output --show-secrets"]
    del cli[:]
    engine.preview("network", save_plan=True)
    result = engine.up("network", use_saved_plan=True)
    assert result.outputs.values == made.shown and result.outputs.secret_keys == {"token"}
    assert cli == ["preview", "up", "stack output --show-secrets"]


def test_the_state_read_from_the_bucket_spares_the_export(engine_cli):
    from bootstrap.engine.pending import PendingOperationsLeft

    engine, cli, made = engine_cli
    made.stored = {"resources": [{"type": "pulumi:pulumi:Stack", "urn": "urn:pulumi:dev::network::root",
                                  "outputs": {"vpc_id": "vpc-9"}}],
                   "secrets_providers": {"type": "cloud", "state": {"url": engine.settings.secrets_provider}}}
    assert engine.stack_exists("network")
    engine.preview("network", save_plan=True)
    assert engine.outputs("network").values == {"vpc_id": "vpc-9"}
    assert cli == ["preview"]
    # What the bucket holds is checked as an export would be: pending operations refuse the layer, no CLI run.
    again = type(engine)(engine.spec, lineage_for=lambda layer: LINEAGE, state_of=lambda layer: {
        **made.stored, "pending_operations": [{"type": "creating", "resource": {"urn": "urn:x", "type": "t"}}]})
    with pytest.raises(PendingOperationsLeft):
        again.preview("network")
    assert cli == ["preview"]


def test_a_stack_the_caller_placed_opens_without_starting_the_cli(monkeypatch, tmp_path):
    # The rehearsal's scratch stack (issue 28): the caller wrote its state, so no `pulumi version` beyond the
    # process's one check, no `stack select`, no export and no `config set-all`: the plain config lands in this
    # run's settings file as set-all writes it. Decrypting is left to the command that needs it.
    from pathlib import Path

    import yaml
    from pulumi.automation._cmd import CommandResult

    import bootstrap.engine.preflight as preflight
    from bootstrap.engine import sdk_objects
    from bootstrap.engine.automation import PulumiEngine

    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(preflight, "require_cli", lambda: "v3.259.0")
    cli: list[str] = []
    provider = "awskms://alias/groundctl-dev-state?region=eu-west-1"
    deployment = {"resources": [], "secrets_providers": {"type": "cloud", "state": {"url": provider}}}

    def run(self, args, cwd, additional_env, on_output=None, on_error=None):
        cli.append(" ".join(a for a in args if a != "--non-interactive"))
        return CommandResult(json.dumps({"version": 3, "deployment": deployment}), "", 0)

    monkeypatch.setattr(sdk_objects.KnownCli, "run", run)
    engine = PulumiEngine(load_spec("dev"), lineage_for=lambda layer: LINEAGE, backend_override=tmp_path.as_uri(),
                          secrets_provider=provider,
                          state_of=lambda layer: deployment if layer == "network" else None)
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
