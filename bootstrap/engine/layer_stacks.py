"""Each layer's Pulumi stack for one environment, ready for an operation: its workspace in this run's
private folder, the stack selected (or, for a layer's first `up`, created) and configured from the spec,
every failure of the SDK turned into one scrubbed paragraph."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

from bootstrap.engine.errors import StackMissing, Where, map_error
from bootstrap.engine.passphrase import PULUMI_PASSPHRASE_VAR
from bootstrap.engine.pending import refuse_pending
from bootstrap.engine.preflight import require_pulumi
from bootstrap.engine.workspace import workspace_settings
from bootstrap.kit.errors import BadInput, EngineError, GroundctlError
from bootstrap.layers import STACKS_DIR, layer as layer_named


class LayerStacks:
    """One LocalWorkspace per layer running the program in stacks/<layer> from a private folder of this
    run's (bootstrap/engine/rundir.py), the stack named after the environment, config set from the spec on
    first use in this run. Nothing is written beside the programs and nothing an earlier run wrote is read:
    the spec and the state are the only sources. PulumiEngine runs the Engine's operations on these stacks."""

    def __init__(self, spec, *, endpoint_url: str | None = None,
                 lineage_for: Callable[[str], str | None] | None = None,
                 passphrase_env: str = PULUMI_PASSPHRASE_VAR,
                 stacks_dir: Path | None = None, backend_override: str | None = None,
                 secrets_provider: str | None = None,
                 state_of: Callable[[str], Mapping[str, Any] | None] | None = None):
        # backend_override/secrets_provider: the restore rehearsal's scratch file:// backend, opened with the
        # state's own secrets provider (and the engine tier's emulator KMS); stacks_dir: the engine tier's programs.
        # state_of: a layer's deployment as the backend's bucket holds it now, read where a `stack export` would
        # be (None where it cannot tell: the export runs then).
        from bootstrap.engine.rundir import RunDir

        self._state_of = state_of
        self.spec = spec
        self.environment = spec.name
        self.endpoint_url = endpoint_url
        self.lineage_for = lineage_for
        self.stacks_dir = Path(stacks_dir) if stacks_dir else STACKS_DIR
        self.settings = workspace_settings(spec, endpoint_url=endpoint_url, passphrase_env=passphrase_env,
                                           backend_override=backend_override, secrets_provider=secrets_provider)
        self._secrets: set[str] = set(self.settings.secret_values)
        self._stacks: dict[str, Any] = {}
        self._plain_config: dict[str, dict[str, str]] = {}  # layer → the plain config this run set on its stack
        # The pending operations of each layer's state as this run last exported it (dropped by a write),
        # and the layers whose state was found to hold none before their first preview, up or destroy.
        self._pending_seen: dict[str, list] = {}
        # The outputs of each layer's root stack as this run last saw its state (export or update), until a write.
        self._outputs_seen: dict[str, dict] = {}
        self._pending_checked: set[str] = set()
        self._run_dir = RunDir()
        require_pulumi()
        self._command = self._pulumi_command()

    def _pulumi_command(self):
        from bootstrap.engine import sdk_objects
        from bootstrap.engine.preflight import require_cli

        # The floor first, in one paragraph (an older CLI fails later with a raw "unknown flag"); asked once
        # per process, and before the command writes anything.
        reported = require_cli()
        try:
            # The `pulumi` on PATH at the version just read; never PulumiCommand.install (no download, ever).
            return sdk_objects.KnownCli(reported)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one paragraph
            raise map_error(exc, Where(self.environment, "-", "version check"), self._secrets) from None

    def _call(self, layer: str, operation: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except GroundctlError:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine boundary translates everything
            raise map_error(exc, Where(self.environment, layer, operation), self._secrets) from None

    def _workspace_options(self, layer: str):
        from pulumi import automation as auto

        layer_named(layer)  # unknown layer → BadInput
        program = self.stacks_dir / layer
        if not (program / "Pulumi.yaml").is_file():
            raise BadInput(f"There is no Pulumi program for layer '{layer}' at {program} (no Pulumi.yaml).")
        work_dir = self._call(layer, "workspace", lambda: self._run_dir.layer_dir(layer, program))
        return str(work_dir), auto.LocalWorkspaceOptions(env_vars=dict(self.settings.env),
                                                         pulumi_command=self._command,
                                                         secrets_provider=self.settings.secrets_provider)

    def _select(self, layer: str):
        """The layer's stack (never created) and its state, or None when it does not exist; no `pulumi stack
        select` runs (bootstrap/engine/sdk_objects.py). The state is the bucket's copy where `state_of` reads
        one, else the export its configuration needs, which fails for a missing stack as the select would ("no
        stack named ... found")."""
        from bootstrap.engine import sdk_objects

        work_dir, opts = self._workspace_options(layer)
        stack = self._call(layer, "stack selection", lambda: sdk_objects.stack_in(self.environment, work_dir, opts))
        stored = self._state_of(layer) if self._state_of else None
        if isinstance(stored, Mapping):  # the stack file the export would print, read without a CLI process
            deployment = dict(stored)
            self._saw_state(layer, deployment)
            return stack, deployment
        deployment = self._export_plain(layer, stack, missing_ok=True)
        return None if deployment is None else (stack, deployment)

    def stack_exists(self, layer: str) -> bool:
        if layer in self._stacks:
            return True
        found = self._select(layer)
        if found is not None:
            self._configure(layer, *found)
        return found is not None

    def create_stack(self, layer: str) -> None:
        from pulumi import automation as auto

        if layer in self._stacks:
            return
        work_dir, opts = self._workspace_options(layer)
        stack = self._call(layer, "stack creation", lambda: auto.create_stack(
            self.environment, work_dir=work_dir, opts=opts))
        self._configure(layer, stack, self._export_plain(layer, stack) or {})

    def _stack(self, layer: str):
        if layer in self._stacks:
            return self._stacks[layer]
        found = self._select(layer)
        if found is None:
            raise StackMissing(self.environment, layer)
        self._configure(layer, *found)
        return found[0]

    def _configure(self, layer: str, stack, deployment: dict) -> None:
        config = self._layer_config(layer)
        self._secrets.update(v.value for v in config.values() if v.secret and v.value)
        self._settle_secrets_provider(layer, stack, deployment)
        plain = {k: v.value for k, v in config.items() if not v.secret}
        if plain:
            self._write_plain_config(layer, stack, plain)
        self._plain_config[layer] = plain
        for key, value in config.items():
            if value.secret:
                self._set_secret(layer, stack, key, value.value)
        self._stacks[layer] = stack

    def _set_secret(self, layer: str, stack, key: str, value: str) -> None:
        """`pulumi config set --secret KEY` with the value on standard input, never on the command line
        (where `ps` shows it): with no value argument the CLI reads stdin when it is not a terminal, and
        `--raw` keeps the value exactly, trailing newline included."""
        import subprocess

        from pulumi.automation._cmd import CommandResult
        from pulumi.automation.errors import create_command_error

        def run():
            workspace = stack.workspace
            env = {**os.environ, **(workspace.env_vars or {}), "PULUMI_AUTOMATION_API": "true"}
            if workspace.pulumi_home:
                env["PULUMI_HOME"] = workspace.pulumi_home
            argv = [self._command.command, "--non-interactive", "config", "set", "--secret", "--raw",
                    "--stack", stack.name, "--", key]
            done = subprocess.run(argv, input=value, capture_output=True, text=True, cwd=workspace.work_dir,
                                  env=env, check=False)
            if done.returncode != 0:
                raise create_command_error(CommandResult(done.stdout, done.stderr, done.returncode))
        self._call(layer, "config", run)

    def _write_plain_config(self, layer: str, stack, values: dict[str, str]) -> None:
        """What `pulumi config set-all --plaintext` writes, written here: the settings file is this run's
        private one (bootstrap/engine/rundir.py), and the CLI would start (and pay the passphrase KDF) only to
        write it."""
        from bootstrap.engine.rundir import write_plain_config

        settings = Path(stack.workspace.work_dir) / f"Pulumi.{stack.name}.yaml"
        self._call(layer, "config", lambda: write_plain_config(settings, values))

    def _settle_secrets_provider(self, layer: str, stack, deployment: dict) -> None:
        """Before any config is set: refuse a state encrypted with another provider than the environment's;
        for a state that records none yet (a stack made but never updated), declare the environment's in
        this run's settings file, which Pulumi otherwise fills with its default, a passphrase."""
        from bootstrap.engine.rundir import write_secrets_provider
        from bootstrap.engine.secrets_provider import PASSPHRASE, check_state_provider, state_provider

        found = state_provider(deployment)
        expected = self.settings.secrets_provider
        check_state_provider(found, expected, environment=self.environment, layer=layer)
        if found is None and expected != PASSPHRASE and self._run_dir.stack_settings(layer, stack.name) is None:
            settings = Path(stack.workspace.work_dir) / f"Pulumi.{stack.name}.yaml"
            self._call(layer, "config", lambda: write_secrets_provider(settings, expected))

    def _export_plain(self, layer: str, stack, *, missing_ok: bool = False) -> dict | None:
        """The stack's deployment, its secrets left encrypted (None for a missing stack when `missing_ok`); its
        pending operations are kept for the check before the layer's first preview, up or destroy, and its
        outputs for the next outputs read, which so cost no CLI process of their own."""
        import json

        from pulumi.automation.errors import StackNotFoundError

        def export():
            try:
                # Without --show-secrets the export decrypts nothing (pkg/cmd/pulumi/stack/stack_export.go).
                return stack._run_pulumi_cmd_sync(["stack", "export"])
            except StackNotFoundError:
                if missing_ok:
                    return None
                raise
        exported = self._call(layer, "state export", export)
        if exported is None:
            return None
        try:
            deployment = json.loads(exported.stdout).get("deployment") or {}
        except (ValueError, AttributeError):
            self._state_written(layer)  # what it holds is unknown
            return {}
        deployment = deployment if isinstance(deployment, dict) else {}
        self._saw_state(layer, deployment)
        return deployment

    def _saw_state(self, layer: str, deployment: dict) -> None:
        from bootstrap.engine.results import state_root_outputs

        ops = deployment.get("pending_operations")
        self._pending_seen[layer] = list(ops) if isinstance(ops, list) else []
        self._outputs_seen[layer] = state_root_outputs(deployment)

    def _state_written(self, layer: str) -> None:
        self._pending_seen.pop(layer, None)
        self._outputs_seen.pop(layer, None)

    def _outputs_of(self, layer: str, stack, state_outputs: dict):
        """The stack's outputs from what its state holds (secrets encrypted or blinded): as they are when
        nothing in them is secret; else their plaintext from one `stack output --show-secrets`, the keys held
        secret marked (the SDK's outputs() reads a masked copy too: _local_workspace.py:699-712)."""
        import json

        from bootstrap.engine.results import StackOutputs, holds_secret, is_secret

        if not holds_secret(state_outputs):
            return StackOutputs(dict(state_outputs))
        def read() -> dict:
            shown = json.loads(stack._run_pulumi_cmd_sync(["stack", "output", "--json", "--show-secrets"]).stdout)
            if not isinstance(shown, dict):
                raise ValueError("`pulumi stack output --json` printed no JSON object")
            return shown
        return StackOutputs(self._call(layer, "outputs", read),
                            frozenset(k for k, v in state_outputs.items() if is_secret(v)))

    def _require_no_pending(self, layer: str, operation: str, stack) -> None:
        """Refuse `operation` (preview, up, destroy) while the layer's state holds pending operations; asked
        once per layer and run, before its first such operation (Pulumi only warns: bootstrap/engine/pending.py).
        The apply preflight refuses a whole run up front from the bucket; this catches what that read could not
        see (a state written since, one it could not parse) and guards the engine's other callers (recover's
        verification, the drills, the rehearsal), on the export the layer's configuration already made."""
        if layer in self._pending_checked:
            return
        if layer not in self._pending_seen:  # written since this run last exported it
            self._export_plain(layer, stack)
        if layer not in self._pending_seen:
            raise EngineError(f"Pulumi's export of the state of layer '{layer}' could not be read, so whether an "
                              f"interrupted update left pending operations in it is unknown; nothing was changed. "
                              f"Check the Pulumi CLI (`pulumi stack export --stack {self.environment}` in "
                              f"stacks/{layer}) and run the command again.")
        refusal = refuse_pending(self.environment, layer, operation,
                                 {"pending_operations": self._pending_seen[layer]})
        if refusal is not None:
            raise refusal
        self._pending_checked.add(layer)

    def _layer_config(self, layer: str) -> dict:
        try:
            from bootstrap.spec.stack_config import layer_config
        except ImportError as exc:
            raise EngineError(f"groundctl is incomplete: the stack configuration module is missing ({exc}). "
                              "Reinstall groundctl and run the command again.") from None
        if layer == "flux":
            from bootstrap.flux.manifest import require_manifest

            require_manifest(self.spec)  # before Pulumi reads it: a missing, odd or unpinned file is exit 2
        lineage = self.lineage_for(layer) if self.lineage_for else None
        return layer_config(self.spec, layer, lineage=lineage,
                            endpoint_url=self.settings.emulator_endpoint, program_dir=self.stacks_dir / layer)

    def set_config(self, layer: str, key: str, value: str, *, secret: bool = False) -> None:
        if secret and value:
            self._secrets.add(value)
        stack = self._stack(layer)
        known = self._plain_config.setdefault(layer, {})
        if secret:
            self._set_secret(layer, stack, key, value)
            known.pop(key, None)
        elif known.get(key) != value:
            self._write_plain_config(layer, stack, {key: value})
            known[key] = value
        # else: already in Pulumi.<stack>.yaml, which lives in this run's private folder and only this engine
        # writes.
