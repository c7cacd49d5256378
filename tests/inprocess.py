"""`groundctl ARGS` through the real front door (`groundctl.main`) in the test process: the exit code, stdout and
stderr a `python -m groundctl` process gives, without paying its start-up (the imports) for every case.

What a fresh process starts with, and what a command changes in the process, is set for each run and put back
after it: the environment (exactly the one given), argv, the working folder, stdout and stderr, the SIGINT and
SIGTERM handlers and the unraisable hook the front door installs, and the process's budget for unanswered AWS
calls. Runs on the main thread (signal handlers can be installed only there), one at a time. What only a real
process shows (a signal, a broken pipe, stdout and stderr as separate file descriptors) is tested on real
processes.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Mapping

from tests.conftest import REPO


def _set_environ(env: Mapping[str, str]) -> None:
    # Key by key rather than clear-and-fill: the emulator's threads read the environment while this runs.
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]
    for key, value in env.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def run_main(args: list[str], env: Mapping[str, str], cwd=REPO) -> subprocess.CompletedProcess:
    """`groundctl *args` with `env` as the whole environment, in `cwd`; returncode, stdout and stderr as text."""
    import groundctl
    from bootstrap.aws import clients

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv, saved_cwd = dict(os.environ), sys.argv, os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    saved_budget, saved_running, saved_hook = clients.BUDGET, groundctl._running, sys.unraisablehook
    code: object = 0
    _set_environ(env)
    sys.argv = ["groundctl", *args]
    os.chdir(cwd)
    clients.BUDGET = clients._Budget()  # a new process starts with the whole budget
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            groundctl.main()
    except SystemExit as exc:
        code = exc.code
        if isinstance(code, str):  # what the interpreter does with sys.exit("message")
            err.write(code + "\n")
    finally:
        _set_environ(saved_env)
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        for signum, handler in saved_signals.items():
            signal.signal(signum, handler)
        clients.BUDGET, groundctl._running, sys.unraisablehook = saved_budget, saved_running, saved_hook
    returncode = 0 if code is None else code if isinstance(code, int) else 1
    return subprocess.CompletedProcess(["groundctl", *args], returncode, out.getvalue(), err.getvalue())
