"""Automation API failures → groundctl errors: next steps, one paragraph, no secrets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pulumi.automation import PulumiCommand
from pulumi.automation import errors as auto_errors
from pulumi.automation._cmd import CommandResult

import bootstrap.engine.preflight as preflight
from bootstrap.engine.automation import PulumiEngine
from bootstrap.engine.errors import (
    StackLocked, UnexpectedChanges, Where, lock_holders, map_error, scrub, trim,
)
from bootstrap.engine.preflight import pulumi_available, require_pulumi
from bootstrap.kit.errors import EngineError
from bootstrap.planning.plan import Plan, ResourceChange
from bootstrap.spec import load_spec

CANARY = "canary-Zq8v1T0pS3cr3t"
WHERE = Where("dev", "network", "up")

DIY_LOCKED = (
    "error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or "
    "delete the lock file with `pulumi cancel`.\n  s3://acme-groundctl-dev-state/.pulumi/locks/organization/"
    "network/dev/6f1c.json: created by alice@build-7 (pid 4242) at 2026-12-02T09:58:01Z"
)


def command_error(stderr: str, stdout: str = "", code: int = 255) -> auto_errors.CommandError:
    """The error the SDK itself would raise for this CLI result (its own classification)."""
    return auto_errors.create_command_error(CommandResult(stdout=stdout, stderr=stderr, code=code))


def assert_one_paragraph(message: str) -> None:
    assert "\n" not in message and len(message) < 1200


def test_missing_cli_as_the_sdk_reports_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no `pulumi` anywhere
    with pytest.raises(FileNotFoundError) as raised:
        PulumiCommand()  # what LocalWorkspace does when no command is given
    err = map_error(raised.value, WHERE)
    assert isinstance(err, EngineError)
    assert "not installed or not on PATH" in err.message
    assert "https://www.pulumi.com/docs/install/" in err.message and "never downloads" in err.message
    assert_one_paragraph(err.message)


def test_the_engine_fails_early_and_never_installs(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    installs = []
    monkeypatch.setattr(PulumiCommand, "install", classmethod(lambda cls, *a, **k: installs.append(a)))
    assert not pulumi_available()
    with pytest.raises(EngineError, match="not installed or not on PATH"):
        require_pulumi()
    with pytest.raises(EngineError, match="never downloads"):
        PulumiEngine(load_spec("dev"))
    assert installs == []


def test_a_held_stack_lock_names_the_holder_and_the_next_step():
    exc = command_error(DIY_LOCKED)
    assert isinstance(exc, auto_errors.ConcurrentUpdateError)
    err = map_error(exc, WHERE)
    assert isinstance(err, StackLocked) and isinstance(err, EngineError)
    assert err.holders == ["alice@build-7 (pid 4242, since 2026-12-02T09:58:01Z)"]
    assert "alice@build-7" in err.message and "`groundctl lock status dev`" in err.message
    assert_one_paragraph(err.message)


def test_a_lock_message_without_holders_still_gives_the_next_step():
    err = map_error(command_error("[409] Conflict: Another update is currently in progress."), WHERE)
    assert isinstance(err, StackLocked) and err.holders == []
    assert "groundctl lock status dev" in err.message


def test_lock_holders_reads_every_lock_line():
    text = DIY_LOCKED + "\n  s3://b/x.json: created by bob@ci (pid 7) at 2026-12-02T10:00:00Z"
    assert [h.split(" ")[0] for h in lock_holders(text)] == ["alice@build-7", "bob@ci"]


def test_a_missing_stack_says_how_to_create_it():
    exc = command_error("error: no stack named 'dev' found")
    assert isinstance(exc, auto_errors.StackNotFoundError)
    err = map_error(exc, Where("dev", "cluster", "preview"))
    assert "organization/cluster/dev" in err.message and "groundctl up dev --layers cluster" in err.message


def test_secret_values_are_scrubbed_from_cli_output():
    stderr = "\n".join([
        "Updating (dev):",
        f"error: aws:eks:Cluster main: creating: invalid token {CANARY}",
        f'error: {{"deployKey": "{CANARY}\\n"}} rejected',
    ])
    err = map_error(command_error(stderr), WHERE, secrets=[CANARY, ""])
    assert CANARY not in err.message and "[secret]" in err.message
    assert "Pulumi up of layer 'network' in environment 'dev' failed" in err.message
    assert_one_paragraph(err.message)


def test_scrub_handles_overlapping_and_escaped_secrets():
    assert scrub("a-LONGSECRET-b", ["SECRET", "LONGSECRET"]) == "a-[secret]-b"
    assert scrub('x "pa\\nsswd" y', ["pa\nsswd"]) == 'x "[secret]" y'
    assert scrub("nothing here", []) == "nothing here"


def test_long_output_is_trimmed_to_the_last_relevant_lines():
    stderr = "\n".join([f"  + aws:ec2/subnet:Subnet s{i} creating" for i in range(300)]
                       + ["error: update failed", "error: 1 resource failed: AccessDenied"])
    text = trim(stderr)
    assert text.endswith("error: 1 resource failed: AccessDenied") and len(text) <= 601
    assert "s12 creating" not in text


def test_program_errors_point_at_the_program():
    exc = command_error("", stdout="error: an unhandled error occurred: Program exited with non-zero exit code: 1")
    assert isinstance(exc, auto_errors.RuntimeError)
    err = map_error(exc, WHERE)
    assert "stacks/network/" in err.message and "unhandled error" in err.message


def test_an_old_cli_is_reported_with_the_install_link():
    err = map_error(auto_errors.InvalidVersionError("Minimum version requirement failed."), WHERE)
    assert "Minimum version" in err.message and "pulumi.com/docs/install" in err.message


def test_unexpected_changes_carry_the_plan():
    plan = Plan("network", "dev", (ResourceChange("urn:pulumi:dev::network::t::x", "t", "update", ("tags",)),))
    err = UnexpectedChanges(plan)
    assert err.plan is plan and "1 update" in err.message and isinstance(err, EngineError)


# -- the engine shell, with a stand-in stack (no binary) -----------------------------------------------------


class BrokenStack:
    name = "dev"


@pytest.fixture
def engine(monkeypatch, tmp_path):
    monkeypatch.setattr(preflight, "pulumi_available", lambda: True)
    monkeypatch.setattr(PulumiEngine, "_pulumi_command", lambda self: None)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", CANARY + "-pass")
    spec = load_spec("local")
    eng = PulumiEngine(spec, endpoint_url="http://127.0.0.1:1")
    eng._stacks["flux"] = BrokenStack()
    # A run folder that is gone: the plain config's settings file cannot be written.
    eng._stacks["flux"].workspace = SimpleNamespace(env_vars={}, pulumi_home=None, work_dir=str(tmp_path / "gone"))
    eng._command = type("Cmd", (), {"command": "pulumi"})()

    def broken_cli(argv, *, input=None, **kwargs):  # a secret (on stdin) echoed back by a failing CLI
        import subprocess
        return subprocess.CompletedProcess(argv, 255, "", f"error: could not set {argv[-1]}: value {input} rejected")
    monkeypatch.setattr("subprocess.run", broken_cli)
    return eng


def test_a_secret_set_through_the_engine_never_reaches_its_error(engine):
    with pytest.raises(EngineError) as raised:
        engine.set_config("flux", "flux:deployKey", CANARY, secret=True)
    assert CANARY not in raised.value.message and "[secret]" in raised.value.message


def test_the_passphrase_is_scrubbed_too(engine):
    # A plain value is written to this run's settings file, not given to the CLI; its failure names no value.
    with pytest.raises(EngineError) as raised:
        engine.set_config("flux", "flux:other", CANARY + "-pass")
    assert CANARY not in raised.value.message


def test_a_failed_update_is_explained_from_stdout_when_stderr_holds_only_warnings():
    # As the real CLI fails an update: the diagnostics on stdout, the AWS SDK's notices on stderr.
    exc = command_error(
        "WARNING: Response has no supported checksum. Not validating response payload.\n" * 3,
        stdout="Updating (local):\n  + pulumi-python:dynamic:Resource public-2 creating\n"
               "  pulumi-python:dynamic:Resource public-2 **creating failed** error: injected failure creating "
               "record public-2\nResources:\n    + 3 created\n", code=255)
    err = map_error(exc, WHERE)
    assert "injected failure creating record public-2" in err.message
    assert "checksum" not in err.message
