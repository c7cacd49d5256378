"""Pip in the Python that runs the layer programs.

Every layer's Pulumi.yaml pins `toolchain: pip`, and Pulumi's pip toolchain runs `python -m pip list --format json`
on every operation, failing it when pip is missing (sdk/python/toolchain/pip.go:146-159 ListPackages, :195-198
ModuleCommand). An environment made with uv has no pip unless asked. The Python is the one Pulumi picks:
PULUMI_PYTHON_CMD (which groundctl sets to its own interpreter), else `python3`, else `python` on PATH
(pip.go:304-345 CommandPath).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from typing import Mapping, Optional

from bootstrap.kit.errors import EngineError
from bootstrap.kit.untrusted import one_line

PIP_TIMEOUT = 60.0  # seconds `python -m pip --version` may take (it imports pip: a second or two when loaded)


def program_python(env: Mapping[str, str]) -> Optional[str]:
    """The path of the Python Pulumi would run the programs with under `env`, or None when there is none."""
    path = env.get("PATH", os.defpath)
    names = [env["PULUMI_PYTHON_CMD"]] if env.get("PULUMI_PYTHON_CMD") else ["python3", "python"]
    return next((found for name in names for found in [shutil.which(name, path=path)] if found), None)


def pip_problem(python: Optional[str], has_pip: bool, asked: str) -> Optional[str]:
    """The one-paragraph problem, or None when the programs' Python has pip. Pure."""
    if python is None:
        return (f"No Python to run the layer programs was found ({one_line(asked)} is not on PATH), so nothing was "
                "changed. Put it on PATH, or set PULUMI_PYTHON_CMD to a Python 3.11+ with groundctl installed, and "
                "run the command again.")
    if has_pip:
        return None
    return (f"The Python that runs the layer programs ({one_line(python)}) has no pip, and Pulumi's pip toolchain, "
            "which every layer pins, runs `python -m pip list` on every operation and fails without it. Nothing was "
            f"changed. Install pip into it with `{one_line(python)} -m ensurepip --upgrade` (in an environment made "
            "with uv: `uv pip install pip`, or create it with `uv venv --seed`), then run the command again.")


_probed: dict[tuple, bool] = {}


def _has_pip(python: str) -> bool:
    """Whether `python -m pip` runs: asked of this interpreter directly when it is the one, else by running it
    (once per binary per process)."""
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        return importlib.util.find_spec("pip") is not None
    st = os.stat(python)
    key = (python, st.st_mtime_ns, st.st_size)
    if key not in _probed:
        try:
            done = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, timeout=PIP_TIMEOUT,
                                  check=False, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
            _probed[key] = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _probed[key] = False
    return _probed[key]


def require_pip(env: Mapping[str, str]) -> None:
    """EngineError (exit 4) when the programs' Python under `env` has no pip."""
    python = program_python(env)
    problem = pip_problem(python, python is not None and _has_pip(python),
                          env.get("PULUMI_PYTHON_CMD") or "python3 or python")
    if problem:
        raise EngineError(problem)
