"""Secret config values reach Pulumi on standard input, never on a command line (`ps` shows argv).

With no value argument, `pulumi config set` reads the value from stdin when stdin is not a terminal,
and `--raw` keeps trailing newlines (pkg/cmd/pulumi/config/config.go, configSetCmd.Run).
"""

from __future__ import annotations

import subprocess

import pytest
import yaml

from bootstrap.spec import load_spec
from tests.boundary_helpers import file_engine, write_program
from tests.conftest import requires_pulumi

DEPLOY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARY-deploy-key-9f3e\n-----END OPENSSH PRIVATE KEY-----\n"
TOKEN = "CANARY-token-51aa"


@pytest.fixture
def argv_seen(monkeypatch):
    """Every command line this process starts, as Popen receives it."""
    seen: list[list[str]] = []
    real = subprocess.Popen.__init__

    def spy(self, args, *a, **kw):
        seen.append([str(x) for x in (args if isinstance(args, (list, tuple)) else [args])])
        return real(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", spy)
    return seen


@pytest.mark.engine
@requires_pulumi
def test_the_deploy_key_and_set_config_secrets_never_appear_in_argv(tmp_path, monkeypatch, argv_seen):
    write_program(tmp_path / "stacks", "flux", '''
        import pulumi
        pulumi.export("has_key", pulumi.Config("flux").require_secret("deployKey").apply(bool))
    ''')
    monkeypatch.setenv("GROUNDCTL_FLUX_DEPLOY_KEY", DEPLOY_KEY)
    monkeypatch.setenv("GROUNDCTL_FLUX_KNOWN_HOSTS", "github.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl")
    local = load_spec("local")
    ssh = local.model_copy(update={"flux": local.flux.model_copy(update={"repository_url": "ssh://git@github.com/acme/fleet.git"})})
    engine = file_engine(tmp_path, monkeypatch, spec=ssh)
    engine.create_stack("flux")
    engine.set_config("flux", "flux:extraToken", TOKEN, secret=True)

    assert argv_seen, "the spy saw no command at all"
    for argv in argv_seen:
        text = " ".join(argv)
        assert "CANARY" not in text, f"a secret was on a command line: {argv[:4]}…"
    settings = yaml.safe_load(engine._run_dir.stack_settings("flux", "local").read_text())
    assert set(settings["config"]["flux:deployKey"]) == {"secure"}
    assert set(settings["config"]["flux:extraToken"]) == {"secure"}
    stack = engine._stack("flux")
    assert stack.get_config("flux:deployKey").value == DEPLOY_KEY  # exactly, trailing newline included
    assert stack.get_config("flux:extraToken").value == TOKEN
