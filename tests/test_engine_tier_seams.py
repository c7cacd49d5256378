"""Engine tier: groundctl away from the machine that created the environment (issue 17, items 1-3).

- A second machine: a fresh clone with its own PULUMI_HOME and no stack settings file previews, checks
  drift and updates a KMS-encrypted environment, with and without a passphrase exported, and the state
  keeps its secrets provider; an environment expecting another provider is refused.
- A read-only install: plan, up and drift with the programs' folder on a read-only bind mount (the fleet
  image's readOnlyRootFilesystem), with a settings file an earlier run left beside a program.
- Around the checkout: a uv.lock and a poetry.lock in a folder above the programs.

Each test has its own environment (make_tier) in the session's emulator; the programs are the
tests/engine_programs stand-ins, read through the engine's `stacks_dir` seam.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

import boto3
import pytest

from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, PASSPHRASE, PROGRAMS, SECRET_TOKEN, install_stacks_dir, make_tier

pytestmark = [pytest.mark.engine, requires_pulumi]


@contextlib.contextmanager
def environment_of(tier, monkeypatch):
    """The process environment the tier's engine runs in, the seam installed; undone afterwards."""
    from bootstrap.engine import automation

    with monkeypatch.context() as mp:
        for k, v in tier.env.items():
            mp.setenv(k, v)
        for k in ("GROUNDCTL_ENDPOINT_URL", "ENGINE_TIER_FAULTS", "PULUMI_CONFIG_PASSPHRASE_FILE"):
            mp.delenv(k, raising=False)
        mp.setattr(automation, "PulumiEngine", automation.PulumiEngine)
        install_stacks_dir(tier.stacks)
        yield mp


def _layers(record: dict) -> dict:
    return {lay["layer"]: lay["achieved"] for lay in record["layers"]}


def _providers(tier, layer: str) -> dict:
    return tier.checkpoint(layer)["checkpoint"]["latest"]["secrets_providers"]


def _tree(folder: Path) -> list[tuple]:
    """Every entry under `folder` with what a write would change."""
    return sorted((str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns, p.stat().st_ino)
                  for p in folder.rglob("*"))


# -- 1. a second machine ------------------------------------------------------------------------

@pytest.mark.timeout(900)  # nine engine commands on a loaded machine
def test_a_second_clone_previews_checks_drift_and_updates_a_kms_environment_and_the_provider_stays(
        tmp_path, emulator_endpoint, monkeypatch):
    from bootstrap.engine.workspace import kms_provider

    first = make_tier(tmp_path / "a", emulator_endpoint)
    alias = f"alias/{first.state_bucket}"
    kms = boto3.client("kms", endpoint_url=emulator_endpoint, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    kms.create_alias(AliasName=alias, TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
    provider = kms_provider(alias, "us-east-1")

    with environment_of(first, monkeypatch) as mp:
        mp.delenv("PULUMI_CONFIG_PASSPHRASE")  # machine A: KMS only
        mp.setenv("ENGINE_TIER_SECRETS_PROVIDER", provider)
        assert _layers(first.cli_json("up", "SPEC", "--layers", "network", "--yes")) == {"network": "applied"}
    created = {layer: _providers(first, layer) for layer in ("network",)}
    for layer, providers in created.items():
        assert providers["type"] == "cloud" and providers["state"]["url"] == provider, layer

    # Machine B: its own clone of the programs (no settings file), its own PULUMI_HOME, the same spec.
    clone, home = tmp_path / "b" / "stacks", tmp_path / "b" / "pulumi-home"
    shutil.copytree(PROGRAMS / "network", clone / "network")
    second = first  # the same environment and buckets, seen from machine B
    second_env = {"ENGINE_TIER_STACKS": str(clone), "PULUMI_HOME": str(home),
                  "ENGINE_TIER_SECRETS_PROVIDER": provider}
    spec = first.spec_path.read_text()
    with environment_of(first, monkeypatch) as mp:
        for k, v in second_env.items():
            mp.setenv(k, v)
        for passphrase in (None, "a-passphrase-machine-b-exports"):
            if passphrase:
                mp.setenv("PULUMI_CONFIG_PASSPHRASE", passphrase)
            else:
                mp.delenv("PULUMI_CONFIG_PASSPHRASE")
            if passphrase is None:
                code, out, err = second.cli("plan", "SPEC", "--layers", "network", "--out", str(tmp_path / "plans"))
                assert code == 0, f"plan from the second clone exited {code}: {err}{out}"
            drift = second.cli_json("drift", "SPEC", "--layers", "network")
            assert drift["drift"] is False, drift
            az = 3 if passphrase is None else 4  # a real update each time: the state is written
            second.spec_path.write_text(spec.replace("az_count: 2", f"az_count: {az}"))
            assert _layers(second.cli_json("up", "SPEC", "--layers", "network", "--yes")) == {"network": "applied"}
            assert second.record(second.record_key("network", f"public-{az - 1}")) is not None
            assert _providers(second, "network") == created["network"], "the secrets provider changed"
        assert sorted(str(p.relative_to(clone)) for p in clone.rglob("*")) == [
            "network", "network/Pulumi.yaml", "network/__main__.py"]

        # An environment that expects a passphrase here is refused, naming both; nothing is written.
        mp.delenv("ENGINE_TIER_SECRETS_PROVIDER")
        before = second.checkpoint("network")
        code, out, err = second.cli("plan", "SPEC", "--layers", "network", "--out", str(tmp_path / "plans"))
        assert code == 3, f"exit {code}: {err}{out}"
        assert provider in err + out and "'passphrase'" in err + out
        assert second.checkpoint("network") == before


@pytest.mark.timeout(900)
def test_a_cloud_secret_override_in_the_shell_never_picks_the_states_key(tmp_path, emulator_endpoint, monkeypatch):
    """Issue 27 §3: PULUMI_CLOUD_SECRET_OVERRIDE replaces whatever provider Pulumi is handed and makes a new
    data key under it (pkg/secrets/cloud/manager.go:197-222). Exported in the operator's shell, a new
    environment's states would be encrypted under that key instead of the environment's; groundctl holds it
    empty for every run (bootstrap/engine/workspace.py)."""
    from bootstrap.engine.workspace import kms_provider

    tier = make_tier(tmp_path, emulator_endpoint)
    kms = boto3.client("kms", endpoint_url=emulator_endpoint, region_name="us-east-1",
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    providers = []
    for alias in (f"alias/{tier.state_bucket}", f"alias/{tier.state_bucket}-someone-elses"):
        kms.create_alias(AliasName=alias, TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"])
        providers.append(kms_provider(alias, "us-east-1"))
    own, other = providers
    with environment_of(tier, monkeypatch) as mp:
        mp.delenv("PULUMI_CONFIG_PASSPHRASE")
        mp.setenv("ENGINE_TIER_SECRETS_PROVIDER", own)
        mp.setenv("ENGINE_TIER_ADMIN_TOKEN", SECRET_TOKEN)  # a secret config value: `config set --secret`
        mp.setenv("PULUMI_CLOUD_SECRET_OVERRIDE", other)  # inherited from the operator's shell
        assert _layers(tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")) == {
            "network": "applied", "cluster": "applied"}
        for layer in ("network", "cluster"):
            assert _providers(tier, layer)["state"]["url"] == own, layer
        assert tier.cli_json("drift", "SPEC", "--layers", LAYERS)["drift"] is False


# -- 2. a read-only install ---------------------------------------------------------------------

@contextlib.contextmanager
def read_only(folder: Path):
    """`folder` mounted read-only over itself (root ignores permission bits, not a read-only mount)."""
    done = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make a read-only bind mount here (needs CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {remount.stderr.strip()}")
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


@pytest.mark.timeout(900)
def test_plan_up_and_drift_write_nothing_beside_programs_on_a_read_only_mount_and_ignore_a_stale_file(
        tmp_path, emulator_endpoint, monkeypatch):
    tier = make_tier(tmp_path, emulator_endpoint)
    # What an earlier run under another passphrase (or a fresh emulator) left beside a program.
    (tier.stacks / "network" / "Pulumi.local.yaml").write_text(
        "encryptionsalt: v1:c3RhbGUtc2FsdC0x:v1:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\n"
        "config:\n  network:azCount: \"6\"\n")
    before = _tree(tier.stacks)
    with environment_of(tier, monkeypatch), read_only(tier.stacks):
        with pytest.raises(OSError) as refused:
            (tier.stacks / "network" / "probe").write_text("x")
        assert refused.value.errno == errno.EROFS

        code, out, err = tier.cli("plan", "SPEC", "--layers", LAYERS, "--out", str(tmp_path / "plans"))
        assert code == 0, f"plan exited {code}: {err}{out}"
        record = tier.cli_json("up", "SPEC", "--layers", LAYERS, "--yes")
        assert _layers(record) == {"network": "applied", "cluster": "applied"}, record
        assert len(tier.record(tier.record_key("cluster", "cluster"))["subnets"]) == 2  # not the stale 6
        assert tier.cli_json("drift", "SPEC", "--layers", LAYERS)["drift"] is False
        code, out, err = tier.cli("status", "SPEC", "--json")
        assert code == 0, err
    assert _tree(tier.stacks) == before


# -- 3. around the checkout ---------------------------------------------------------------------

def test_a_uv_or_poetry_lock_file_above_the_programs_does_not_change_how_they_run(
        tmp_path, emulator_endpoint, monkeypatch):
    project = tmp_path / "a-uv-and-poetry-project"
    project.mkdir()
    (project / "uv.lock").write_text("version = 1\n")
    (project / "poetry.lock").write_text("# poetry\n")
    tier = make_tier(project, emulator_endpoint)
    with environment_of(tier, monkeypatch) as mp:
        mp.setenv("PULUMI_SKIP_CHECKPOINTS", "true")  # inherited; held to false for groundctl's runs
        record = tier.cli_json("up", "SPEC", "--layers", "network", "--yes")
        assert _layers(record) == {"network": "applied"}, record
        # Checkpoints were kept: the stack's key has a version per step of the update, not one at its end.
        versions = tier.s3.list_object_versions(Bucket=tier.state_bucket, Prefix=tier.stack_key("network"))
        assert len(versions.get("Versions", [])) >= 5, versions.get("Versions")
        assert tier.record(tier.record_key("network", "vpc")) == {"cidr": "10.10.0.0/16"}
        assert tier.cli_json("drift", "SPEC", "--layers", "network")["drift"] is False
    assert not (tmp_path / "a-uv-and-poetry-project" / ".venv").exists()
    assert PASSPHRASE not in json.dumps(record)
