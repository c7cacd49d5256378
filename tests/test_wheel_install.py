"""An adopter has groundctl only as a wheel. Built from this checkout and installed into a fresh virtual environment
(the dependencies seen from this interpreter's site-packages, so nothing is downloaded), groundctl run in a folder
with no environments/ finds its bundled example specs, as the README promises, and starts a repository with them."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.journey import checkout_copy


def _run(argv: list, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=600, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment holding groundctl from its wheel, and nothing else of this checkout."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = checkout_copy(REPO, tmp / "checkout")
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                  str(tmp / "dist"), str(source)])
    assert built.returncode == 0, built.stderr[-3000:]
    wheel, = (tmp / "dist").glob("groundctl-*.whl")
    python = tmp / "venv"
    venv.create(python, with_pip=True, system_site_packages=True)
    done = _run([str(python / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                 str(wheel)], env=_env(python))
    assert done.returncode == 0, done.stderr[-3000:]
    return python


def _env(python: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GROUNDCTL_ENDPOINT_URL")}
    env["PATH"] = f"{python / 'bin'}:/usr/bin:/bin"
    return env


def test_the_wheel_holds_the_example_specs(installed, tmp_path):
    where = _run([str(installed / "bin" / "python"), "-c", "import bootstrap, groundctl; print(groundctl.__file__); "
                  "from bootstrap.spec.spec_file import ENVIRONMENTS_DIR as d; print(sorted(p.name for p in "
                  "d.glob('*.yaml')))"], cwd=tmp_path, env=_env(installed))
    assert where.returncode == 0, where.stderr
    module, examples = where.stdout.splitlines()
    assert Path(module).is_relative_to(installed)  # the wheel's, not this checkout's
    assert examples == "['dev.yaml', 'local.yaml', 'prod.yaml']"


def test_spec_check_outside_a_checkout_reads_the_bundled_example(installed, tmp_path):
    done = _run(["groundctl", "spec", "check", "dev"], cwd=tmp_path, env=_env(installed))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())  # console.info writes to stderr: stdout is for --json
    assert "dev: valid (non-production, eu-west-1" in said
    assert "bundled example spec" in said and str(installed) in said


def test_init_starts_a_repository_from_the_installed_wheel(installed, tmp_path):
    env = _env(installed)
    done = _run(["groundctl", "init", "--name", "staging", "--region", "eu-west-1", "--account", "123456789012"],
                cwd=tmp_path, env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    checked = _run(["groundctl", "spec", "check", "staging"], cwd=tmp_path, env=env)
    assert checked.returncode == 0, checked.stderr
    assert "bundled" not in checked.stderr  # the repository's own spec now
