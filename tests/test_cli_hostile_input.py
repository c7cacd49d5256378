"""Hostile or careless input at the front door ends in exit 2 with one paragraph, never a hang, a
traceback or an internal error (issue 13 items 6 and 7; issue 10's input limits)."""

from __future__ import annotations

import os
import threading

import pytest

from recovery.state import state_bytes as state_mod
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


# -- hostile specs (issue 13 item 5) ------------------------------------------------------------------

def _spec_with(tmp_path, text: str):
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    return path


def _local_text() -> str:
    from tests.conftest import REPO
    return (REPO / "environments" / "local.yaml").read_text()


def test_an_environment_name_too_long_for_a_file_system(monkeypatch, capsys):
    assert_refused(groundctl(monkeypatch, capsys, "spec", "check", "x" * 300), 2, "too long for a file system")


def test_an_out_path_too_long_for_a_file_system(monkeypatch, capsys, tmp_path):
    out = tmp_path / ("o" * 300)
    result = groundctl(monkeypatch, capsys, "plan", "local", "--offline", "--out", str(out))
    assert_refused(result, 2, "too long for a file system")
    assert len(result[2]) < 2000


def test_yaml_nested_thousands_of_levels(monkeypatch, capsys, tmp_path):
    path = _spec_with(tmp_path, "name: " + "[" * 3000 + "]" * 3000 + "\n")
    assert_refused(groundctl(monkeypatch, capsys, "spec", "check", str(path)), 2, "nests more than")


def test_an_integer_of_a_hundred_thousand_digits(monkeypatch, capsys, tmp_path):
    path = _spec_with(tmp_path, _local_text().replace("az_count: 2", "az_count: " + "9" * 100_000))
    result = groundctl(monkeypatch, capsys, "spec", "check", str(path))
    assert_refused(result, 2, "an integer of 100,000 digits")
    assert len(result[2]) < 2000


def test_a_huge_string_is_never_echoed_whole(monkeypatch, capsys, tmp_path):
    # Under the size limit, but far longer than any message should quote.
    path = _spec_with(tmp_path, _local_text().replace("name: local", "name: " + "a" * 200_000))
    result = groundctl(monkeypatch, capsys, "spec", "check", str(path))
    assert_refused(result, 2)
    assert len(result[2]) < 2000 and "200,000 characters" in result[2]


def test_an_oversized_spec_is_refused_at_once_naming_the_limit(monkeypatch, capsys, tmp_path):
    path = _spec_with(tmp_path, _local_text() + "#" * (50 * 1024 * 1024) + "\n")
    result = groundctl(monkeypatch, capsys, "spec", "check", str(path))
    assert_refused(result, 2, "-byte limit for a spec")
    assert len(result[2]) < 2000


def test_a_duplicate_key_names_the_key_and_both_lines(monkeypatch, capsys, tmp_path):
    text = _local_text()
    assert "production: false" in text
    path = _spec_with(tmp_path, text.replace("production: false", "production: true\nproduction: false", 1))
    first = text.splitlines().index("production: false") + 1
    assert_refused(groundctl(monkeypatch, capsys, "spec", "check", str(path)), 2,
                   "the key 'production' appears twice", f"lines {first} and {first + 1}")


@pytest.mark.parametrize("text", [
    "a: 1\na: 2\n", "name: " + "[" * 3000 + "]" * 3000 + "\n", "- " * 50 + "x\n", "n: " + "9" * 40 + "\n",
    "a: *missing\n", "a: [1, 2\n", "a: \x01\n", "a: !!python/object:os.system x\n", "a: &x [1]\nb: *x\n",
    "a:\n  b: {c: 1, c: 2}\n", "a: 1\n---\nb: 2\n", "x: 0o17\ny: 1_000\nz: ~\nw: 2026-12-06\n"])
def test_the_libyaml_loader_refuses_and_reads_exactly_what_the_python_one_does(tmp_path, text):
    """Specs are read with libyaml's scanner and parser (four times faster: a fleet of 10,000 parses each one on
    every run) under the same Python composer and constructor: the same data, the same refusals, at the same
    place."""
    import yaml

    from bootstrap.spec import spec_file

    assert spec_file._StrictLoader is not spec_file._PythonStrictLoader, "PyYAML without libyaml"

    def outcome(loader):
        try:
            return "data", spec_file.load_strict(text, loader)
        except spec_file._Refusal as exc:  # where: libyaml may refuse deep nesting itself, further on
            return "refused", exc.message
        except yaml.YAMLError as exc:
            return "invalid", type(exc).__name__

    assert outcome(spec_file._StrictLoader) == outcome(spec_file._PythonStrictLoader)
