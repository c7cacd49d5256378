"""Before anything is written: can the Pulumi engine run what the command will ask of it?

Each check is a pure decision over what a thin probe reads:
- the CLI on PATH, at `PULUMI_CLI_MIN` or later (an older CLI fails later with a raw "unknown flag");
- the resource plugins the command runs (bootstrap/engine/plugins.py): the ones each layer's program
  needs, at the versions the installed SDKs ask for, and the ones its stack's state records;
- pip in the Python that runs the programs (bootstrap/engine/toolchain.py).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from bootstrap.engine.errors import missing_cli_error
from bootstrap.engine.plugins import (OPERATION_NEEDS, STATE, command_needs, layer_plugins, require_plugins,
                                      state_plugins)
from bootstrap.engine.toolchain import require_pip
from bootstrap.engine.versions import PULUMI_CLI_MIN, PULUMI_CLI_PINNED, platform_key
from bootstrap.kit.errors import EngineError
from bootstrap.kit.untrusted import one_line

VERSION_TIMEOUT = 30.0  # seconds `pulumi version` may take (a Go binary answers in well under one)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


# -- the CLI version ---------------------------------------------------------------------------------


def parse_version(text: str) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) of 'v3.259.0' or '3.260.0-dev.0'; None when it is not a version. Pure."""
    m = _VERSION.match(text.strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def cli_version_problem(reported: str, minimum: str = PULUMI_CLI_MIN,
                        pinned: str = PULUMI_CLI_PINNED) -> Optional[str]:
    """The one-paragraph problem with what `pulumi version` printed, or None when it will do. Pure."""
    found = parse_version(reported)
    install = (f"Install Pulumi CLI v{pinned} (the version groundctl is tested with) or any release from "
               f"v{minimum} on, check that `pulumi version` prints it in this shell, and run the command again; "
               "groundctl never downloads the CLI.")
    if found is None:
        return (f"The Pulumi CLI on PATH did not report a version groundctl can read (`pulumi version` printed "
                f"'{one_line(reported)}'), so it cannot tell whether it is v{minimum} or later, which it needs. "
                f"Nothing was changed. {install}")
    if found < parse_version(minimum):
        return (f"The Pulumi CLI on PATH is v{'.'.join(map(str, found))}, but groundctl needs v{minimum} or later "
                f"(it sets secrets with `pulumi config set --raw`, which older releases reject as an unknown "
                f"flag). Nothing was changed. {install}")
    return None


_probed: dict[tuple, str] = {}


def _reported_version(path: str) -> str:
    """What `pulumi version` prints, asked once per binary per process (the check runs "once at start"
    however many engines a command builds)."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _probed:
        env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
        try:
            done = subprocess.run([path, "version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT,
                                  env=env, check=False)
        except subprocess.TimeoutExpired:
            raise EngineError(f"The Pulumi CLI at {one_line(path)} did not answer `pulumi version` within "
                              f"{VERSION_TIMEOUT:.0f} s, so groundctl cannot use it. Nothing was changed. Check "
                              "that `pulumi version` works in this shell, and run the command again.") from None
        except OSError as exc:
            raise missing_cli_error(one_line(f"{path}: {exc.strerror or exc}")) from None
        if done.returncode != 0:
            raise EngineError(f"The Pulumi CLI at {one_line(path)} failed to report its version (`pulumi version` "
                              f"exited {done.returncode}: {one_line(done.stderr or done.stdout)}). Nothing was "
                              "changed. Check that `pulumi version` works in this shell, and run the command "
                              "again.")
        _probed[key] = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return _probed[key]


def pulumi_available() -> bool:
    """Whether a `pulumi` binary is on PATH (the SDK runs `pulumi` and never installs one here)."""
    return shutil.which("pulumi") is not None


def require_pulumi() -> None:
    """Fail early, in one paragraph, when the CLI is missing (its version is checked when an engine is built)."""
    if not pulumi_available():
        raise missing_cli_error()


def require_cli() -> str:
    """The version of the `pulumi` on PATH; EngineError (exit 4) when it is missing or older than the floor."""
    path = shutil.which("pulumi")
    if path is None:
        raise missing_cli_error()
    reported = _reported_version(path)
    problem = cli_version_problem(reported)
    if problem:
        raise EngineError(problem)
    return reported


# -- what the programs need -----------------------------------------------------------------------------


StateOf = Callable[[str], Optional[Mapping[str, Any]]]  # layer → its stack's deployment, None without one


def engine_environment(engine: object, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment `engine` runs the CLI with: its settings' variables over the process's."""
    return {**environ, **(getattr(getattr(engine, "settings", None), "env", None) or {})}


def require_engine(engine: object, layers: Sequence[str], environ: Mapping[str, str] = os.environ, *,
                   operation: Optional[str] = None, states: Optional[StateOf] = None) -> None:
    """Before the first write, for an engine that runs Pulumi programs (one with a `stacks_dir`), under the
    environment it runs the CLI with (its settings' variables over the process's): pip in the programs' Python,
    and every plugin `operation` runs (bootstrap/engine/plugins.py OPERATION_NEEDS): the programs', and, where
    `states` reads the layers' states, the versions those record. EngineError (exit 4) naming what is missing."""
    stacks_dir = getattr(engine, "stacks_dir", None)
    if stacks_dir is None:
        return  # an engine that runs no Pulumi program needs no plugin
    env = engine_environment(engine, environ)
    require_pip(env)
    program = {layer: layer_plugins(Path(stacks_dir), layer, env.get("PYTHONPATH", "")) for layer in layers}
    if states is None:
        # Without the states only the programs' needs are known: what every command was checked for before.
        needs = command_needs("up", program, {})
    else:
        # The states are read only for a command that runs their providers (refresh, destroy, drift, recover).
        reads_state = STATE in OPERATION_NEEDS.get(operation or "", {STATE})
        recorded = {layer: state_plugins(deployment) for layer in (layers if reads_state else ())
                    for deployment in [states(layer)] if deployment}
        needs = command_needs(operation, program, recorded)
    require_plugins(needs, env, platform_key(platform.system(), platform.machine()))


def stored_states(store: object, environment: str) -> StateOf:
    """A `states` reader over the state bucket: each layer's current state object, decompressed and parsed,
    read once per reader (a run's phases share one); None where there is none or it cannot be read (the
    engine then reports the state's own problem)."""
    from bootstrap.records.ledger import current_state, decompress
    from bootstrap.kit.untrusted import decode_json

    read_once: dict[str, Optional[Mapping[str, Any]]] = {}

    def read(layer: str) -> Optional[Mapping[str, Any]]:
        if layer not in read_once:
            read_once[layer] = _read(layer)
        return read_once[layer]

    def _read(layer: str) -> Optional[Mapping[str, Any]]:
        try:
            stored = current_state(store, layer, environment)
            doc = decode_json(decompress(stored.body).decode("utf-8", errors="replace")) if stored else None
        except Exception:  # noqa: BLE001 - a missing bucket or an unreadable state: nothing recorded to check
            return None
        if isinstance(doc, dict) and isinstance(doc.get("checkpoint"), dict):
            doc = doc["checkpoint"].get("latest")
        elif isinstance(doc, dict):
            doc = doc.get("deployment")
        return doc if isinstance(doc, dict) else None

    return read
