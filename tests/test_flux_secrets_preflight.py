"""The flux layer of an `ssh://` repository needs GROUNDCTL_FLUX_DEPLOY_KEY and GROUNDCTL_FLUX_KNOWN_HOSTS. A drill
or a drift check that will reach it refuses at its preflight when either is missing — before the lock, before
any preview, before the cluster is destroyed — naming the variable and where CI and the fleet set it."""

from __future__ import annotations

import pytest

from bootstrap.apply.steps import build_preview
from bootstrap.kit.errors import BadInput
from bootstrap.records.lock_status import lock_status
from bootstrap.spec import load_spec
from recovery.drills.rebuild_cluster import RebuildOptions, run_rebuild
from recovery.drills.state_loss import StateLossOptions, run_state_loss
from tests.test_drills import changes, world  # noqa: F401 - the fixture

SECRETS = {"GROUNDCTL_FLUX_DEPLOY_KEY": "-----BEGIN KEY-----", "GROUNDCTL_FLUX_KNOWN_HOSTS": "git.example ssh-ed25519 A"}


def _ssh(spec):
    return spec.model_copy(update={"flux": spec.flux.model_copy(
        update={"repository_url": "ssh://git@git.example/fleet.git"})})


@pytest.mark.parametrize("unset", list(SECRETS))
def test_a_rebuild_drill_refuses_before_the_lock_and_any_change(world, unset):  # noqa: F811
    ctx = world.make(spec_=_ssh(world.spec))
    ctx.environ = {k: v for k, v in SECRETS.items() if k != unset}
    report = run_rebuild(ctx, RebuildOptions(yes=True))
    pre = report.phase("preflight")
    assert pre.reason == "FluxSecretsMissing" and unset in pre.message
    assert report.exit_code == 3 and changes(world.engine) == []
    assert lock_status(world.store, world.spec.name).holder is None


def test_a_state_loss_drill_of_the_flux_layer_refuses_too(world):  # noqa: F811
    ctx = world.make(spec_=_ssh(world.spec))
    ctx.environ = {}
    report = run_state_loss(ctx, StateLossOptions(layer="flux", yes=True))
    assert report.phase("preflight").reason == "FluxSecretsMissing" and changes(world.engine) == []
    ctx.environ = {}
    network = run_state_loss(ctx, StateLossOptions(layer="network", dry_run=True))
    assert network.phase("preflight").reason != "FluxSecretsMissing"  # only a drill that reaches flux


def test_with_the_secrets_set_the_rebuild_runs(world):  # noqa: F811
    ctx = world.make(spec_=_ssh(world.spec))
    ctx.environ = SECRETS
    assert run_rebuild(ctx, RebuildOptions(yes=True)).phase("preflight").achieved


def test_drift_refuses_before_any_preview(monkeypatch):
    from groundctl.status import require_flux_secrets

    dev = load_spec("dev")
    assert dev.flux.repository_url.startswith("ssh://")
    for name in SECRETS:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(BadInput, match="GROUNDCTL_FLUX_DEPLOY_KEY"):
        require_flux_secrets(dev, build_preview(dev, None, emulated=False, refresh=True))
    require_flux_secrets(dev, build_preview(dev, ["network"], emulated=False, refresh=True))  # no flux: no check
    require_flux_secrets(dev, build_preview(dev, None, emulated=True, refresh=True))  # flux skipped on an emulator
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    require_flux_secrets(dev, build_preview(dev, None, emulated=False, refresh=True))
