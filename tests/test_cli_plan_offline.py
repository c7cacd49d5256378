"""`groundctl plan <env> --offline` as an operator runs it: a subprocess, exit codes, streams, files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from bootstrap.kit.errors import BadInput
from bootstrap.spec.spec_file import ENVIRONMENTS_DIR
from bootstrap.spec.stack_config import DEPLOY_KEY_ENV, KNOWN_HOSTS_ENV

REPO = Path(__file__).resolve().parent.parent
CANARY = "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARY-3c1f9e-plan-offline\n-----END OPENSSH PRIVATE KEY-----"


def groundctl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, DEPLOY_KEY_ENV: CANARY, KNOWN_HOSTS_ENV: "github.com ssh-ed25519 AAAAcanaryhosts",
           "COLUMNS": "200"}
    env.pop("GROUNDCTL_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "groundctl", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=240)


def spec_copy(tmp_path: Path, name: str, edit) -> Path:
    data = yaml.safe_load((ENVIRONMENTS_DIR / f"{name}.yaml").read_text())
    edit(data)
    path = tmp_path / f"{name}-edited.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def assert_no_canary(result: subprocess.CompletedProcess, out: Path) -> None:
    texts = [result.stdout, result.stderr, *(p.read_text() for p in out.glob("*"))]
    assert len(texts) == 4 and not any("CANARY-3c1f9e" in t for t in texts)


def test_dev_json(tmp_path):
    out = tmp_path / "plans"
    result = groundctl("plan", "dev", "--offline", "--out", str(out), "--json", cwd=REPO)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)  # stdout is the JSON and nothing else
    assert doc["environment"] == "dev" and doc["passed"] is True and doc["failed_rules"] == []
    assert doc["layer_order"] == ["backend", "network", "cluster", "flux"]
    assert all(r["status"] in ("pass", "not-applicable") for r in doc["rules"])
    assert sorted(p.name for p in out.iterdir()) == ["plan-dev.json", "plan-dev.md"]
    assert json.loads((out / "plan-dev.json").read_text()) == doc
    assert "PASS" in result.stderr and "Traceback" not in result.stderr
    assert_no_canary(result, out)


def test_prod_tables_default_out_directory(tmp_path):
    result = groundctl("plan", "prod", "--offline", cwd=tmp_path)  # environments/ falls back to the shipped ones
    assert result.returncode == 0, result.stderr
    out = tmp_path / ".groundctl" / "plans"
    assert sorted(p.name for p in out.iterdir()) == ["plan-prod.json", "plan-prod.md"]
    for heading in ("backend:", "network:", "cluster:", "flux:", "posture rules"):
        assert heading in result.stdout
    assert "cluster-endpoint-private-in-production" in result.stdout
    assert (out / "plan-prod.md").read_text().startswith("# Offline plan: prod")
    assert_no_canary(result, out)


def test_public_endpoint_in_production_exits_1_naming_the_rule(tmp_path):
    path = spec_copy(tmp_path, "prod", lambda d: d["cluster"].update(endpoint_public_access=True))
    out = tmp_path / "plans"
    result = groundctl("plan", str(path), "--offline", "--out", str(out), cwd=REPO)
    assert result.returncode == 1, result.stderr
    assert "cluster-endpoint-private-in-production" in result.stderr
    assert "Traceback" not in result.stderr
    doc = json.loads((out / "plan-prod.json").read_text())
    assert doc["failed_rules"] == ["cluster-endpoint-private-in-production"]
    assert_no_canary(result, out)


@pytest.mark.parametrize("edit,expect", [
    (lambda d: d["flux"].update(ref={"branch": "main"}), "flux.ref"),
    (lambda d: d["network"].update(nat_mode="single"), "nat_mode"),
], ids=["branch-ref-in-production", "typo-key"])
def test_bad_spec_exits_2_with_one_paragraph(tmp_path, edit, expect):
    path = spec_copy(tmp_path, "prod", edit)
    out = tmp_path / "plans"
    result = groundctl("plan", str(path), "--offline", "--out", str(out), cwd=REPO)
    assert result.returncode == 2
    assert expect in result.stderr and "Traceback" not in result.stderr
    assert result.stderr.strip().startswith("error:") and "\n\n" not in result.stderr.strip()
    assert result.stdout == "" and not out.exists()


def test_live_plan_dispatches_to_the_orchestrator(monkeypatch, tmp_path):
    from groundctl import plan as plan_cmd

    calls = []
    fake = types.ModuleType("bootstrap.apply.preview")
    fake.plan_live = lambda environment, **kwargs: calls.append((environment, kwargs)) or 0
    monkeypatch.setitem(sys.modules, "bootstrap.apply.preview", fake)
    assert plan_cmd.dispatch("dev", offline=False, out=tmp_path, json_out=True, layers=["network"]) == 0
    assert calls == [("dev", {"out_dir": tmp_path, "json_out": True, "endpoint_url": None, "layers": ["network"]})]


def test_live_only_flags_are_refused_offline(tmp_path):
    from groundctl import plan as plan_cmd

    with pytest.raises(BadInput, match="live plan only"):
        plan_cmd.dispatch("dev", offline=True, out=tmp_path, json_out=False, layers=["flux"])
    assert not tmp_path.joinpath("plan-dev.json").exists()
