"""A file the operator names is checked for its type and size before it is opened, and read under a deadline
(issue 27 §5): a FIFO, a device or a hung mount ends in exit 2 naming the file, never a wait forever.

Every call that could block runs on a thread here and is given a generous bound: before the fix, a FIFO
blocked `open()` until a writer came, and the bound is what turns that hang into a failing test."""

from __future__ import annotations

import os
import threading
import time

import pytest

from bootstrap.engine.passphrase import passphrase_from
from bootstrap.kit.errors import BadInput
from bootstrap.kit.user_files import UnusableFile, read_user_file

BOUND = 60.0  # seconds: far above the reader's own deadline, so only a hang reaches it


def _bounded(call):
    """(result, error) of `call()` run on a daemon thread; fails the test when it has not returned by BOUND."""
    box: dict = {}

    def run():
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND)
    if thread.is_alive():
        pytest.fail(f"still waiting after {BOUND:.0f} s: the read never ended")
    return box.get("result"), box.get("error")


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "named-pipe"
    os.mkfifo(path)
    return path


def _read(path, **kw):
    return read_user_file(str(path), what="The test file", max_bytes=kw.pop("max_bytes", 1024), fix="Fix it", **kw)


def test_a_regular_file_is_read(tmp_path):
    (tmp_path / "f").write_bytes(b"hello")
    assert _read(tmp_path / "f") == b"hello"


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_what_is_not_a_regular_file_is_refused_before_it_is_opened_naming_it(fifo, tmp_path, kind):
    path = {"fifo": fifo, "device": "/dev/zero", "folder": tmp_path}[kind]
    _, error = _bounded(lambda: _read(path))
    assert isinstance(error, UnusableFile) and isinstance(error, BadInput) and error.exit_code == 2
    assert str(path) in error.message
    assert {"fifo": "a FIFO (named pipe)", "device": "a character device", "folder": "a folder"}[kind] in error.reason


def test_a_file_over_its_limit_is_refused_before_it_is_read(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 2048)
    with pytest.raises(UnusableFile, match="2,048 bytes, over the 1,024-byte limit"):
        _read(tmp_path / "big")


def test_a_missing_file_and_a_symbolic_link_where_none_is_allowed(tmp_path):
    with pytest.raises(UnusableFile, match="No such file"):
        _read(tmp_path / "absent")
    (tmp_path / "target").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert _read(tmp_path / "link") == b"x"
    with pytest.raises(UnusableFile, match="symbolic link"):
        _read(tmp_path / "link", follow_symlinks=False)


def test_a_hung_read_ends_at_its_deadline_naming_the_file(tmp_path):
    """A hung network mount blocks stat() or read() in the kernel: the reader seam blocks the same way."""
    release = threading.Event()

    def hung(path, max_bytes, follow):
        release.wait(BOUND)
        return b""

    started = time.monotonic()
    _, error = _bounded(lambda: _read(tmp_path / "on-a-dead-mount", deadline=0.5, reader=hung))
    release.set()
    assert isinstance(error, UnusableFile)
    assert "on-a-dead-mount" in error.message and "was not read within 0.5 s" in error.message
    assert time.monotonic() - started < BOUND


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_the_passphrase_file_never_waits(fifo, kind):
    path = fifo if kind == "fifo" else "/dev/zero"
    _, error = _bounded(lambda: passphrase_from({"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)}))
    assert isinstance(error, BadInput) and error.exit_code == 2
    assert str(path) in error.message and "PULUMI_CONFIG_PASSPHRASE_FILE" in error.message


def test_the_ci_requirements_file_never_waits(monkeypatch, capsys, tmp_path, fifo):
    from tests.conftest import REPO
    from tests.test_cli_errors import groundctl

    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "dev.yaml").write_text((REPO / "environments" / "dev.yaml").read_text())
    os.replace(fifo, tmp_path / "groundctl-requirements.txt")
    # On the main thread (the CLI sets signal handlers): a regression that waits hits pytest's own timeout.
    code, out, err = groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(tmp_path))
    assert code == 2, err
    assert "groundctl-requirements.txt is not a readable file" in " ".join(err.split())
    assert "a FIFO (named pipe)" in " ".join(err.split())


def test_a_plan_folders_json_file_never_waits(tmp_path, fifo):
    """`up --plan-dir`: every plan-<env>-*.json beside the saved plans is read by the one reader (it was a plain
    read_text(), which a FIFO blocked forever)."""
    from bootstrap.apply.runner import approved_plans

    os.replace(fifo, tmp_path / "plan-dev-network.json")
    _, error = _bounded(lambda: approved_plans(tmp_path, "dev"))
    assert isinstance(error, UnusableFile) and error.exit_code == 2
    assert "plan-dev-network.json" in error.message and "a FIFO (named pipe)" in error.reason


@pytest.mark.parametrize("command", ["targets", "comment", "summary", "state"])
def test_every_file_a_command_is_given_is_refused_as_a_fifo_not_waited_for(monkeypatch, capsys, tmp_path, fifo,
                                                                           command):
    from tests.conftest import REPO
    from tests.test_cli_errors import groundctl

    envs = tmp_path / "environments"
    envs.mkdir()
    (envs / "dev.yaml").write_text((REPO / "environments" / "dev.yaml").read_text())
    live = tmp_path / "plans" / "live"
    live.mkdir(parents=True)
    where = {"targets": tmp_path / "changed.txt", "comment": live / "plan-dev-live.json",
             "summary": tmp_path / "record.json", "state": tmp_path / "state.json"}[command]
    os.replace(fifo, where)
    argv = {"targets": ["ci", "targets", "--dir", str(tmp_path), "--changed-files", str(where)],
            "comment": ["ci", "comment", "dev", "--plan-dir", str(tmp_path / "plans")],
            "summary": ["ci", "summary", "dev", "--record", str(where)],
            "state": ["state", "inspect", str(where)]}[command]
    # On the main thread (the CLI sets signal handlers): a regression that waits hits pytest's own timeout.
    code, out, err = groundctl(monkeypatch, capsys, *argv)
    assert code == 2, err + out
    assert "FIFO" in " ".join((err + out).split()) or "not a regular file" in " ".join((err + out).split()), err + out
