"""What `--json` prints when a command stops before it printed its own document (a failed start: a bad spec, no
credentials, an unreachable endpoint, a usage error; or, for a command that prints its report at the end, any
failure before it): still a record, with the reason and the exit code, marked `stopped_before_report`, so that a CI
job that reads stdout (its summary, its next step) shows why instead of nothing.

Printed by the front door (`groundctl.main`) only when the command line asked for `--json` and nothing was printed
on stdout yet; it never raises, so the error it reports is never hidden by one of its own."""

from __future__ import annotations

from typing import Optional, Sequence

from bootstrap.kit import console

def invocation(argv: Sequence[str]) -> tuple[list[str], dict]:
    """The command's words (`state rehearse`) and its parsed parameters, read as click would, without running it."""
    from groundctl.cli import command

    cmd, words, rest = command(), [], list(argv)
    while isinstance(getattr(cmd, "commands", None), dict):  # a group: the next word that is not an option
        i = next((i for i, a in enumerate(rest) if not a.startswith("-")), None)
        sub = cmd.commands.get(rest[i]) if i is not None else None
        if sub is None:
            return words, {}
        words.append(rest[i])
        rest, cmd = rest[i + 1:], sub
    return words, dict(cmd.make_context(" ".join(words), rest, resilient_parsing=True).params)


def document(argv: Sequence[str], message: str, exit_code: int, outcome: str) -> Optional[dict]:
    """The record of a command that stopped before its report, or None when the command line did not ask for JSON."""
    try:
        words, params = invocation(argv)
    except Exception:  # noqa: BLE001 - a command line click cannot even parse: judged by its words alone
        words, params = [], {"json_out": "--json" in argv}
    if params.get("json_out") is not True:
        return None
    environment = params.get("environment")
    return {"command": " ".join(words) or None, "environment": environment if isinstance(environment, str) else None,
            "outcome": outcome, "message": message, "exit_code": exit_code, "stopped_before_report": True,
            "stored": False, "layers": []}


def emit(argv: Sequence[str], message: str, exit_code: int, outcome: str = "failed") -> None:
    if console.json_emitted:
        return
    try:
        doc = document(argv, message, exit_code, outcome)
        if doc is not None:
            console.emit_json(doc)
    except Exception:  # noqa: BLE001 - the error already on stderr is the one that matters
        pass
