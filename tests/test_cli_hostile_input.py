"""Hostile or careless input at the front door ends in exit 2 with one paragraph, never a hang, a
traceback or an internal error (issue 13 items 6 and 7; issue 10's input limits)."""

from __future__ import annotations

import os
import threading

import pytest

from recovery import state as state_mod
from tests.test_cli_errors import assert_refused, groundctl


@pytest.mark.parametrize("value", ["", ",", " , ,"])
@pytest.mark.parametrize("command", [["up", "local", "--yes"], ["destroy", "local", "--yes"], ["drift", "local"],
                                     ["plan", "local", "--offline"]])
def test_an_empty_layer_selection_is_bad_input_not_every_layer(monkeypatch, capsys, command, value):
    assert_refused(groundctl(monkeypatch, capsys, *command, "--layers", value), 2,
                   "--layers was given but names no layer")


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "state.json"
    os.mkfifo(path)
    # Should anything open the FIFO for reading, a writer unblocks it so the test fails instead of hanging.
    def unblock():
        try:
            with open(path, "w") as f:
                f.write("{}")
        except OSError:
            pass
    yield path
    t = threading.Thread(target=unblock, daemon=True)
    t.start()
    t.join(timeout=1)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", [["state", "inspect"], ["state", "import-plan"]])
def test_a_fifo_is_refused_without_reading_it(monkeypatch, capsys, fifo, command):
    assert_refused(groundctl(monkeypatch, capsys, *command, str(fifo)), 2, "not a regular file")


@pytest.mark.timeout(30)
def test_a_device_that_never_ends_is_refused(monkeypatch, capsys):
    assert_refused(groundctl(monkeypatch, capsys, "state", "inspect", "/dev/zero"), 2, "not a regular file")


def test_an_oversized_state_file_is_refused_by_its_size(monkeypatch, capsys, tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    monkeypatch.setattr(state_mod, "MAX_STATE_BYTES", 1024)
    monkeypatch.setattr(state_mod.read_state_bytes, "__defaults__", (1024,))
    assert_refused(groundctl(monkeypatch, capsys, "state", "inspect", str(big)), 2, "over the 1,024-byte limit")
