"""Cluster tier: the fixture's processes never outlive the test process, however it ends.

Shown with etcd alone (the first process the fixture starts, and the cheapest): a child Python process
starts it exactly as tests/kubeapi.py starts all three, and is then interrupted or killed outright. And a
start whose port another process took first (each xdist worker starts its own servers) is made again.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests import kubeapi
from tests.conftest import REPO
from tests.kubeapi import KubeCluster, PortTaken, _spawn, _wait

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


def _etcd_argv(folder, client: int, peer: int) -> list[str]:
    return ["etcd", "--data-dir", str(folder / "etcd"), "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}", "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}", "--initial-cluster",
            f"default=http://127.0.0.1:{peer}"]


def test_a_server_that_finds_its_port_taken_is_told_apart_from_other_failures(tmp_path):
    """Ports are chosen free and bound by the servers a moment later: under xdist another worker's server or a
    Pulumi plugin may take one in between. That exit is PortTaken (the start is made again), any other is not."""
    cluster = KubeCluster("https://127.0.0.1:1", b"", "t", "{}", tmp_path / "kubeconfig", tmp_path)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        try:
            cluster.procs["etcd"] = _spawn(_etcd_argv(tmp_path, held.getsockname()[1], kubeapi.free_port()),
                                           tmp_path / "etcd.log")
            with pytest.raises(PortTaken, match="etcd exited with"):
                _wait("etcd", lambda: False, cluster, time.monotonic() + 60)
        finally:
            cluster.stop()
    other = tmp_path / "other"
    other.mkdir()
    cluster = KubeCluster("https://127.0.0.1:1", b"", "t", "{}", other / "kubeconfig", other)
    cluster.procs["etcd"] = _spawn(["etcd", "--no-such-flag"], other / "etcd.log")
    try:
        with pytest.raises(RuntimeError, match="etcd exited with") as raised:
            _wait("etcd", lambda: False, cluster, time.monotonic() + 60)
    finally:
        cluster.stop()
    assert not isinstance(raised.value, PortTaken)


@pytest.mark.parametrize("failures, attempts, outcome", [
    ([PortTaken("etcd: bind: address already in use")] * 2, 3, "started"),
    ([PortTaken("etcd: bind: address already in use")] * 3, 3, PortTaken),
    ([RuntimeError("kube-apiserver exited with 1")], 1, RuntimeError),
], ids=["taken-twice", "taken-every-time", "other-failure"])
def test_a_start_whose_port_was_taken_is_made_again_on_new_ports_in_a_new_folder(tmp_path, monkeypatch, failures,
                                                                                  attempts, outcome):
    tried = []

    def start(folder, deadline):
        tried.append(folder)
        if len(tried) <= len(failures):
            raise failures[len(tried) - 1]
        return KubeCluster("https://127.0.0.1:1", b"", "t", "{}", folder / "kubeconfig", folder)

    monkeypatch.setattr(kubeapi, "_start", start)
    if outcome == "started":
        assert kubeapi.start_cluster(tmp_path).folder == tmp_path / f"attempt-{attempts}"
    else:
        with pytest.raises(outcome):
            kubeapi.start_cluster(tmp_path)
    assert tried == [tmp_path, *(tmp_path / f"attempt-{n}" for n in range(2, attempts + 1))]
