"""Names are exact: a pattern anchored with `$` also accepts a trailing newline (Python's `re.match`), so a YAML
block scalar (`name: |`) or a value read from a bucket key could carry one into a stack name, an S3 key or a
workflow's shell variable. Every check of a name, id or reference matches the whole value."""

from __future__ import annotations

import copy

import pytest
import yaml

from bootstrap.kit.errors import SpecError
from bootstrap.spec import parse_spec
from bootstrap.spec.spec_file import environments_dir


def _dev() -> dict:
    return yaml.safe_load((environments_dir() / "dev.yaml").read_text())


def _set(data: dict, dotted: str, value) -> dict:
    data = copy.deepcopy(data)
    *path, last = dotted.split(".")
    node = data
    for key in path:
        node = node[key]
    node[last] = value
    return data


def _problem_fields(data: dict) -> list[str]:
    with pytest.raises(SpecError) as err:
        parse_spec(data, "dev.yaml")
    return [field for field, _ in err.value.problems]


@pytest.mark.parametrize("field", [
    "name", "aws.region", "aws.account_id", "aws.plan_role_arn", "aws.record_role_arn", "aws.apply_role_arn",
    "backend.kms_alias", "backend.bucket", "cluster.kubernetes_version", "flux.version", "flux.repository_url",
    "flux.interval",
])
def test_a_trailing_newline_makes_a_field_invalid(field):
    data = _dev()
    *path, last = field.split(".")
    node = data
    for key in path:
        node = node[key]
    valid = node.get(last) or {"interval": "5m"}[last]
    bad = _set(data, field, str(valid) + "\n")
    assert any(field.split(".")[-1] in f for f in _problem_fields(bad)), field


def test_a_block_scalar_name_fails_spec_check(tmp_path, monkeypatch, capsys):
    import sys

    from groundctl import main

    text = (environments_dir() / "dev.yaml").read_text().replace("name: dev\n", "name: |\n  dev\n", 1)
    assert "name: |" in text
    path = tmp_path / "dev.yaml"
    path.write_text(text)
    monkeypatch.setattr(sys, "argv", ["groundctl", "spec", "check", str(path)])
    with pytest.raises(SystemExit) as done:
        main()
    assert done.value.code == 2, capsys.readouterr()
    assert "not a usable environment name" in capsys.readouterr().err


def test_every_name_pattern_is_whole_value():
    """The other checks of names and ids, one instance each: a trailing newline never passes."""
    from bootstrap.ci import workflows
    from bootstrap.ci.touched import ENV_NAME
    from bootstrap.records.ledger import _RECORD_NAME
    from bootstrap.target import _URL
    from recovery.lineage.tamper import _serial_of

    assert not ENV_NAME.fullmatch("dev\n")
    assert _RECORD_NAME.fullmatch("000000000001.json") and not _RECORD_NAME.fullmatch("000000000001.json\n")
    assert _URL.fullmatch("http://127.0.0.1:4566") and not _URL.fullmatch("http://127.0.0.1:4566\n")
    assert _serial_of(".groundctl/ledger/network/dev/000000000001.json\n") is None
    options = workflows.WorkflowOptions(install=".", python_version="3.11\n", pulumi_version="3.259.0\n",
                                        default_branch="main\n", drift_cron="17 6 * * *",
                                        groundctl_version="0.1.0")
    wrong = " ".join(workflows.problems(options))
    assert "--python-version" in wrong and "--pulumi-version" in wrong and "--default-branch" in wrong
