"""The newcomer's journey: the README's opening block, run as written in a fresh home.

It installs groundctl and runs the main job on the embedded default (`groundctl up local --yes`: an emulator
started for the command). The Pulumi CLI is where its installer puts it (`$HOME/.pulumi/bin`, which the block
puts on PATH); nothing else is pre-seeded. Where Pulumi's aws plugin exists (on this machine's PATH) the block
runs through: backend, network and cluster created, flux skipped. Without it (as here) the main job stops with
exit 4 naming the plugin and its checked install command, before it writes anything: no bucket, no key, no
stack, no file.

- engine tier: the block after its install line, with groundctl from this checkout (the install line needs the
  package registry);
- registry tier (GROUNDCTL_TEST_REGISTRY=1): the whole block, in a copy of the checkout and a fresh virtual
  environment."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from bootstrap.engine.versions import PROVIDER_PLUGINS
from tests import docs
from tests.conftest import REPO
from tests.journey import BASE_PATH, checkout_copy, clean_env, files_under, install_cli, pinned_cli

INSTALL = "python -m pip install -e '.[test]'"
MAIN_JOB = "groundctl up local --yes"
AWS = next(r for r in PROVIDER_PLUGINS if r.name == "aws")
CLI, NO_CLI = pinned_cli()
requires_cli = pytest.mark.skipif(CLI is None, reason=NO_CLI)


def opening_block() -> str:
    """The README's first code block, as written."""
    return docs.sh_blocks(docs.text("README.md"))[0]


def commands(block: str) -> list[str]:
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.splitlines() if line.strip()]


def test_the_readme_opens_with_the_install_and_the_main_job_with_what_it_needs_on_path():
    readme = docs.text("README.md")
    assert readme.index(opening_block()) < readme.index("\n## ")  # before any section
    lines = commands(opening_block())
    assert lines[0] == INSTALL and lines[-1] == MAIN_JOB
    assert 'export PATH="$HOME/.pulumi/bin:$PATH"' in lines  # where Pulumi's installer puts the CLI
    assert any(line.startswith("export PULUMI_CONFIG_PASSPHRASE=") for line in lines)  # local secrets
    assert "python -m pip install -q -e '.[test]'" in (REPO / ".ci" / "run").read_text()  # CI installs alike


def _aws_plugin_on_this_machine() -> Path | None:
    found = shutil.which("pulumi-resource-aws")
    return Path(found) if found else None


def _newcomer_home(tmp_path: Path) -> Path:
    """A home with the pinned CLI where its installer puts it, and the aws plugin beside it where one exists."""
    home = tmp_path / "home"
    bin_dir = install_cli(CLI, home / ".pulumi" / "bin")
    plugin = _aws_plugin_on_this_machine()
    if plugin:
        (bin_dir / plugin.name).symlink_to(plugin)
    return home


def _run(script: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=3000)


def _assert_the_honest_outcome(done: subprocess.CompletedProcess, home: Path) -> None:
    said = " ".join((done.stdout + done.stderr).split())
    if _aws_plugin_on_this_machine():
        assert done.returncode == 0, said[-3000:]
        assert re.search(r"flux\s*│\s*up\s*│\s*skipped", done.stdout), done.stdout
        return
    assert done.returncode == 4, said[-3000:]
    assert f"the aws resource plugin v{AWS.version}" in said
    assert "`groundctl pins update` in the repository" in said and "groundctl pins install --plugins" in said
    assert "nothing was changed" in said and "stopped at engine" in said
    assert "Traceback" not in said
    # Pulumi's home holds its own logs only: no plugin, no stack, no credentials.
    assert {p.split("/")[0] for p in files_under(home / ".pulumi")} <= {"bin", "logs"}


@pytest.mark.engine
@requires_cli
def test_the_opening_block_after_its_install_line_stops_before_any_write_without_the_aws_plugin(
        tmp_path, aws):
    lines = opening_block().splitlines()
    after_install = "\n".join(lines[next(i for i, line in enumerate(lines) if line.startswith(INSTALL)) + 1:])
    home = _newcomer_home(tmp_path)
    shim = tmp_path / "groundctl-from-this-checkout"
    shim.mkdir()
    (shim / "groundctl").write_text(f'#!/bin/sh\nPYTHONPATH="{REPO}" exec "{sys.executable}" -m groundctl "$@"\n')
    (shim / "groundctl").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(home, f"{shim}:{BASE_PATH}", {"PULUMI_HOME": str(home / ".pulumi")})

    done = _run(after_install, work, env)
    _assert_the_honest_outcome(done, home)
    assert "Started the embedded AWS emulator" in done.stderr
    assert files_under(work) == set()
    if done.returncode == 0:
        return
    # The same block against an emulator this test can look into afterwards: nothing is in it.
    s3, kms = aws.client("s3"), aws.client("kms")
    before = ({b["Name"] for b in s3.list_buckets()["Buckets"]}, len(kms.list_keys()["Keys"]))
    done = _run(after_install, work, {**env, "GROUNDCTL_ENDPOINT_URL": aws.endpoint_url})
    _assert_the_honest_outcome(done, home)
    assert "Started the embedded AWS emulator" not in done.stderr
    assert ({b["Name"] for b in s3.list_buckets()["Buckets"]}, len(kms.list_keys()["Keys"])) == before
    assert files_under(work) == set()


@pytest.mark.engine
@pytest.mark.registry
@pytest.mark.timeout(3600)
@requires_cli
@pytest.mark.skipif(os.environ.get("GROUNDCTL_TEST_REGISTRY") != "1",
                    reason="installs groundctl and its dependencies from the package registry: set "
                           "GROUNDCTL_TEST_REGISTRY=1")
def test_the_opening_block_verbatim_in_a_fresh_virtual_environment(tmp_path):
    checkout = checkout_copy(REPO, tmp_path / "groundctl")
    before = files_under(checkout)
    python = tmp_path / "python"
    venv.create(python, with_pip=True)
    home = _newcomer_home(tmp_path)
    env = clean_env(home, f"{python / 'bin'}:{BASE_PATH}", {"PULUMI_HOME": str(home / ".pulumi")})

    done = _run(opening_block(), checkout, env)
    _assert_the_honest_outcome(done, home)
    assert "Started the embedded AWS emulator" in done.stderr
    assert Path(subprocess.run([str(python / "bin" / "python"), "-c", "import groundctl; print(groundctl.__file__)"],
                               capture_output=True, text=True, timeout=120, cwd=home,
                               env=env).stdout.strip()).is_relative_to(checkout)
    # pip's build metadata and Python's bytecode caches are all that is written into the checkout.
    written = {p for p in files_under(checkout) - before if "/__pycache__/" not in p}
    assert {p.split("/")[0] for p in written} <= {"groundctl.egg-info", "build"}, written
