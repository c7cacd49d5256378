"""The one error hierarchy: each subclass is a way the caller reacts.

Every error carries the fields its message is made from, and its message is one paragraph that
says what is wrong and what to do next. The CLI prints it and exits with ``exit_code``; nothing
below the CLI prints a traceback to an operator.
"""

from __future__ import annotations


class GroundctlError(Exception):
    """Root of every error groundctl reports to an operator."""

    exit_code = 4

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class BadInput(GroundctlError):
    """The operator gave something unusable: a spec, a flag, a file. Fix the input and re-run."""

    exit_code = 2


class SpecError(BadInput):
    """An environment spec failed validation."""

    def __init__(self, path: str, problems: list[tuple[str, str]]):
        self.path = path
        self.problems = problems
        parts = "; ".join(f"at {where}: {what}" for where, what in problems)
        super().__init__(
            f"{path} is not a valid environment spec ({len(problems)} problem"
            f"{'s' if len(problems) != 1 else ''}): {parts}. Edit the file and run the command again."
        )


class StateBucketMissing(BadInput):
    """The environment's state bucket does not exist: nothing of it has been deployed."""

    def __init__(self, environment: str, bucket: str):
        self.environment = environment
        self.bucket = bucket
        super().__init__(
            f"The state bucket {bucket} of '{environment}' does not exist, so nothing of this environment has been "
            f"deployed. Create it once, by hand, with its apply role: run `groundctl up {environment}` first (it "
            "creates the bucket)."
        )


class Refused(GroundctlError):
    """A rule refused the operation (a gate, a flag that was not given). Nothing was changed."""

    exit_code = 3


class LockHeld(Refused):
    """Another run holds the environment lock."""

    def __init__(self, environment: str, holder: str):
        self.environment = environment
        self.holder = holder
        super().__init__(
            f"Environment '{environment}' is locked by {holder}. Wait for that run to finish, or "
            f"inspect it with `groundctl lock status {environment}`; a lock whose holder is gone can "
            f"be removed with `groundctl lock break {environment}`."
        )


class LineageMismatch(Refused):
    """A state belongs to another lineage than the one expected."""


class SerialRegression(Refused):
    """An operation would move a stack's state back past its newest recorded serial."""


class StateUnusable(GroundctlError):
    """A state file or object cannot be read or fails integrity checks."""

    exit_code = 1


class EngineError(GroundctlError):
    """The Pulumi engine failed or is not available."""

    exit_code = 4


class CloudError(GroundctlError):
    """An AWS or Kubernetes call failed after its retries."""

    exit_code = 4
