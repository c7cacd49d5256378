"""Issue 13 item 2: an engine whose errors repeat its environment never leaks a secret, on any path.

The in-memory engine raises, from the layer's first engine call, an error quoting the deploy key and
the passphrase raw, JSON-escaped and line by line (what a `pulumi` printing its environment does).
"""

from __future__ import annotations

import json

import pytest

from bootstrap.kit.errors import EngineError
from tests.test_cli_up import cli  # noqa: F401 - the fixture

DEPLOY_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARY-deploy-key-line-one-5d1e\nCANARY-deploy-key-line-two-8b2a\n-----END OPENSSH PRIVATE KEY-----"
PASSPHRASE = "CANARY-pass-\"quoted\"-3c9f"


def _leaky_error() -> EngineError:
    env = {"GROUNDCTL_FLUX_DEPLOY_KEY": DEPLOY_KEY, "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE}
    return EngineError(f"pulumi failed; its environment: {env!r} / {json.dumps(env)} / "
                       f"{DEPLOY_KEY.splitlines()[1]}")


def _assert_clean(text: str) -> None:
    for needle in (DEPLOY_KEY, json.dumps(DEPLOY_KEY)[1:-1], PASSPHRASE, json.dumps(PASSPHRASE)[1:-1],
                   "CANARY-deploy-key-line-one", "CANARY-deploy-key-line-two", "CANARY-pass-"):
        assert needle not in text


@pytest.mark.parametrize("command,op", [(("plan", "SPEC"), "preview"), (("drift", "SPEC"), "preview"),
                                        (("up", "SPEC", "--yes"), "preview"),
                                        (("destroy", "SPEC", "--yes", "--layers", "network"), "destroy")])
@pytest.mark.parametrize("json_out", [False, True])
def test_engine_errors_are_scrubbed_on_every_command(cli, monkeypatch, tmp_path, command, op, json_out):  # noqa: F811
    monkeypatch.setenv("GROUNDCTL_FLUX_DEPLOY_KEY", DEPLOY_KEY)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
    monkeypatch.chdir(tmp_path)
    if op == "destroy":
        assert cli("up", "SPEC", "--yes")[0] == 0
    elif command[0] in ("plan", "drift"):
        # Previews run only on a deployed environment: its state bucket and stacks exist (a plan creates none).
        cli.store.client.create_bucket(Bucket=cli.store.bucket)
        cli.engine.stacks.update({"backend", "network"})
    cli.engine.fail[(op, "network")] = _leaky_error()
    code, out, err = cli(*command, *(["--json"] if json_out else []))
    assert code == 4, err
    assert "[secret]" in err or "[secret]" in out or "[redacted]" in err + out
    _assert_clean(out + err)
    for path in tmp_path.rglob("*"):
        if path.is_file():
            _assert_clean(path.read_text(errors="replace"))
    stored = [key for key, _, _ in cli.store.keys(".groundctl/")]
    for key in stored:
        _assert_clean(cli.store.get(key).body.decode(errors="replace"))
