"""The pure parts of running anywhere (issue 17, items 1-3): the run's own project folder, the state's
secrets provider, the passphrase file and the PULUMI_* variables groundctl holds to its own values.
The same seams with the real CLI are in tests/test_engine_tier_seams.py."""

from __future__ import annotations

import os
import re
import stat

import pytest
import yaml

from bootstrap.engine.passphrase import passphrase_from
from bootstrap.engine.rundir import RunDir, run_project
from bootstrap.engine.secrets_provider import check_state_provider, same_provider, state_provider
from bootstrap.engine.workspace import ENFORCED_ENV, kms_provider, workspace_settings
from bootstrap.kit.errors import BadInput, Refused
from bootstrap.spec import load_spec
from tests import docs

CANARY = "canary-passphrase-file-7Qe2"
KMS = "awskms://alias/groundctl-dev-state?region=eu-west-1"


# -- the run's project folder --------------------------------------------------------------------

def test_the_run_project_runs_the_programs_own_folder_with_the_pip_toolchain(tmp_path):
    project = {"name": "network", "runtime": {"name": "python", "options": {"virtualenv": "venv",
                                                                             "toolchain": "uv"}},
               "description": "d", "config": {"cidr": {"type": "string"}}}
    out = run_project(project, tmp_path / "network")
    assert out["main"] == str((tmp_path / "network").resolve()) and os.path.isabs(out["main"])
    assert out["runtime"] == {"name": "python", "options": {"toolchain": "pip"}}
    assert out["config"] == project["config"] and out["name"] == "network"
    assert run_project({"name": "n", "runtime": "python", "main": "src"}, tmp_path)["main"] == str(tmp_path / "src")
    with pytest.raises(BadInput, match="runtime 'nodejs'"):
        run_project({"name": "n", "runtime": "nodejs"}, tmp_path)


def test_a_run_folder_is_private_never_the_programs_and_ignores_what_an_earlier_run_left(tmp_path):
    program = tmp_path / "stacks" / "backend"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text("name: backend\nruntime: python\n")
    # As an earlier groundctl left it beside the program: another run's passphrase salt.
    (program / "Pulumi.local.yaml").write_text("encryptionsalt: v1:stale:salt\n")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in program.iterdir())

    run = RunDir()
    folder = run.layer_dir("backend", program)
    assert folder != program and program not in folder.parents
    assert stat.S_IMODE(folder.parent.stat().st_mode) == 0o700
    assert yaml.safe_load((folder / "Pulumi.yaml").read_text())["main"] == str(program.resolve())
    assert not (folder / "Pulumi.local.yaml").exists() and run.stack_settings("backend", "local") is None
    assert run.layer_dir("backend", program) == folder  # one per layer and run
    assert sorted((p.name, p.stat().st_mtime_ns) for p in program.iterdir()) == before

    second = RunDir().layer_dir("backend", program)
    assert second.parent != folder.parent
    run.close()
    assert not folder.parent.exists()


def test_an_unreadable_project_file_is_bad_input(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text("- not\n- a mapping\n")
    with pytest.raises(BadInput, match="not a YAML mapping"):
        RunDir().layer_dir("network", tmp_path)


# -- the state's secrets provider ----------------------------------------------------------------

def test_the_state_provider_is_read_from_the_deployment():
    assert state_provider({"secrets_providers": {"type": "passphrase", "state": {"salt": "v1:x"}}}) == "passphrase"
    assert state_provider({"secrets_providers": {"type": "cloud", "state": {"url": KMS, "encryptedkey": "k"}}}) == KMS
    assert state_provider({}) is None and state_provider({"secrets_providers": "junk"}) is None


def test_the_same_key_at_another_endpoint_is_the_same_provider():
    assert same_provider(KMS, "awskms://alias/groundctl-dev-state?endpoint=http%3A%2F%2F127.0.0.1%3A1&region=eu-west-1")
    assert not same_provider(KMS, "awskms://alias/groundctl-dev-state?region=us-east-1")
    assert not same_provider(KMS, "awskms://alias/other?region=eu-west-1")
    assert not same_provider(KMS, "passphrase") and same_provider("passphrase", "passphrase")


def test_a_state_with_another_provider_is_refused_naming_both():
    check_state_provider(None, "passphrase", environment="dev", layer="network")  # a new stack
    check_state_provider(KMS, KMS, environment="dev", layer="network")
    with pytest.raises(Refused) as info:
        check_state_provider(KMS, "passphrase", environment="dev", layer="network")
    assert KMS in info.value.message and "'passphrase'" in info.value.message
    assert "change-secrets-provider" in info.value.message


# -- the environment -----------------------------------------------------------------------------

def test_a_passphrase_file_is_accepted_trimmed_as_pulumi_reads_it_and_handed_over_by_absolute_path(
        tmp_path, monkeypatch):
    (tmp_path / "pass").write_text(f"  {CANARY}\n")
    monkeypatch.chdir(tmp_path)
    value, env = passphrase_from({"PULUMI_CONFIG_PASSPHRASE_FILE": "pass"})
    assert value == CANARY and env == {"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "pass")}
    # The variable wins, as in Pulumi (pkg/secrets/passphrase/manager.go readPassphrase).
    assert passphrase_from({"PULUMI_CONFIG_PASSPHRASE": "p", "PULUMI_CONFIG_PASSPHRASE_FILE": "pass"}) == (
        "p", {"PULUMI_CONFIG_PASSPHRASE": "p"})
    assert passphrase_from({}) == (None, {})
    with pytest.raises(BadInput, match="set but empty"):  # Pulumi would take the empty variable
        passphrase_from({"PULUMI_CONFIG_PASSPHRASE": "", "PULUMI_CONFIG_PASSPHRASE_FILE": "pass"})

    s = workspace_settings(load_spec("local"), endpoint_url="http://127.0.0.1:1",
                           environ={"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "pass")})
    assert s.secrets_provider == "passphrase" and CANARY in s.secret_values
    assert CANARY not in repr(s) and CANARY not in str(s.env)


@pytest.mark.parametrize("content, match", [("\n  \n", "empty"), (None, "cannot be read"),
                                            ("x" * (64 * 1024 + 1), "cannot be read")])
def test_a_passphrase_file_that_is_missing_empty_or_huge_is_bad_input(tmp_path, content, match):
    path = tmp_path / "pass"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BadInput, match=match) as info:
        passphrase_from({"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)})
    assert "PULUMI_CONFIG_PASSPHRASE_FILE" in info.value.message


def test_inherited_pulumi_variables_that_break_groundctls_guarantees_are_held_to_its_values():
    inherited = {"PULUMI_CONFIG_PASSPHRASE": "p", "PULUMI_SKIP_CHECKPOINTS": "true",
                 "PULUMI_DIY_BACKEND_LEGACY_LAYOUT": "1", "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "false",
                 "PULUMI_CLOUD_SECRET_OVERRIDE": "awskms://alias/someone-elses-key?region=eu-west-1",
                 "PULUMI_RUN_PROGRAM": "true", "PULUMI_ENABLE_LEGACY_REFRESH_DIFF": "1"}
    for endpoint in ("http://127.0.0.1:1", None):
        spec = load_spec("local" if endpoint else "dev")
        env = workspace_settings(spec, endpoint_url=endpoint, environ=inherited).env
        assert env["PULUMI_SKIP_CHECKPOINTS"] == "false"
        assert env["PULUMI_DIY_BACKEND_LEGACY_LAYOUT"] == "false"
        assert env["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] == "true"
        # Pulumi takes any non-empty value as the provider (pkg/secrets/cloud/manager.go:201): empty is off,
        # and it is set, so the operator's value never reaches the CLI (the Automation API lays env over it).
        assert env["PULUMI_CLOUD_SECRET_OVERRIDE"] == ""
        assert env["PULUMI_RUN_PROGRAM"] == "false" and env["PULUMI_ENABLE_LEGACY_REFRESH_DIFF"] == "false"
        assert {k: env[k] for k in ENFORCED_ENV} == ENFORCED_ENV


def _readme_enforced_table() -> dict[str, str]:
    """docs/enforced-environment.md's table of the variables every Pulumi run is held to: variable -> value."""
    rows = {}
    for line in docs.table_after(docs.text("enforced-environment.md"), "| variable | value | why |"):
        name, value = (re.fullmatch(r"`([^`]*)`.*", cell.strip()).group(1) for cell in line.split("|")[1:3])
        rows[name] = "" if value == '""' else value
    return rows


def test_the_readme_lists_every_enforced_variable_with_its_value():
    assert _readme_enforced_table() == ENFORCED_ENV


def test_kms_at_the_emulator_goes_through_the_kms_endpoint_variable_not_the_url():
    local = load_spec("local")
    provider = kms_provider(local.backend.kms_alias, "us-east-1")
    s = workspace_settings(local, endpoint_url="http://127.0.0.1:45123", environ={}, secrets_provider=provider)
    assert s.secrets_provider == "awskms://alias/groundctl-local-state?region=us-east-1"
    assert s.env["AWS_ENDPOINT_URL_KMS"] == "http://127.0.0.1:45123" and s.env["AWS_ACCESS_KEY_ID"] == "testing"
    assert "PULUMI_CONFIG_PASSPHRASE" not in s.env and s.secret_values == ()
    assert "AWS_ENDPOINT_URL_KMS" not in workspace_settings(load_spec("dev"), environ={}).env



def test_the_passphrase_from_a_file_is_among_the_values_every_record_and_message_is_scrubbed_of(tmp_path):
    from bootstrap.target import Target

    (tmp_path / "pass").write_text(CANARY + "\n")
    target = Target(load_spec("local"), None, None, None, None, None,
                    environ={"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "pass")})
    assert CANARY in target.secret_values()
    assert Target(load_spec("local"), None, None, None, None, None,
                  environ={"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "none")}).secret_values() == []
