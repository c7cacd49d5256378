"""Config keys groundctl owns are removed when the spec stops producing them.

`pulumi config set-all` only sets (pkg/cmd/pulumi/config/config.go); `config rm-all` removes. The keys a
stack holds are read from its settings file (LocalWorkspace.stack_settings), so no secret is decrypted.
"""

from __future__ import annotations

import yaml
import pytest

from bootstrap.engine.stack_config import layer_config, owned_key, stale_keys
from bootstrap.spec import load_spec
from tests.boundary_helpers import file_engine, write_program
from tests.conftest import requires_pulumi


def test_only_groundctls_own_keys_are_ever_removed():
    assert owned_key("backend", "backend:replicaRegion") and owned_key("network", "groundctl:assumeRoleArn")
    assert owned_key("flux", "flux:deployKey") and owned_key("cluster", "aws:region")
    assert not owned_key("network", "aws:profile") and not owned_key("network", "backend:bucketName")
    existing = ["aws:region", "aws:profile", "groundctl:assumeRoleArn", "flux:deployKey", "flux:ref", "other:x"]
    assert stale_keys("flux", existing, {"flux:ref": "v1"}) == ["aws:region", "flux:deployKey",
                                                                "groundctl:assumeRoleArn"]


def test_dropping_the_replica_and_a_role_left_by_an_older_groundctl_makes_their_keys_stale():
    prod = load_spec("prod")
    before = [*layer_config(prod, "backend"), "groundctl:assumeRoleArn"]  # set by groundctl before 0.2
    assert "backend:replicaRegion" in before
    plain = prod.model_copy(update={"backend": prod.backend.model_copy(update={"replica_region": None})})
    assert stale_keys("backend", before, layer_config(plain, "backend")) == [
        "backend:replicaRegion", "groundctl:assumeRoleArn"]


@pytest.mark.engine
@requires_pulumi
def test_a_key_dropped_from_the_spec_leaves_the_stack_and_the_program_stops_acting_on_it(tmp_path, monkeypatch):
    write_program(tmp_path / "stacks", "backend", '''
        import pulumi
        pulumi.export("replica", pulumi.Config("backend").get("replicaRegion") or "none")
    ''')
    local = load_spec("local")
    with_replica = local.model_copy(update={"backend": local.backend.model_copy(update={"replica_region": "eu-central-1"})})
    first = file_engine(tmp_path, monkeypatch, spec=with_replica)
    first.create_stack("backend")
    first.set_config("backend", "aws:profile", "operators-own")  # not groundctl's: must survive
    assert first.up("backend").outputs.values["replica"] == "eu-central-1"

    second = file_engine(tmp_path, monkeypatch, spec=local)
    assert second.stack_exists("backend")
    assert second.up("backend").outputs.values["replica"] == "none"
    settings = yaml.safe_load((tmp_path / "stacks" / "backend" / "Pulumi.local.yaml").read_text())
    assert "backend:replicaRegion" not in settings["config"]
    assert settings["config"]["aws:profile"] == "operators-own"
    assert settings["config"]["backend:bucketName"] == local.backend.bucket
