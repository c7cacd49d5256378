"""The engine boundary: the only place that knows about the Pulumi Automation API.

Above this line everything works on `Plan`, `OperationResult` and plain dicts. An engine is bound to
one environment; every method takes the layer it acts on.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence
from urllib.parse import quote

from bootstrap.engine.errors import (
    StackMissing, UnexpectedChanges, Where, expected_no_changes, map_error, missing_cli_error,
)
from bootstrap.engine.events import counts_from_summary, plan_from_events, progress_message
from bootstrap.engine.passphrase import PULUMI_PASSPHRASE_FILE_VAR, PULUMI_PASSPHRASE_VAR, passphrase_from
from bootstrap.errors import BadInput, EngineError, GroundctlError, Refused
from bootstrap.layers import STACKS_DIR, layer as layer_named
from bootstrap.planning.plan import Plan

ProgressFn = Callable[[str], None]


@dataclass(frozen=True)
class StackOutputs:
    values: dict
    secret_keys: frozenset[str] = frozenset()

    def public(self) -> dict:
        """The outputs with secret values masked, safe to print or store."""
        return {k: ("[secret]" if k in self.secret_keys else v) for k, v in self.values.items()}


@dataclass(frozen=True)
class OperationResult:
    layer: str
    operation: str  # up | destroy | refresh | import | clear-pending-creates
    counts: dict[str, int] = field(default_factory=dict)
    outputs: StackOutputs = field(default_factory=lambda: StackOutputs({}))


class Engine(Protocol):
    """Every method but `create_stack` acts on an existing stack and raises StackMissing otherwise."""

    def stack_exists(self, layer: str) -> bool: ...

    def create_stack(self, layer: str) -> None:
        """Create the layer's empty stack; only for the first `up` of a layer the ledger never recorded."""
        ...

    def supports_saved_plans(self) -> bool:
        """Whether `preview(save_plan=True)` then `up(use_saved_plan=True)` ties the apply to the preview."""
        ...

    def preview(self, layer: str, *, refresh: bool = False, expect_no_changes: bool = False,
                save_plan: bool = False, on_progress: Optional[ProgressFn] = None) -> Plan:
        """`save_plan` keeps Pulumi's update plan of this preview for the next `up` of the layer."""
        ...

    def up(self, layer: str, *, use_saved_plan: bool = False,
           on_progress: Optional[ProgressFn] = None) -> OperationResult:
        """`use_saved_plan`: apply constrained by the plan the last `preview(save_plan=True)` saved; an
        update that would exceed it fails instead of doing more than was approved."""
        ...

    def refresh(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult: ...

    def destroy(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult: ...

    def outputs(self, layer: str) -> StackOutputs: ...

    def export_state(self, layer: str) -> dict:
        """The stack's deployment. Holds plaintext secrets: never write it to disk unencrypted."""
        ...

    def import_resources(self, layer: str, import_plan: dict, *,
                         on_progress: Optional[ProgressFn] = None) -> OperationResult:
        """Adopt existing resources; `import_plan` is the `pulumi import --file` document."""
        ...

    def clear_pending_creates(self, layer: str, urns: Sequence[str], *,
                              on_progress: Optional[ProgressFn] = None) -> OperationResult:
        """Drop these pending CREATE operations from the stack's state, and nothing else.

        Refuses, changing nothing, when the state holds a pending create not in `urns`: Pulumi's way
        to drop them (`refresh --clear-pending-creates`) drops every one. Ones no longer pending are
        ignored. The caller must have adopted any that made a live resource first: a dropped pending
        create is no longer tracked. (No import variant: `refresh --import-pending-creates` turns the
        operation into a pending import, which the refresh then discards without adding the resource;
        pkg/cmd/pulumi/operations/refresh.go pendingCreatesToImports, pkg/backend/snapshot.go, which
        carries only pending creates into the new snapshot.)"""
        ...

    def set_config(self, layer: str, key: str, value: str, *, secret: bool = False) -> None: ...


def pending_create_urns(deployment: Mapping[str, Any]) -> list[str]:
    """The URNs of a deployment's pending CREATE operations, in order. Pure."""
    out = []
    for op in deployment.get("pending_operations") or []:
        if not isinstance(op, Mapping) or op.get("type") != "creating":
            continue
        res = op.get("resource")
        if isinstance(res, Mapping) and isinstance(res.get("urn"), str):
            out.append(res["urn"])
    return out


def unexpected_pending_creates(deployment: Mapping[str, Any], urns: Sequence[str]) -> list[str]:
    """The deployment's pending creates that are not in `urns`: clearing them all would drop these. Pure."""
    allowed = set(urns)
    return [u for u in pending_create_urns(deployment) if u not in allowed]


# -- the product implementation over pulumi.automation --------------------------------------------

# Pulumi settings groundctl's guarantees rest on, whatever the operator's shell exports (these win over
# the inherited environment: the Automation API lays env_vars over os.environ):
# - PULUMI_SKIP_CHECKPOINTS=true keeps only the final state of an update; recovery walks the mid-update
#   checkpoints in the bucket's version history (sdk/go/common/env/env.go SkipCheckpoints).
# - PULUMI_DIY_BACKEND_LEGACY_LAYOUT=true on a new bucket files every layer's <env> stack under one name,
#   .pulumi/stacks/<env>.json, instead of .pulumi/stacks/<layer>/<env>.json (pkg/backend/diy/meta.go).
# - PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true: no settings file survives a run, so the stack's secrets
#   provider and data key come from its state (bootstrap/engine/secrets_provider.py).
# - PYTHONDONTWRITEBYTECODE: the programs' folder (and stacks/common) is never written.
ENFORCED_ENV = {
    "PULUMI_SKIP_CHECKPOINTS": "false",
    "PULUMI_DIY_BACKEND_LEGACY_LAYOUT": "false",
    "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
    "PYTHONDONTWRITEBYTECODE": "1",
}
EMULATOR_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def pulumi_available() -> bool:
    """Whether a `pulumi` binary is on PATH (the SDK runs `pulumi` and never installs one here)."""
    return shutil.which("pulumi") is not None


def require_pulumi() -> None:
    """Fail early, in one paragraph, when the CLI is missing (its version is checked when an engine is built)."""
    if not pulumi_available():
        raise missing_cli_error()


@dataclass(frozen=True, repr=False)
class WorkspaceSettings:
    """How every layer's workspace reaches its backend. `env` and `secrets` may hold the passphrase: never log them."""

    backend_url: str
    secrets_provider: str
    env: dict
    emulator_endpoint: str | None = None
    secrets: tuple[str, ...] = ()

    @property
    def secret_values(self) -> tuple[str, ...]:
        return tuple(v for v in self.secrets if v)

    def __repr__(self) -> str:
        return f"WorkspaceSettings(backend_url={self.backend_url!r}, secrets_provider={self.secrets_provider!r})"


def backend_url(bucket: str, region: str, endpoint_url: str | None = None) -> str:
    """The DIY backend URL. gocloud's s3blob reads `endpoint` (a full URL, so http:// needs no
    TLS flag) and `s3ForcePathStyle` (kept by its SDK-v2 opener for compatibility); the older
    `disableSSL` is refused as unknown by the SDK-v2 opener, so it is not used."""
    url = f"s3://{bucket}?region={region}"
    if endpoint_url:
        url += f"&endpoint={quote(endpoint_url.rstrip('/'), safe='')}&s3ForcePathStyle=true"
    return url


def kms_provider(alias: str, region: str) -> str:
    """The awskms:// secrets provider of a KMS alias. It names no endpoint: an emulator's is given by
    AWS_ENDPOINT_URL_KMS (aws-sdk-go-v2 config env_config.go GetServiceBaseEndpoint, which gocloud's
    awskms opener loads when the URL has no `endpoint`), so the state never records a port."""
    return f"awskms://{alias}?region={region}"


def workspace_settings(spec, *, endpoint_url: str | None = None,
                       passphrase_env: str = PULUMI_PASSPHRASE_VAR,
                       environ: Mapping[str, str] = os.environ,
                       backend_override: str | None = None,
                       secrets_provider: str | None = None) -> WorkspaceSettings:
    """Backend URL, secrets provider and environment variables for one environment. Pure but for reading
    PULUMI_CONFIG_PASSPHRASE_FILE. `secrets_provider` is the engine tier's: the KMS provider at the emulator."""
    endpoint = endpoint_url or (spec.aws.endpoint_url if spec.aws.endpoint_url != "embedded" else None)
    if spec.aws.endpoint_url == "embedded" and not endpoint:
        raise BadInput(
            f"Environment '{spec.name}' runs on the embedded AWS emulator, but no emulator endpoint was "
            f"given. Run it through `groundctl up {spec.name}` (which starts the emulator), or start one "
            f"with `groundctl emulator start` and set aws.endpoint_url to the endpoint it prints."
        )
    if endpoint and spec.production:
        raise BadInput(
            f"Environment '{spec.name}' is production and cannot be pointed at the emulator endpoint "
            f"{endpoint}. Remove the endpoint and run the command again."
        )
    region = spec.aws.region
    env = {
        "PULUMI_BACKEND_URL": backend_override or backend_url(spec.backend.bucket, region, endpoint),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        **program_python(environ),
        **ENFORCED_ENV,
    }
    provider = secrets_provider or ("passphrase" if endpoint else kms_provider(spec.backend.kms_alias, region))
    secrets: tuple[str, ...] = ()
    if endpoint:
        # The emulator accepts any credentials; fixed ones keep real ones from being sent to it.
        env.update(EMULATOR_CREDENTIALS)
        env["AWS_ENDPOINT_URL_KMS"] = endpoint
    if provider == "passphrase":
        passphrase, passphrase_vars = passphrase_from(environ, passphrase_env)
        if not passphrase:
            raise BadInput(
                f"Environment '{spec.name}' keeps its Pulumi secrets with a passphrase, but neither the "
                f"environment variable {passphrase_env} nor {PULUMI_PASSPHRASE_FILE_VAR} is set. Set one "
                f"(e.g. `export {passphrase_env}=...`; keep the same value for every later run) and run the "
                "command again."
            )
        env.update(passphrase_vars)
        secrets = (passphrase,)
    elif not endpoint and spec.aws.profile:
        env["AWS_PROFILE"] = spec.aws.profile
        env["AWS_SDK_LOAD_CONFIG"] = "1"
    return WorkspaceSettings(env["PULUMI_BACKEND_URL"], provider, env, endpoint, secrets)


def program_python(environ: Mapping[str, str], *, executable: str = sys.executable,
                   package_root: Path = STACKS_DIR.parent) -> dict[str, str]:
    """How Pulumi's Python host must run the layer programs. Pure.

    The host runs `PULUMI_PYTHON_CMD` when set, else whichever `python3`/`python` is first on PATH, and
    puts only the program's folder on `sys.path`. The programs import `stacks.common` and the SDKs
    groundctl was installed with, so they run under groundctl's own interpreter, with the folder that
    holds `stacks/` ahead of anything else on PYTHONPATH.
    """
    paths = [str(package_root)] + [p for p in environ.get("PYTHONPATH", "").split(os.pathsep)
                                   if p and p != str(package_root)]
    return {"PULUMI_PYTHON_CMD": executable, "PYTHONPATH": os.pathsep.join(paths)}


def missing_providers(import_plan: Mapping[str, Any], state_urns: set[str]) -> list[str]:
    """Explicit provider URNs the document's resources use that the stack lacks and the document gives
    no `providerInputs` for. Pure."""
    table = dict(import_plan.get("nameTable") or {})
    inputs = set(import_plan.get("providerInputs") or {})
    wanted = []
    for entry in import_plan.get("resources") or []:
        ref = entry.get("provider")
        urn = table.get(ref) if ref else None
        if urn and "::pulumi:providers:" in urn and urn not in state_urns and ref not in inputs \
                and urn not in wanted:
            wanted.append(urn)
    return wanted


def outputs_from_automation(output_map: Mapping[str, Any] | None) -> StackOutputs:
    """Stack outputs, remembering which ones Pulumi holds as secrets."""
    items = dict(output_map or {})
    return StackOutputs({k: getattr(v, "value", v) for k, v in items.items()},
                        frozenset(k for k, v in items.items() if getattr(v, "secret", False)))


class PulumiEngine:
    """The Engine over pulumi.automation: one LocalWorkspace per layer running the program in
    stacks/<layer> from a private folder of this run's (bootstrap/engine/rundir.py), the stack named after
    the environment, config set from the spec on first use in this run. Nothing is written beside the
    programs and nothing an earlier run wrote is read: the spec and the state are the only sources."""

    def __init__(self, spec, *, endpoint_url: str | None = None,
                 lineage_for: Callable[[str], str | None] | None = None,
                 passphrase_env: str = PULUMI_PASSPHRASE_VAR,
                 stacks_dir: Path | None = None, backend_override: str | None = None,
                 secrets_provider: str | None = None):
        # stacks_dir/backend_override/secrets_provider exist for the engine-tier tests (a tiny program,
        # file://, the emulator's KMS).
        from bootstrap.engine.rundir import RunDir

        self.spec = spec
        self.environment = spec.name
        self.endpoint_url = endpoint_url
        self.lineage_for = lineage_for
        self.stacks_dir = Path(stacks_dir) if stacks_dir else STACKS_DIR
        self.settings = workspace_settings(spec, endpoint_url=endpoint_url, passphrase_env=passphrase_env,
                                           backend_override=backend_override, secrets_provider=secrets_provider)
        self._secrets: set[str] = set(self.settings.secret_values)
        self._stacks: dict[str, Any] = {}
        self._run_dir = RunDir()
        self._saved_plans: dict[str, str] = {}  # layer → private folder holding its saved update plan
        require_pulumi()
        self._command = self._pulumi_command()

    # -- plumbing ---------------------------------------------------------------------------------

    def _pulumi_command(self):
        from pulumi.automation import PulumiCommand

        from bootstrap.engine.preflight import require_cli

        # The floor first, in one paragraph (an older CLI fails later with a raw "unknown flag"); asked once
        # per process, and before the command writes anything.
        require_cli()
        try:
            # Runs `pulumi version` from PATH; never PulumiCommand.install (no download, ever).
            return PulumiCommand()
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
        """The layer's stack, selected (never created: `pulumi stack select` without --create), or None."""
        from pulumi import automation as auto
        from pulumi.automation.errors import StackNotFoundError

        work_dir, opts = self._workspace_options(layer)

        def select():
            try:
                return auto.select_stack(self.environment, work_dir=work_dir, opts=opts)
            except StackNotFoundError:
                return None
        return self._call(layer, "stack selection", select)

    def stack_exists(self, layer: str) -> bool:
        if layer in self._stacks:
            return True
        stack = self._select(layer)
        if stack is not None:
            self._configure(layer, stack)
        return stack is not None

    def create_stack(self, layer: str) -> None:
        from pulumi import automation as auto

        if layer in self._stacks:
            return
        work_dir, opts = self._workspace_options(layer)
        stack = self._call(layer, "stack creation", lambda: auto.create_stack(
            self.environment, work_dir=work_dir, opts=opts))
        self._configure(layer, stack)

    def _stack(self, layer: str):
        if layer in self._stacks:
            return self._stacks[layer]
        stack = self._select(layer)
        if stack is None:
            raise StackMissing(self.environment, layer)
        self._configure(layer, stack)
        return stack

    def _configure(self, layer: str, stack) -> None:
        from pulumi import automation as auto

        config = self._layer_config(layer)
        self._secrets.update(v.value for v in config.values() if v.secret and v.value)
        self._settle_secrets_provider(layer, stack)
        plain = {k: auto.ConfigValue(value=v.value) for k, v in config.items() if not v.secret}
        if plain:
            self._call(layer, "config", lambda: stack.set_all_config(plain))
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

    def _settle_secrets_provider(self, layer: str, stack) -> None:
        """Before any config is set: refuse a state encrypted with another provider than the environment's;
        for a state that records none yet (a stack made but never updated), declare the environment's in
        this run's settings file, which Pulumi otherwise fills with its default, a passphrase."""
        import json

        from bootstrap.engine.rundir import write_secrets_provider
        from bootstrap.engine.secrets_provider import PASSPHRASE, check_state_provider, state_provider

        # Without --show-secrets the export decrypts nothing (pkg/cmd/pulumi/stack/stack_export.go).
        exported = self._call(layer, "state export", lambda: stack._run_pulumi_cmd_sync(["stack", "export"]))
        try:
            deployment = json.loads(exported.stdout).get("deployment") or {}
        except (ValueError, AttributeError):
            deployment = {}
        found = state_provider(deployment if isinstance(deployment, dict) else {})
        expected = self.settings.secrets_provider
        check_state_provider(found, expected, environment=self.environment, layer=layer)
        if found is None and expected != PASSPHRASE and self._run_dir.stack_settings(layer, stack.name) is None:
            settings = Path(stack.workspace.work_dir) / f"Pulumi.{stack.name}.yaml"
            self._call(layer, "config", lambda: write_secrets_provider(settings, expected))

    def _layer_config(self, layer: str) -> dict:
        try:
            from bootstrap.engine.stack_config import layer_config
        except ImportError as exc:
            raise EngineError(f"groundctl is incomplete: the stack configuration module is missing ({exc}). "
                              "Reinstall groundctl and run the command again.") from None
        lineage = self.lineage_for(layer) if self.lineage_for else None
        return layer_config(self.spec, layer, lineage=lineage,
                            endpoint_url=self.settings.emulator_endpoint)

    def _events(self, sink: list | None, on_progress: Optional[ProgressFn]):
        def on_event(event) -> None:
            if sink is not None:
                sink.append(event)
            if on_progress is not None:
                message = progress_message(event)
                if message:
                    on_progress(message)
        return on_event

    def _result(self, layer: str, operation: str, summary, outputs: StackOutputs | None = None) -> OperationResult:
        counts = counts_from_summary(getattr(summary, "resource_changes", None) if summary else None)
        return OperationResult(layer, operation, counts, outputs if outputs is not None else self.outputs(layer))

    # -- Engine protocol --------------------------------------------------------------------------

    def supports_saved_plans(self) -> bool:
        # `preview --save-plan` / `up --plan` exist from CLI v3.24.0 (changelog/v3.24.0.md); `_pulumi_command`
        # refused any CLI older than PULUMI_CLI_MIN, far above it, before this engine was built.
        return True

    def preview(self, layer: str, *, refresh: bool = False, expect_no_changes: bool = False,
                save_plan: bool = False, on_progress: Optional[ProgressFn] = None) -> Plan:
        stack = self._stack(layer)
        events: list = []
        self._drop_saved_plan(layer)
        plan_file = None
        if save_plan:
            # The plan file holds resource inputs (secrets encrypted): a private folder, removed after the up.
            folder = tempfile.mkdtemp(prefix="groundctl-plan-")
            plan_file = os.path.join(folder, f"{layer}.plan.json")
            self._saved_plans[layer] = folder
            atexit.register(shutil.rmtree, folder, True)  # a plan never applied is not left behind either
        try:
            stack.preview(on_event=self._events(events, on_progress), refresh=refresh or None,
                          expect_no_changes=expect_no_changes or None, color="never", diff=False,
                          plan=plan_file)
        except Exception as exc:  # noqa: BLE001
            plan = plan_from_events(layer, self.environment, events)
            if expect_no_changes and (plan.has_changes or expected_no_changes(exc)):
                raise UnexpectedChanges(plan) from None
            raise map_error(exc, Where(self.environment, layer, "preview"), self._secrets) from None
        plan = plan_from_events(layer, self.environment, events)
        if expect_no_changes and plan.has_changes:
            raise UnexpectedChanges(plan)
        return plan

    def up(self, layer: str, *, use_saved_plan: bool = False,
           on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        plan_file = None
        if use_saved_plan:
            folder = self._saved_plans.get(layer)
            plan_file = os.path.join(folder, f"{layer}.plan.json") if folder else None
            if not plan_file or not os.path.isfile(plan_file):
                raise EngineError(f"No saved plan of layer '{layer}' is left to apply: preview it again "
                                  "(`groundctl up` does, under the lock) and approve that plan.")
        try:
            res = self._call(layer, "up", lambda: stack.up(
                on_event=self._events(None, on_progress), color="never", message="groundctl up",
                suppress_outputs=True, plan=plan_file))
        finally:
            if use_saved_plan:
                self._drop_saved_plan(layer)
        return self._result(layer, "up", res.summary, outputs_from_automation(res.outputs))

    def _drop_saved_plan(self, layer: str) -> None:
        folder = self._saved_plans.pop(layer, None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)

    def refresh(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        res = self._call(layer, "refresh", lambda: stack.refresh(
            on_event=self._events(None, on_progress), color="never", message="groundctl refresh",
            suppress_outputs=True))
        return self._result(layer, "refresh", res.summary)

    def destroy(self, layer: str, *, on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        res = self._call(layer, "destroy", lambda: stack.destroy(
            on_event=self._events(None, on_progress), color="never", message="groundctl destroy",
            suppress_outputs=True))
        return self._result(layer, "destroy", res.summary, StackOutputs({}))

    def outputs(self, layer: str) -> StackOutputs:
        stack = self._stack(layer)
        return outputs_from_automation(self._call(layer, "outputs", stack.outputs))

    def export_state(self, layer: str) -> dict:
        stack = self._stack(layer)
        dep = self._call(layer, "state export", stack.export_stack)
        return {"version": dep.version, "deployment": dep.deployment}

    def import_resources(self, layer: str, import_plan: dict, *,
                         on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        missing = missing_providers(import_plan, self._state_urns(layer))
        if missing:
            # An explicit provider the file names but the stack lacks would be built by `pulumi import`
            # from the file's providerInputs, or else from ambient settings (pkg/resource/deploy/import.go).
            # Without inputs, the program creates it, with its own region, role and allowed account.
            self._call(layer, "provider creation", lambda: stack.up(
                target=missing, color="never", message="groundctl import: providers", suppress_outputs=True,
                on_event=self._events(None, on_progress)))
        # Not the SDK's import_resources: it writes only `resources` and `nameTable`, dropping
        # `providerInputs`; the whole document goes in a private file that is removed afterwards.
        self._with_private_file(layer, "import", import_plan, lambda f: stack._run_pulumi_cmd_sync(
            ["import", "--file", f, "--yes", "--skip-preview", "--protect=false", "--generate-code=false",
             "--message", "groundctl import"]))
        summary = self._call(layer, "import", stack.info)
        if on_progress:
            on_progress(f"{layer}: imported {len(import_plan.get('resources', []))} resource(s)")
        return self._result(layer, "import", summary)

    def clear_pending_creates(self, layer: str, urns: Sequence[str], *,
                              on_progress: Optional[ProgressFn] = None) -> OperationResult:
        stack = self._stack(layer)
        deployment = self.export_state(layer).get("deployment") or {}
        others = unexpected_pending_creates(deployment, urns)
        if others:
            raise Refused(
                f"Layer '{layer}' of environment '{self.environment}' has pending creates that were not "
                f"decided on: {', '.join(others)}. Clearing drops every pending create, so nothing was "
                "changed. Run `groundctl recover` again: it decides on each one from the current state.")
        pending = pending_create_urns(deployment)
        if not pending:
            return OperationResult(layer, "clear-pending-creates", {}, self.outputs(layer))
        roots = [r["urn"] for r in deployment.get("resources") or []
                 if isinstance(r, dict) and r.get("type") == "pulumi:pulumi:Stack" and isinstance(r.get("urn"), str)]
        # Targeted at the root stack resource, the refresh reads no resource: the only change it writes
        # is the removal of the pending creates (which happens before, and whatever, the refresh targets:
        # pkg/cmd/pulumi/operations/refresh.go).
        res = self._call(layer, "clear pending creates", lambda: stack.refresh(
            clear_pending_creates=True, target=roots or None, on_event=self._events(None, on_progress),
            color="never", message="groundctl: clear pending creates", suppress_outputs=True))
        left = pending_create_urns(self.export_state(layer).get("deployment") or {})
        if left:
            raise EngineError(f"Pulumi's refresh of layer '{layer}' finished but the state still holds pending "
                              f"creates: {', '.join(left)}. Check the Pulumi CLI version (3.x with "
                              "`refresh --clear-pending-creates`) and run `groundctl recover` again.")
        if on_progress:
            on_progress(f"{layer}: cleared {len(pending)} pending create(s)")
        return self._result(layer, "clear-pending-creates", res.summary)

    def _state_urns(self, layer: str) -> set[str]:
        deployment = self.export_state(layer).get("deployment") or {}
        return {r.get("urn") for r in deployment.get("resources") or [] if isinstance(r, dict)}

    def set_config(self, layer: str, key: str, value: str, *, secret: bool = False) -> None:
        from pulumi.automation import ConfigValue

        if secret and value:
            self._secrets.add(value)
        stack = self._stack(layer)
        if secret:
            self._set_secret(layer, stack, key, value)
        else:
            self._call(layer, "config", lambda: stack.set_config(key, ConfigValue(value=value)))

    def _with_private_file(self, layer: str, operation: str, doc: dict, run: Callable[[str], Any]) -> Any:
        """Write `doc` to a file only this user can read, run, and remove it whatever happens."""
        import json

        tmp = tempfile.mkdtemp(prefix="groundctl-")  # mode 0700
        path = os.path.join(tmp, "doc.json")

        def write_and_run():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                json.dump(doc, fh)
            return run(path)

        try:
            # The write is inside _call too: a full disk becomes one scrubbed paragraph, not a traceback.
            return self._call(layer, operation, write_and_run)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
