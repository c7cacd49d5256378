"""The Automation API's objects without the CLI processes their constructors and calls start for answers this
run already has (issue 29 §2): each `pulumi` process pays the CLI's start and, with passphrase secrets, the
passphrase KDF.

- `PulumiCommand()` runs `pulumi version` (pulumi/automation/_cmd.py:77-81) for every workspace's engine,
  though `require_cli` has read it once per process;
- `select_stack` runs `pulumi stack select` (_local_workspace.py:476-484, via _stack.py:258-259) only to
  fail for a missing stack, which the export each layer's configuration runs anyway fails for too;
- `PulumiCommand.run` starts the CLI in groundctl's own process group and, interrupted, leaves it running
  untold (_cmd.py:242-266: `Popen.__exit__` only waits a moment on a KeyboardInterrupt): every command here
  runs through bootstrap/engine/children.py instead;
- `Stack.up` runs `stack output` twice and `stack history` after the update (_stack.py:443-447;
  _local_workspace.py:699-712; _stack.py:1408-1416, 1448-1457): the counts are in the update's own summary
  event and the outputs in its root stack's outputs event, which the same event stream carries.
"""

from __future__ import annotations

import os
from typing import Callable, Mapping, Optional, Sequence

from pulumi.automation import LocalWorkspace, LocalWorkspaceOptions, PulumiCommand, Stack
from pulumi.automation._cmd import CommandResult
from pulumi.automation._stack import StackInitMode, _cleanup


class KnownCli(PulumiCommand):
    """The `pulumi` on PATH at the version `require_cli` read, validated as the SDK validates it."""

    def __init__(self, reported: str):  # noqa: D107 - no super().__init__: it would run `pulumi version` again
        from pulumi.automation._cmd import _MINIMUM_VERSION, _SKIP_VERSION_CHECK_VAR, _parse_and_validate_pulumi_version

        self.command = "pulumi"
        self.version = _parse_and_validate_pulumi_version(
            min_version=_MINIMUM_VERSION, current_version=reported.strip().removeprefix("v"),
            opt_out=os.getenv(_SKIP_VERSION_CHECK_VAR) is not None)

    def run(self, args: list[str], cwd: str, additional_env: Mapping[str, str],
            on_output: Optional[Callable[[str], None]] = None,
            on_error: Optional[Callable[[str], None]] = None) -> CommandResult:
        """The SDK's run (the same arguments, environment and result: _cmd.py:191-273) through
        bootstrap/engine/children.py, which ends the process when groundctl is interrupted."""
        from pulumi.automation.errors import create_command_error

        from bootstrap.engine import children

        cut = args.index("--") if "--" in args else len(args)
        if "--non-interactive" not in args[:cut]:
            args.insert(0, "--non-interactive")
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        code, stdout, stderr = children.run([self.command, *args], cwd=cwd, env=env, on_output=on_output,
                                            on_error=on_error)
        result = CommandResult(stderr=stderr, stdout=stdout, code=code)
        if code != 0:
            raise create_command_error(result)
        return result


class _Unselected(Stack):
    def __init__(self, name: str, workspace: LocalWorkspace):  # noqa: D107 - no `pulumi stack select`
        self.name = name
        self.workspace = workspace
        self._mode = StackInitMode.SELECT


def stack_in(name: str, work_dir: str, opts: LocalWorkspaceOptions) -> Stack:
    """The stack `name` of the program in `work_dir`, as `select_stack` builds it but not selected: every
    command the SDK and groundctl run on it names it with --stack, so the selection is never read."""
    opts.work_dir = work_dir
    return _Unselected(name, LocalWorkspace(**opts.__dict__))


def run_up(stack: Stack, args: Sequence[str], on_event: Callable) -> None:
    """`pulumi up ARGS` on `stack` with the SDK's live event stream to `on_event` (as Stack.up sets it up,
    _stack.py:432-443), and nothing after it."""
    log_file, thread, stop, temp_dir, server = stack._setup_event_log("up", on_event, stack.workspace.pulumi_version)
    try:
        stack._run_pulumi_cmd_sync([*args, "--exec-kind", "auto.local", "--event-log", log_file])
    finally:
        _cleanup(temp_dir, thread, stop, None, server)
