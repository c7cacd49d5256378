"""Cluster tier: the fixture's processes never outlive the test process, however it ends.

Shown with etcd alone (the first process the fixture starts, and the cheapest): a child Python process
starts it exactly as tests/kubeapi.py starts all three, and is then interrupted or killed outright.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.cluster, pytest.mark.skipif(shutil.which("etcd") is None,
                                                      reason="needs etcd on PATH (Debian's etcd-server)")]

CHILD = """
import atexit, pathlib, signal, sys, time
from tests.kubeapi import KubeCluster, _spawn, free_port
folder = pathlib.Path(sys.argv[1])
c, p = free_port(), free_port()
cluster = KubeCluster("https://127.0.0.1:1", b"", "t", "{}", folder / "kubeconfig", folder)
atexit.register(cluster.stop)
cluster.procs["etcd"] = _spawn(["etcd", "--data-dir", str(folder / "etcd"), "--listen-client-urls",
    f"http://127.0.0.1:{c}", "--advertise-client-urls", f"http://127.0.0.1:{c}", "--listen-peer-urls",
    f"http://127.0.0.1:{p}", "--initial-advertise-peer-urls", f"http://127.0.0.1:{p}",
    "--initial-cluster", f"default=http://127.0.0.1:{p}"], folder / "etcd.log")
print(cluster.procs["etcd"].pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def _run_child(tmp_path) -> tuple[subprocess.Popen, int]:
    # A shell's background job starts with SIGINT ignored, and a Python started so never turns it into a
    # KeyboardInterrupt: the child starts with the disposition an interactive pytest has, whatever ours is.
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)},
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    pid = int(child.stdout.readline())
    assert _alive(pid)
    return child, pid


def _gone(pid: int, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)  # never leave it behind, even when the test fails
    return False


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["interrupted", "killed"])
def test_the_clusters_processes_die_with_the_test_process(tmp_path, how):
    child, pid = _run_child(tmp_path)
    child.send_signal(how)
    try:
        child.wait(60)
    finally:
        child.kill()  # never left behind, even when the test fails
    assert _gone(pid), f"etcd (pid {pid}) outlived a test process ended by {how.name}"
