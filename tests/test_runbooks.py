"""Every `groundctl …` command shown in runbooks/ and the README must exist, with every flag it uses.

Commands are read from fenced code blocks and inline code spans; the subcommand path and each
option are checked against the CLI's own command tree (what `--help` shows), so a runbook can never
tell an operator to type a command that does not work.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer

from groundctl import app

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted((REPO / "runbooks").glob("*.md")) + sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]

_FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.S)
_INLINE = re.compile(r"`(groundctl [^`]+)`")


def _commands(text: str) -> list[str]:
    found = []
    for block in _FENCE.findall(text):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.strip().lstrip("$ ").strip()
            if line.startswith("groundctl "):
                found.append(line)
    found += _INLINE.findall(_FENCE.sub("", text))
    return found


def _words(command: str) -> list[str]:
    command = command.split(" #", 1)[0]
    for sep in ("|", "&&", ";", ">"):
        command = command.split(sep, 1)[0]
    return shlex.split(command)[1:]


def check_command(root, words: list[str]) -> str | None:
    """None when the command exists with all its flags; otherwise what is wrong."""
    cmd = root
    path = ["groundctl"]
    i = 0
    while hasattr(cmd, "commands") and i < len(words) and not words[i].startswith("-"):
        sub = cmd.commands.get(words[i])
        if sub is None:
            if words[i].startswith("<") or words[i] == "…":
                return None
            return f"'{' '.join(path)}' has no subcommand '{words[i]}'"
        path.append(words[i])
        cmd = sub
        i += 1
    if hasattr(cmd, "commands") and i == len(words):
        return None
    known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)} | {"--help"}
    for w in words[i:]:
        if w.startswith("--"):
            flag = w.split("=", 1)[0]
            if flag not in known:
                return f"'{' '.join(path)}' has no option '{flag}'"
        elif w.startswith("-") and len(w) == 2 and w not in known:
            return f"'{' '.join(path)}' has no option '{w}'"
    return None


def _all_commands() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        if doc.exists():
            for c in _commands(doc.read_text()):
                out.append((doc.name, c))
    return out


ROOT = typer.main.get_command(app)


def test_docs_show_commands():
    assert len(_all_commands()) >= 5


@pytest.mark.parametrize("doc,command", _all_commands())
def test_documented_command_exists(doc, command):
    problem = check_command(ROOT, _words(command))
    assert problem is None, f"{doc}: `{command}`: {problem}"


def test_checker_catches_a_missing_flag_and_subcommand():
    assert check_command(ROOT, ["spec", "check", "dev", "--no-such-flag"])
    assert check_command(ROOT, ["no-such-command"])
    assert check_command(ROOT, ["spec", "check", "dev", "--json"]) is None
