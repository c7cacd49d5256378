"""Issue 37 §1: a signal sent to groundctl alone reaches its Pulumi child (bootstrap/engine/children.py).

The real Pulumi CLI under an interrupted command is the engine tier's (tests/test_engine_tier_signals.py); here
a stand-in `pulumi` on PATH behaves as the two kinds of child a command meets: one that cancels on SIGINT as
Pulumi's cancellation scope does, and one that ignores it and has started a process of its own in another
process group (as Pulumi starts its plugins). A driver process runs the SDK's command through groundctl's
`KnownCli`, with groundctl's signal handling installed, and is sent SIGTERM alone, as `kill <pid>` or a pod's
eviction sends it: never to the child's group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.processes import alive

CANCELS = """\
#!{python}
import os, signal, sys, time
def cancel(signum, frame):
    open(os.environ["CHILD_LOG"], "a").write(f"{{signal.Signals(signum).name}}\\n")
    sys.exit(255)
signal.signal(signal.SIGINT, cancel)
open(os.environ["CHILD_PID"], "w").write(str(os.getpid()))
time.sleep(600)
"""

IGNORES = """\
#!{python}
import os, signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
plugin = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], process_group=0)
open(os.environ["CHILD_PID"], "w").write(f"{{os.getpid()}} {{plugin.pid}}")
time.sleep(600)
"""

DRIVER = """\
import sys, time
from bootstrap.kit import interrupts
from bootstrap.engine import children, sdk_objects
children.GRACE_SECONDS = float(sys.argv[1])
interrupts.install()
try:
    sdk_objects.KnownCli("v3.259.0").run(["preview"], ".", {{}})
except KeyboardInterrupt:
    print("interrupted", children.killed, flush=True)
    sys.exit(130)
"""


def _stand_in(folder: Path, script: str) -> dict:
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "pulumi"
    cli.write_text(script.format(python=sys.executable))
    cli.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(REPO),
            "CHILD_LOG": str(folder / "child.log"), "CHILD_PID": str(folder / "child.pid")}


def _wait_for(path: Path, timeout: float = 60) -> str:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    pytest.fail(f"{path} was never written")


def _driver(tmp_path: Path, script: str, grace: float) -> tuple[subprocess.Popen, list[int]]:
    env = _stand_in(tmp_path, script)
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(DRIVER.format()), str(grace)], env=env,
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    pids = [int(p) for p in _wait_for(tmp_path / "child.pid").split()]
    return proc, pids


def test_sigterm_to_groundctl_alone_cancels_the_child_through_its_own_process_group(tmp_path):
    proc, (child,) = _driver(tmp_path, CANCELS, grace=60)
    assert os.getpgid(child) == child != os.getpgid(proc.pid)  # a group of its own: a terminal's ^C misses it
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)  # groundctl alone, never its child's group
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the driver still waits for its child a minute after SIGTERM: {proc.communicate()}")
    assert proc.returncode == 130 and "interrupted []" in out, err  # it cancelled: nothing had to be killed
    assert time.monotonic() - sent < 30
    assert (tmp_path / "child.log").read_text() == "SIGINT\n"  # told, as a terminal's Ctrl-C tells Pulumi
    assert not alive(child)


def test_a_child_that_ignores_the_interrupt_is_killed_after_the_grace_with_what_it_started(tmp_path):
    proc, (child, plugin) = _driver(tmp_path, IGNORES, grace=1.5)
    assert os.getpgid(plugin) == plugin  # like a Pulumi plugin: a group of its own, under the child
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the driver still waits for its child a minute after SIGTERM: {proc.communicate()}")
    took = time.monotonic() - sent
    assert proc.returncode == 130 and "interrupted ['`pulumi preview`']" in out, err
    assert 1.5 <= took < 30  # the grace first, then the kill
    ends = time.monotonic() + 30
    while (alive(child) or alive(plugin)) and time.monotonic() < ends:
        time.sleep(0.05)
    assert not alive(child) and not alive(plugin)


def test_a_finished_child_returns_its_output_as_the_sdk_does(tmp_path):
    from bootstrap.engine import children

    code, out, err = children.run([sys.executable, "-c", "import sys; print('a '); print('b'); "
                                   "sys.stderr.write('e\\n'); sys.exit(3)"], cwd=str(tmp_path), env=os.environ)
    assert (code, out, err) == (3, "a\nb", "e")
    code, out, _ = children.run([sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"],
                                cwd=None, env=os.environ, input="secret\n")
    assert (code, out) == (0, "secret")
    with pytest.raises(subprocess.TimeoutExpired):
        children.run([sys.executable, "-c", "import time; time.sleep(60)"], cwd=None, env=os.environ, timeout=0.5)


def test_the_bound_the_readme_and_the_exit_codes_page_give_is_the_codes():
    from bootstrap.engine.children import GRACE_SECONDS, INTERRUPTED_EXIT_SECONDS, KILL_SECONDS

    assert GRACE_SECONDS + KILL_SECONDS < INTERRUPTED_EXIT_SECONDS  # room for the unwinding after the kill
    readme, page = (REPO / "README.md").read_text(), (REPO / "docs" / "exit-codes.md").read_text()
    assert f"within {INTERRUPTED_EXIT_SECONDS} s with exit 130" in " ".join(readme.split())
    assert f"killed after {GRACE_SECONDS:.0f} s" in " ".join(readme.split())
    assert f"within {INTERRUPTED_EXIT_SECONDS} s of the signal, with exit 130" in " ".join(page.split())
    assert f"still running {GRACE_SECONDS:.0f} s after the signal is killed" in " ".join(page.split())
