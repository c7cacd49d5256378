"""From a folder without environments/, a name resolves to groundctl's bundled example specs (account
111111111111). An operator must never act on them unknowingly: every command that loads one says so on stderr,
every run (stdout stays the command's own output, so --json is still one document), and the fleet commands,
whose output schedules jobs against real roles, refuse to fall back at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
IMAGE = "registry.example/groundctl@sha256:" + "0" * 64


def groundctl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    env.pop("GROUNDCTL_ENDPOINT_URL", None)
    return subprocess.run([sys.executable, "-m", "groundctl", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("args", [["spec", "check", "dev"], ["spec", "roles", "prod", "--json"],
                                  ["plan", "dev", "--offline", "--json", "--out", "plans"]])
def test_a_bundled_example_is_named_on_every_run(tmp_path, args):
    for _ in range(2):
        done = groundctl(*args, cwd=tmp_path)
        assert done.returncode in (0, 1), done.stderr
        said = " ".join(done.stderr.split())
        assert "bundled example spec" in said and "not one of yours" in said, done.stderr
        assert said.count("bundled example spec") == 1  # once per run, not once per load
        if "--json" in args:
            json.loads(done.stdout)


def test_an_own_environments_folder_is_used_silently(tmp_path):
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / "dev.yaml").write_text((REPO / "environments" / "dev.yaml").read_text())
    done = groundctl("spec", "check", "dev", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "bundled" not in done.stderr


@pytest.mark.parametrize("args", [["fleet", "manifests", "--image", IMAGE], ["fleet", "status", "--json"]])
def test_the_fleet_commands_refuse_the_bundled_examples(tmp_path, args):
    done = groundctl(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    # With --json a refusal is still a record on stdout (its reason for a job's summary); without, stdout is empty.
    if "--json" in args:
        failed = json.loads(done.stdout)
        assert failed["exit_code"] == 2 and "holds no environments/ folder" in failed["message"]
    else:
        assert done.stdout == ""
    said = " ".join(done.stderr.split())
    assert "holds no environments/ folder" in said and "--environments" in said
    assert "Traceback" not in done.stderr
