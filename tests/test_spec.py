"""The environment spec: shipped specs validate; human mistakes are caught with a path and a fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bootstrap.kit.errors import SpecError
from bootstrap.spec import bucket_name_problem, load_spec, parse_spec

ENVS = Path(__file__).resolve().parent.parent / "environments"


def raw(name: str) -> dict:
    return yaml.safe_load((ENVS / f"{name}.yaml").read_text())


@pytest.mark.parametrize("name", ["local", "dev", "prod"])
def test_shipped_specs_validate(name):
    spec = load_spec(name)
    assert spec.name == name
    assert spec.flux_path == f"clusters/{name}"


def test_prod_defaults_to_private_endpoint():
    assert load_spec("prod").endpoint_public_access is False
    assert load_spec("dev").endpoint_public_access is True


def problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(data, "environments/x.yaml")
    assert "environments/x.yaml" in str(info.value)
    return info.value.problems


def test_branch_ref_refused_in_production():
    data = raw("prod")
    data["flux"]["ref"] = {"branch": "main"}
    (where, what), = problems(data)
    assert where == "flux.ref"
    assert "branch 'main'" in what and "tag" in what


def test_typo_names_the_key_and_suggests_the_right_one():
    data = raw("dev")
    data["network"]["nat_mod"] = data["network"].pop("nat")
    (where, what), = problems(data)
    assert where == "network.nat_mod"
    assert "did you mean 'nat'" in what


def test_desired_outside_bounds():
    data = raw("dev")
    data["cluster"]["node_groups"][0]["desired_size"] = 9
    (where, what), = problems(data)
    assert where == "cluster.node_groups[0]"
    assert "desired_size 9" in what and "2..4" in what


def test_cidr_too_small_for_az_count():
    data = raw("prod")
    data["network"]["cidr"] = "10.30.0.0/23"
    (where, what), = problems(data)
    assert where == "network"
    assert "too small for 3 availability zone" in what and "/21" in what


def test_service_cidr_overlapping_vpc():
    data = raw("dev")
    data["cluster"]["service_cidr"] = "10.20.128.0/20"
    (where, what), = problems(data)
    assert "overlaps network.cidr" in what


@pytest.mark.parametrize("name", ["ab", "Upper-case", "has_underscore", "-start", "a..b", "192.168.1.1",
                                  "xn--abc", "bucket-s3alias", "x" * 64])
def test_bucket_names_s3_would_refuse(name):
    assert bucket_name_problem(name)


@pytest.mark.parametrize("name", ["abc", "acme-groundctl-dev-state", "a.b.c", "123"])
def test_bucket_names_s3_accepts(name):
    assert bucket_name_problem(name) is None


def test_unquoted_account_id_is_explained():
    data = raw("dev")
    data["aws"]["account_id"] = 111111111111
    (where, what), = problems(data)
    assert where == "aws.account_id" and "quoted" in what


def test_several_problems_reported_together():
    data = raw("dev")
    data["network"]["az_count"] = 9
    data["cluster"]["node_groups"][0]["min_size"] = 5
    assert len(problems(data)) == 2


def test_binary_file_is_a_spec_error_not_a_crash(tmp_path):
    path = tmp_path / "junk.yaml"
    path.write_bytes(b"\xff\xfe\x00garbage\x9c" * 20)
    with pytest.raises(SpecError) as info:
        load_spec(str(path))
    assert "UTF-8" in str(info.value)
