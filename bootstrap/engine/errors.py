"""Automation API failures as groundctl errors, each with the operator's next step.

The SDK's `CommandError` keeps only the text of the CLI's result (code, stdout, stderr), so the
mapping works on that text. Every message is one paragraph, trimmed to the last lines that say
what went wrong, and scrubbed of every secret value the engine knows about before it is built.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterable

from pulumi.automation import errors as auto_errors

from bootstrap.kit.errors import EngineError, GroundctlError, Refused
from bootstrap.kit.masking import mask_text
from bootstrap.planning.plan import NO_CHANGE_OPS, Plan

INSTALL_URL = "https://www.pulumi.com/docs/install/"
SCRUBBED = "[secret]"

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|<\{%[^%]*%\}>")
_LOCK_LINE = re.compile(r"created by (?P<user>[^@\s]+)@(?P<host>\S+) \(pid (?P<pid>\d+)\) at (?P<at>\S+)")
_INTERESTING = re.compile(r"error|failed|denied|refused|not found|no such|invalid|unable|cannot|panic", re.I)


class StackLocked(EngineError):
    """Pulumi's own stack lock (`.pulumi/locks/...`) is held by another update."""

    def __init__(self, environment: str, layer: str, holders: list[str]):
        self.environment = environment
        self.layer = layer
        self.holders = holders
        who = "; ".join(holders) if holders else "another process (the lock file does not say who)"
        super().__init__(
            f"The Pulumi stack for layer '{layer}' of environment '{environment}' is locked by {who}. "
            f"Another update may still be running: `groundctl lock status {environment}` shows Pulumi's stack "
            f"locks with whether each holder is alive. Only once that holder is gone, remove this stack's lock "
            f"(and no other) with `groundctl lock break {environment} --pulumi {layer}`, then run the command "
            "again; never `pulumi cancel`, which deletes every lock file of the stack, a live update's too."
        )


class UnexpectedChanges(EngineError):
    """A preview that was expected to show no changes showed some. Carries the plan."""

    def __init__(self, plan: Plan):
        self.plan = plan
        counts = (", ".join(f"{n} {op}" for op, n in plan.counts.items() if op not in NO_CHANGE_OPS)
                  or "changes (Pulumi's own --expect-no-changes check failed)")
        super().__init__(
            f"Layer '{plan.layer}' of environment '{plan.environment}' was expected to show no changes "
            f"but its preview shows {counts}. The live resources and the state differ: review the plan "
            f"(`groundctl drift {plan.environment}`) before applying anything."
        )


class StackMissing(Refused):
    """The layer's Pulumi stack does not exist, and groundctl was not asked to create it.

    groundctl creates a stack only on the `up` of a layer the ledger has never recorded; everywhere
    else a missing stack is reported, never silently replaced by an empty one.
    """

    def __init__(self, environment: str, layer: str):
        self.environment = environment
        self.layer = layer
        super().__init__(
            f"The Pulumi stack organization/{layer}/{environment} does not exist in the state backend. "
            f"If the {layer} layer was never deployed, `groundctl up {environment} --layers {layer}` creates "
            f"it; if it was, its state was lost: recover it with `groundctl recover {environment} {layer}`."
        )


class StackLost(Refused):
    """The ledger records the layer, but its stack is gone: recover it, never start it again empty."""

    def __init__(self, environment: str, layer: str, serial: int):
        self.environment = environment
        self.layer = layer
        self.serial = serial
        super().__init__(
            f"The {layer} layer of '{environment}' has ledger records (up to serial {serial}) but its Pulumi "
            f"stack organization/{layer}/{environment} is missing from the state backend: its state was "
            f"lost or deleted. Nothing was changed; an empty stack would try to create every resource again. "
            f"Run `groundctl recover {environment} {layer}` to restore it from the bucket's versions, then "
            "run this command again."
        )


def expected_no_changes(exc: BaseException) -> bool:
    """Whether the CLI failed because its own --expect-no-changes fired (backenderr.NoChangesExpectedError:
    "no changes were expected [for <op>] but changes were proposed")."""
    return bool(re.search(r"no changes were expected( for \w+)? but changes were proposed", str(exc)))


class CliMissing(EngineError):
    """The Pulumi CLI cannot be started: not installed, or not on PATH."""


def missing_cli_error(detail: str = "") -> EngineError:
    extra = f" ({detail})" if detail else ""
    return CliMissing(
        f"The Pulumi CLI is not installed or not on PATH{extra}, so groundctl cannot preview or apply "
        f"any layer. Install it from {INSTALL_URL}, check that `pulumi version` works in this shell, "
        f"and run the command again; groundctl never downloads it."
    )


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every known secret value replaced, longest first (so no fragment survives)."""
    return mask_text(text, secrets, SCRUBBED)


def command_output(exc: BaseException) -> tuple[str, str]:
    """(stdout, stderr) from a CommandError's text: '\\n code: N\\n stdout: …\\n stderr: …'."""
    text = str(exc)
    stdout, _, stderr = text.partition("\n stderr: ")
    _, _, stdout = stdout.partition("\n stdout: ")
    return stdout, stderr


def trim(text: str, max_lines: int = 4, max_chars: int = 600) -> str:
    """The last lines that say what went wrong, joined into one line."""
    lines = [ln.strip() for ln in _ANSI.sub("", text).splitlines()]
    lines = [ln for ln in lines if ln and not set(ln) <= set("-=*+ ")]
    picked = [ln for ln in lines if _INTERESTING.search(ln)] or lines
    joined = " / ".join(picked[-max_lines:])
    return joined if len(joined) <= max_chars else "…" + joined[-max_chars:]


def _reason(*texts: str) -> str:
    # The first text that says what went wrong: a failed update's diagnostics are in the CLI's stdout
    # while its stderr may hold only warnings (the AWS SDK's checksum notices), which say nothing.
    for text in texts:
        if any(_INTERESTING.search(line) for line in _ANSI.sub("", text).splitlines()):
            return trim(text)
    return next((trim(text) for text in texts if trim(text)), "")


def lock_holders(text: str) -> list[str]:
    """Who holds a DIY-backend stack lock, from Pulumi's 'created by user@host (pid N) at T'."""
    return [f"{m['user']}@{m['host']} (pid {m['pid']}, since {m['at']})" for m in _LOCK_LINE.finditer(text)]


@dataclass(frozen=True)
class Where:
    """What was being done when an error happened: it goes into the message."""

    environment: str
    layer: str
    operation: str


def _is_missing_cli(exc: BaseException) -> bool:
    if not isinstance(exc, FileNotFoundError):
        return False
    # subprocess names the program it could not start: "pulumi", or <root>/bin/pulumi.
    return os.path.basename(str(exc.filename or "")) == "pulumi"


def map_error(exc: BaseException, where: Where, secrets: Iterable[str] = ()) -> GroundctlError:
    """The groundctl error for an exception raised by the Automation API (or the CLI under it)."""
    if isinstance(exc, GroundctlError):
        return exc
    secrets = list(secrets)
    if _is_missing_cli(exc):
        return missing_cli_error()
    if isinstance(exc, auto_errors.InvalidVersionError):
        return EngineError(
            f"The installed Pulumi CLI cannot be used by this version of groundctl: "
            f"{scrub(trim(str(exc)), secrets)} Install a current CLI from {INSTALL_URL} and run the "
            f"command again."
        )
    stdout, stderr = command_output(exc) if isinstance(exc, auto_errors.CommandError) else ("", str(exc))
    if isinstance(exc, auto_errors.ConcurrentUpdateError):
        return StackLocked(where.environment, where.layer, lock_holders(scrub(stderr, secrets)))
    stack = f"organization/{where.layer}/{where.environment}"
    if isinstance(exc, auto_errors.StackNotFoundError):
        return EngineError(
            f"The Pulumi stack {stack} does not exist in the state backend, so {where.operation} "
            f"cannot run. Create it with `groundctl up {where.environment} --layers {where.layer}`, "
            f"or, if it should exist, check the backend bucket and follow the state-loss runbook."
        )
    detail = scrub(_reason(stderr, stdout) or type(exc).__name__, secrets)
    if isinstance(exc, (auto_errors.CompilationError, auto_errors.RuntimeError,
                        auto_errors.InlineSourceRuntimeError)):
        detail = scrub(trim(stdout) or trim(stderr), secrets)
        return EngineError(
            f"The Pulumi program of layer '{where.layer}' failed while running {where.operation} for "
            f"environment '{where.environment}': {detail}. Fix the program (stacks/{where.layer}/) "
            f"and run the command again."
        )
    return EngineError(
        f"Pulumi {where.operation} of layer '{where.layer}' in environment '{where.environment}' "
        f"failed: {detail}. Fix the cause above and run the command again."
    )

