"""Every run configures a layer's stack from the spec alone: its settings file lives in the run's own
folder (bootstrap/engine/rundir.py), so a key dropped from the spec, or set by hand in an earlier run,
cannot reach the next run, and nothing is written beside the program.
"""

from __future__ import annotations

import pytest
import yaml

from bootstrap.spec.stack_config import layer_config
from bootstrap.spec import load_spec
from tests.boundary_helpers import file_engine, write_program
from tests.conftest import requires_pulumi


def test_dropping_the_replica_drops_its_key_and_no_role_is_ever_configured():
    prod = load_spec("prod")
    assert "backend:replicaRegion" in layer_config(prod, "backend")
    assert "groundctl:assumeRoleArn" not in layer_config(prod, "backend")  # the provider assumes no role
    plain = prod.model_copy(update={"backend": prod.backend.model_copy(update={"replica_region": None})})
    assert "backend:replicaRegion" not in layer_config(plain, "backend")


@pytest.mark.engine
@requires_pulumi
def test_a_key_dropped_from_the_spec_or_set_in_an_earlier_run_does_not_reach_the_next_run(tmp_path, monkeypatch):
    program = write_program(tmp_path / "stacks", "backend", '''
        import pulumi
        pulumi.export("replica", pulumi.Config("backend").get("replicaRegion") or "none")
        pulumi.export("profile", pulumi.Config("aws").get("profile") or "none")
    ''')
    local = load_spec("local")
    with_replica = local.model_copy(update={"backend": local.backend.model_copy(update={"replica_region": "eu-central-1"})})
    first = file_engine(tmp_path, monkeypatch, spec=with_replica)
    first.create_stack("backend")
    first.set_config("backend", "aws:profile", "set-by-hand")
    outputs = first.up("backend").outputs.values
    assert outputs == {"replica": "eu-central-1", "profile": "set-by-hand"}

    second = file_engine(tmp_path, monkeypatch, spec=local)
    assert second.stack_exists("backend")
    assert second.up("backend").outputs.values == {"replica": "none", "profile": "none"}
    settings = yaml.safe_load(second._run_dir.stack_settings("backend", "local").read_text())
    assert "backend:replicaRegion" not in settings["config"] and "aws:profile" not in settings["config"]
    assert settings["config"]["backend:bucketName"] == local.backend.bucket
    assert sorted(p.name for p in program.iterdir()) == ["Pulumi.yaml", "__main__.py"]
