"""`groundctl init` starts an adopter's repository: a first spec from a bundled example with the name, region and
account given (flags; asked for only on a terminal), the requirements input naming groundctl's wheel, the places of
the committed wheel and of the fleet's Flux manifests, and the workflows once the compiled requirements are there
(the same files `ci init` writes). It never replaces a file: one with other content stops it, exit 2 naming the
file, with nothing written."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from bootstrap.ci.workflows import WORKFLOWS
from bootstrap.spec import load_spec
from tests.ci_workflow import pin_groundctl
from tests.test_cli_errors import assert_refused, groundctl
from tests.journey import files_under

FACTS = ("--name", "staging", "--region", "eu-central-1", "--account", "123456789012")


def _init(monkeypatch, capsys, repo: Path, *args: str):
    return groundctl(monkeypatch, capsys, "init", "--dir", str(repo), *args)


def test_an_empty_repository_gets_a_first_spec_and_the_places_of_the_rest(monkeypatch, capsys, tmp_path):
    code, out, err = _init(monkeypatch, capsys, tmp_path, *FACTS, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["files"] == {"environments/staging.yaml": "written", "vendor/README.md": "written",
                            "manifests/README.md": "written", "groundctl-requirements.in": "written"}
    assert doc["workflows"] is False  # no compiled requirements yet: `ci init` is a next step
    steps = " ".join(doc["next_steps"])
    for needed in ("pip-compile --generate-hashes", "groundctl ci init", "groundctl pins update",
                   "groundctl spec roles staging", "groundctl spec check staging"):
        assert needed in steps
    spec = load_spec("staging", base=tmp_path / "environments")
    assert (spec.name, spec.aws.region, spec.aws.account_id) == ("staging", "eu-central-1", "123456789012")
    assert spec.backend.bucket == "groundctl-staging-state-123456789012"
    assert spec.aws.plan_role_arn == "arn:aws:iam::123456789012:role/groundctl-plan"  # no example account left
    text = (tmp_path / "environments" / "staging.yaml").read_text()
    assert "111111111111" not in text and "from groundctl's example spec 'dev'" in text
    assert "# Branch refs are allowed" not in text and "ref: {branch: main}" in text
    from groundctl.cli import installed_version

    wheel = f"./vendor/groundctl-{installed_version()}-py3-none-any.whl"
    assert wheel in (tmp_path / "groundctl-requirements.in").read_text().splitlines()


def test_it_never_replaces_a_file(monkeypatch, capsys, tmp_path):
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "staging.yaml").write_text("name: staging\n# mine\n")
    before = {p: (tmp_path / p).read_bytes() for p in files_under(tmp_path)}
    assert_refused(_init(monkeypatch, capsys, tmp_path, *FACTS), 2, "environments/staging.yaml",
                   "never replaces a file", "nothing was written")
    assert {p: (tmp_path / p).read_bytes() for p in files_under(tmp_path)} == before
    # The same for a place's note, or a workflow, that differs; an identical one is left as it is.
    (tmp_path / "environments" / "staging.yaml").unlink()
    assert _init(monkeypatch, capsys, tmp_path, *FACTS)[0] == 0
    code, out, err = _init(monkeypatch, capsys, tmp_path, *FACTS, "--json")
    assert code == 0 and set(json.loads(out)["files"].values()) == {"unchanged", "kept (yours)"}
    (tmp_path / "manifests" / "README.md").write_text("our own notes\n")
    assert_refused(_init(monkeypatch, capsys, tmp_path, *FACTS), 2, "manifests/README.md")
    assert (tmp_path / "manifests" / "README.md").read_text() == "our own notes\n"


def test_an_existing_requirements_input_is_the_adopters_own(monkeypatch, capsys, tmp_path):
    (tmp_path / "groundctl-requirements.in").write_text("groundctl==0.1.0\n")
    code, out, err = _init(monkeypatch, capsys, tmp_path, *FACTS, "--json")
    assert code == 0, err
    assert json.loads(out)["files"]["groundctl-requirements.in"] == "kept (yours)"
    assert (tmp_path / "groundctl-requirements.in").read_text() == "groundctl==0.1.0\n"


def test_with_the_compiled_requirements_it_writes_the_workflows_ci_init_writes(monkeypatch, capsys, tmp_path,
                                                                               release_mirror):
    pin_groundctl(tmp_path)
    code, out, err = _init(monkeypatch, capsys, tmp_path, *FACTS, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["workflows"] is True and "groundctl ci init" not in " ".join(doc["next_steps"])
    assert {f".github/workflows/{w}" for w in WORKFLOWS} <= {k for k, v in doc["files"].items() if v == "written"}
    release_mirror.lock(tmp_path)  # `groundctl pins update`, the step init names; `ci init` checks the lock
    code, out, err = groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(tmp_path), "--json")
    assert code == 0, err
    assert set(json.loads(out)["files"].values()) == {"unchanged"}  # the very files `ci init` writes


def test_a_link_on_the_way_is_refused(monkeypatch, capsys, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "environments").symlink_to(elsewhere)
    assert_refused(_init(monkeypatch, capsys, repo, *FACTS), 2, "is a symbolic link", "Nothing was written")
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in repo.iterdir()) == ["environments"]


@pytest.mark.parametrize("args,needles", [
    (("--name", "Staging_1", "--region", "eu-west-1", "--account", "123456789012"), ["--name"]),
    (("--name", "staging", "--region", "europe", "--account", "123456789012"), ["--region"]),
    (("--name", "staging", "--region", "eu-west-1", "--account", "1234"), ["--account"]),
    (("--name", "s" * 40, "--region", "eu-west-1", "--account", "123456789012", "--example", "prod"), ["--name"]),
    (("--name", "staging", "--region", "eu-west-1", "--account", "123456789012", "--example", "../x"),
     ["--example", "dev, local, prod"]),
])
def test_values_that_make_no_valid_spec_are_refused_naming_the_flag(monkeypatch, capsys, tmp_path, args, needles):
    assert_refused(_init(monkeypatch, capsys, tmp_path, *args), 2, *needles)
    assert list(tmp_path.iterdir()) == []


def test_it_asks_only_on_a_terminal(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert_refused(_init(monkeypatch, capsys, tmp_path, "--name", "qa"), 2, "needs --region, --account",
                   "only on a terminal")
    assert list(tmp_path.iterdir()) == []

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Terminal("eu-west-1\n210987654321\n"))
    code, out, err = _init(monkeypatch, capsys, tmp_path, "--name", "qa", "--json")
    assert code == 0, err
    assert "AWS region" in err and "AWS account ID" in err and "Environment name" not in err
    json.loads(out)  # the prompts went to stderr: stdout is one document
    spec = yaml.safe_load((tmp_path / "environments" / "qa.yaml").read_text())
    assert (spec["aws"]["region"], spec["aws"]["account_id"]) == ("eu-west-1", "210987654321")


def test_every_example_starts_a_valid_spec(monkeypatch, capsys, tmp_path):
    for example in ("dev", "prod", "local"):
        repo = tmp_path / example
        code, _, err = _init(monkeypatch, capsys, repo, "--name", f"x-{example}", "--region", "us-west-2",
                             "--account", "123456789012", "--example", example)
        assert code == 0, err
        spec = load_spec(f"x-{example}", base=repo / "environments")
        assert spec.aws.region == "us-west-2" and spec.production == (example == "prod")
    assert os.listdir(tmp_path / "prod" / "environments") == ["x-prod.yaml"]
