"""`status` of an environment on the embedded emulator: an emulator started for the command is empty whatever an
earlier `up` wrote (that state went with the emulator it ran on), so its answer would be every layer "never
applied", exit 0: a history that is not the truth. It says the state is gone and how to keep an emulator, as the
commands that read state (`state rehearse`, `lock status`, …) do; against a running emulator it answers as before."""

from __future__ import annotations

import json

import pytest

from tests.test_cli_errors import assert_refused, groundctl

GONE = ("uses the embedded emulator", "one started for this command would be empty", "went with the emulator",
        "groundctl emulator start", "--endpoint-url")


@pytest.mark.parametrize("json_flag", [[], ["--json"]])
def test_status_of_an_embedded_environment_says_its_state_is_gone(monkeypatch, capsys, local_spec_file, json_flag):
    result = groundctl(monkeypatch, capsys, "status", str(local_spec_file), *json_flag)
    assert_refused(result, 2, *GONE)
    assert "never applied" not in result[1] + result[2]
    assert "Started the embedded AWS emulator" not in result[2]  # none was started for nothing


def test_the_shipped_local_spec_too(monkeypatch, capsys):
    assert_refused(groundctl(monkeypatch, capsys, "status", "local"), 2, *GONE)


def test_state_rehearse_says_the_same(monkeypatch, capsys, local_spec_file):
    assert_refused(groundctl(monkeypatch, capsys, "state", "rehearse", str(local_spec_file)), 2, *GONE)


def test_against_a_running_emulator_status_answers(monkeypatch, capsys, local_spec_file, emulator_endpoint):
    code, out, err = groundctl(monkeypatch, capsys, "status", str(local_spec_file), "--json",
                               env={"GROUNDCTL_ENDPOINT_URL": emulator_endpoint})
    assert code == 0, err
    doc = json.loads(out)
    assert [row["layer"] for row in doc["layers"]] == ["backend", "network", "cluster", "flux"]
    assert doc["note"] == ""  # the bucket exists there: its (empty) ledger is the answer
