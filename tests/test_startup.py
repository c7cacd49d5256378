"""The front door stays light: a command's --help imports only that command's module and nothing heavy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from groundctl.cli import COMMAND_MODULES, _modules_for, app

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pydantic", "botocore", "boto3", "pulumi", "yaml", "moto", "recovery", "bootstrap.aws", "bootstrap.engine")


def _imported(*args: str) -> tuple[set[str], str]:
    """Modules a fresh `python -X importtime -m groundctl <args>` imported, and its stdout."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "groundctl", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env=os.environ | {"COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {m.group(1) for m in re.finditer(r"^import time:.*\|\s*(\S+)$", proc.stderr, re.M)}
    return names, proc.stdout


def test_every_command_has_its_modules_listed():
    registered = set(typer.main.get_command(app).commands)
    assert registered == set(COMMAND_MODULES)
    # A new command module that is not in the table would never be imported when run as the program.
    listed = {m for mods in COMMAND_MODULES.values() for m in mods}
    registering = {p.stem for p in (ROOT / "groundctl").glob("*.py")
                   if re.search(r"@(app|state_app)\.command\(|app\.add_typer\(", p.read_text()) and p.stem != "cli"}
    assert registering <= listed, registering - listed


def test_a_command_line_imports_only_its_command_and_the_rest_gets_everything():
    assert _modules_for(["state", "versions", "--help"]) == ("state", "state_import", "state_verify", "state_rehearse")
    assert _modules_for(["-h", "recover"]) == ("recover",)
    everything = _modules_for(["--help"])
    assert set(everything) == {m for mods in COMMAND_MODULES.values() for m in mods}
    assert _modules_for(["no-such-command"]) == everything  # click still lists every command in its error


@pytest.mark.parametrize("args", [["--help"], ["state", "versions", "--help"], ["recover", "--help"],
                                  ["up", "--help"], ["drill", "state-loss", "--help"]])
def test_help_imports_nothing_heavy(args):
    names, out = _imported(*args)
    assert "Usage:" in out
    heavy = sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))
    assert heavy == []


@pytest.mark.parametrize("command", sorted(COMMAND_MODULES))
def test_each_command_answers_its_help_on_its_own(command):
    names, out = _imported(command, "--help")
    assert f"groundctl {command}" in out
    others = {m for c, mods in COMMAND_MODULES.items() for m in mods if c != command} - set(COMMAND_MODULES[command])
    assert not {f"groundctl.{m}" for m in others} & names


def test_spec_check_loads_the_spec_models_and_nothing_of_aws_or_pulumi():
    names, _out = _imported("spec", "check", "local")
    assert "bootstrap.spec" in names
    assert not [n for n in names if n.split(".")[0] in ("botocore", "boto3", "pulumi", "moto", "recovery")
                or n.startswith(("bootstrap.aws", "bootstrap.engine"))]
