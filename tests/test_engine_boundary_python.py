"""The layer programs run under groundctl's own interpreter, with `stacks` importable.

Pulumi's Python host runs PULUMI_PYTHON_CMD when set, else `python3`/`python` from PATH
(sdk/python/toolchain/pip.go, CommandPath), and the program sees only its own folder on sys.path.
"""

from __future__ import annotations

import os
import sys

import pytest

from bootstrap.engine.workspace import program_python, workspace_settings
from bootstrap.layers import STACKS_DIR
from bootstrap.spec import load_spec
from tests.boundary_helpers import file_engine, write_program
from tests.conftest import requires_pulumi


def test_the_programs_get_groundctls_interpreter_and_the_stacks_package():
    env = program_python({"PYTHONPATH": "/opt/extra"})
    assert env["PULUMI_PYTHON_CMD"] == sys.executable
    assert env["PYTHONPATH"].split(os.pathsep) == [str(STACKS_DIR.parent), "/opt/extra"]
    assert program_python({})["PYTHONPATH"] == str(STACKS_DIR.parent)


def test_every_workspace_carries_them():
    settings = workspace_settings(load_spec("dev"), environ={})
    assert settings.env["PULUMI_PYTHON_CMD"] == sys.executable
    assert settings.env["PYTHONPATH"].split(os.pathsep)[0] == str(STACKS_DIR.parent)


@pytest.mark.engine
@requires_pulumi
def test_a_program_importing_stacks_common_previews_when_path_has_a_broken_python(tmp_path, monkeypatch):
    # The python3 first on PATH is not groundctl's (an unactivated venv, pipx): it cannot run anything.
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for name in ("python3", "python"):
        exe = fake_bin / name
        exe.write_text("#!/bin/sh\necho 'not the interpreter groundctl runs under' >&2\nexit 3\n")
        exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.delenv("PULUMI_PYTHON_CMD", raising=False)
    write_program(tmp_path / "stacks", "network", '''
        import pulumi
        from stacks.common import naming

        pulumi.export("naming_file", naming.__file__)
    ''')
    engine = file_engine(tmp_path, monkeypatch)
    engine.create_stack("network")
    plan = engine.preview("network")
    assert plan.counts.get("create") == 1  # the stack resource: the program ran and imported stacks.common
    # ...and it is this checkout's `stacks`, not one installed somewhere else.
    outputs = engine.up("network").outputs.values
    assert outputs["naming_file"] == str(STACKS_DIR / "common" / "naming.py")
