"""Bad input through the real front door (`groundctl.main`): each case ends with a one-paragraph
`error:` on stderr, nothing on stdout (with `--json`, the one record of why: groundctl.failed_start), the documented
exit code, and never a traceback or an internal error. And every reporting command's `--json` stdout is one JSON
document and nothing else."""

from __future__ import annotations

import json
import sys

import pytest

from groundctl import main


def groundctl(monkeypatch, capsys, *args: str, env: dict | None = None):
    monkeypatch.delenv("GROUNDCTL_ENDPOINT_URL", raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["groundctl", *args])
    with pytest.raises(SystemExit) as done:
        main()
    out, err = capsys.readouterr()
    return done.value.code, out, err


def assert_refused(result, code: int, *needles: str) -> None:
    rc, out, err = result
    assert rc == code, err
    assert "Traceback" not in err and "internal error" not in err
    message = err[err.index("error: "):]
    if "--json" in sys.argv:
        # A command asked for JSON that stopped before its report still prints one document: the same reason.
        doc = json.loads(out)
        assert doc["stopped_before_report"] is True and doc["exit_code"] == code and doc["outcome"] in (
            "failed", "refused"), doc
        assert " ".join(doc["message"].split()) in " ".join(message.split()), (doc, message)
    else:
        assert out == ""
    assert "\n\n" not in message.strip()  # one paragraph
    for needle in needles:
        assert needle in " ".join(message.split()), message


@pytest.mark.parametrize("command", [["lock", "status", "dev"], ["lock", "break", "dev"],
                                     ["state", "versions", "dev", "network"], ["state", "verify", "dev", "network"],
                                     ["drill", "history", "dev"], ["status", "dev"]])
def test_an_endpoint_that_is_not_a_url(monkeypatch, capsys, command):
    assert_refused(groundctl(monkeypatch, capsys, *command, "--endpoint-url", "not-a-url"), 2,
                   "'not-a-url', which is not an endpoint URL")


@pytest.mark.parametrize("command", [["lock", "status", "prod"], ["state", "verify", "prod", "network"]])
def test_an_emulator_endpoint_for_production_is_refused(monkeypatch, capsys, command):
    assert_refused(groundctl(monkeypatch, capsys, *command, "--endpoint-url", "http://127.0.0.1:9"), 2,
                   "production environment")


@pytest.mark.parametrize("command", [["lock", "status"], ["lock", "break"], ["state", "versions", "{spec}", "network"],
                                     ["state", "verify", "{spec}", "network"], ["drill", "history"]])
def test_reading_an_embedded_environment_needs_a_running_emulator(monkeypatch, capsys, local_spec_file, command):
    args = [a.replace("{spec}", str(local_spec_file)) for a in command]
    args += [] if "{spec}" in command else [str(local_spec_file)]
    assert_refused(groundctl(monkeypatch, capsys, *args), 2, "groundctl emulator start", "--endpoint-url")


@pytest.mark.parametrize("command", [["lock", "status"], ["state", "verify", "{spec}", "network"],
                                     ["state", "versions", "{spec}", "network"], ["drill", "history"]])
def test_a_missing_state_bucket(monkeypatch, capsys, local_spec_file, emulator_endpoint, command):
    text = local_spec_file.read_text().replace("bucket: t-", "bucket: absent-")
    local_spec_file.write_text(text)
    args = [a.replace("{spec}", str(local_spec_file)) for a in command]
    args += [] if "{spec}" in command else [str(local_spec_file)]
    assert_refused(groundctl(monkeypatch, capsys, *args, "--endpoint-url", emulator_endpoint), 2,
                   "does not exist", "groundctl up")


@pytest.mark.parametrize("command", [["state", "versions", "dev", "netwrk"], ["recover", "dev", "netwrk"],
                                     ["up", "local", "--layers", "netwrk"]])
def test_a_layer_name_typo(monkeypatch, capsys, command):
    assert_refused(groundctl(monkeypatch, capsys, *command), 2, "'netwrk' is not a layer",
                   "backend, network, cluster, flux")


@pytest.mark.parametrize("command", [["drill", "state-loss", "local", "--layer", "network", "--dry-run"],
                                     ["drill", "rebuild-cluster", "local", "--dry-run"],
                                     ["recover", "local", "network", "--dry-run"],
                                     ["plan", "local"], ["plan", "local", "--offline"]])
def test_out_pointing_at_a_file_stops_before_any_work(monkeypatch, capsys, tmp_path, command):
    in_the_way = tmp_path / "report.txt"
    in_the_way.write_text("keep me")
    rc, out, err = groundctl(monkeypatch, capsys, *command, "--out", str(in_the_way))
    assert_refused((rc, out, err), 2, f"--out {in_the_way} is a file, not a directory")
    assert "emulator" not in err  # refused before an emulator was even started
    assert in_the_way.read_text() == "keep me"


def test_a_spec_path_that_is_a_directory(monkeypatch, capsys, tmp_path):
    assert_refused(groundctl(monkeypatch, capsys, "spec", "check", str(tmp_path)), 2, "No environment spec at")


def test_a_spec_that_is_not_yaml(monkeypatch, capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    assert_refused(groundctl(monkeypatch, capsys, "status", str(bad)), 2, "not valid YAML")


def test_a_state_file_that_is_binary_garbage(monkeypatch, capsys, tmp_path):
    junk = tmp_path / "state.json"
    junk.write_bytes(b"\x00\xff\xfe\x89PNG garbage")
    assert_refused(groundctl(monkeypatch, capsys, "state", "inspect", str(junk), "--json"), 2,
                   "is not a readable Pulumi state")
    assert_refused(groundctl(monkeypatch, capsys, "state", "import-plan", str(junk), "--out",
                             str(tmp_path / "plan.json")), 2, "is not a readable Pulumi state")


@pytest.mark.parametrize("port", ["-1", "70000"])
def test_a_port_out_of_range(monkeypatch, capsys, port):
    rc, out, err = groundctl(monkeypatch, capsys, "emulator", "start", "--port", port)
    assert rc == 2 and out == "" and "Invalid value for '--port'" in err and "Traceback" not in err


# -- --json is pure JSON ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["spec", "check", "dev"], ["lock", "status", "{spec}"],
                                     ["state", "versions", "{spec}", "network"], ["state", "verify", "{spec}", "network"],
                                     ["drill", "history", "{spec}"], ["status", "{spec}"]])
def test_json_output_is_one_document(monkeypatch, capsys, local_spec_file, emulator_endpoint, command):
    args = [a.replace("{spec}", str(local_spec_file)) for a in command]
    endpoint = ["--endpoint-url", emulator_endpoint] if "{spec}" in command else []
    rc, out, err = groundctl(monkeypatch, capsys, *args, *endpoint, "--json")
    assert rc in (0, 1), err  # `state verify` of a stack with no state exits 1, with its verdict
    assert isinstance(json.loads(out), dict)


@pytest.mark.parametrize("command", [["status", "prod"], ["plan", "prod"], ["lock", "status", "prod"]])
def test_an_aws_endpoint_variable_never_redirects_production(monkeypatch, capsys, command):
    """boto3 and the AWS provider would follow AWS_ENDPOINT_URL of themselves: a production command refuses
    before any call, naming the variable to unset."""
    result = groundctl(monkeypatch, capsys, *command, env={"AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    assert_refused(result, 2, "AWS_ENDPOINT_URL is set", "unset AWS_ENDPOINT_URL")
