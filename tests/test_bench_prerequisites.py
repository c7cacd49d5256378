"""The engine benches without the Pulumi CLI: each stops before measuring, exit 2 (neither PASS nor MISS), and
names what is missing on stderr (bench/prerequisites.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench.prerequisites import ENGINE, missing_engine
from tests.conftest import REPO


@pytest.mark.parametrize("bench", ["engine_overhead", "rehearsal_overhead"])
def test_an_engine_bench_without_pulumi_exits_2_naming_what_is_missing(tmp_path, bench):
    done = subprocess.run([sys.executable, str(REPO / "bench" / f"{bench}.py")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PATH": str(tmp_path)})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    said = done.stderr.strip()
    assert said.startswith(f"{bench.replace('_', ' ')} bench cannot run: {', '.join(ENGINE)} not on PATH"), said
    assert "\n" not in said and "Traceback" not in said


def test_the_prerequisite_names_only_the_binaries_absent(tmp_path):
    for name in ENGINE[:2]:
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    why = missing_engine("some bench", path=str(tmp_path))
    assert why and why.startswith(f"some bench cannot run: {ENGINE[2]} not on PATH."), why
    (tmp_path / ENGINE[2]).write_text("#!/bin/sh\n")
    (tmp_path / ENGINE[2]).chmod(0o755)
    assert missing_engine("some bench", path=str(tmp_path)) is None
