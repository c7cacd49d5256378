"""No writable folder for temporary files (`docker run --read-only`, a pod without its /tmp volume, a TMPDIR naming
a folder that is not there): the real CLI stops with exit 4 and one line naming the folder and how to provide it,
before it writes anything; never "internal error (FileNotFoundError)"."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest
import yaml

from bootstrap.kit.scratch import NoScratchFolder, require_scratch
from tests.conftest import REPO
from tests.test_cli_errors import assert_refused, groundctl


def _up(tmp_path, emulator_endpoint, tmpdir: str, wrap: list[str] = ()) -> tuple[subprocess.CompletedProcess, str]:
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["backend"]["bucket"] = bucket = f"gl-{uuid.uuid4().hex[:16]}"
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(spec))
    env = {**{k: v for k, v in os.environ.items() if k != "GROUNDCTL_ENDPOINT_URL"}, "TMPDIR": tmpdir,
           "PULUMI_CONFIG_PASSPHRASE": "p", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([*wrap, sys.executable, "-m", "groundctl", "up", str(tmp_path / "local.yaml"), "--yes",
                           "--json", "--endpoint-url", emulator_endpoint],
                          capture_output=True, text=True, timeout=180, env=env, cwd=REPO)
    return proc, bucket


def _stopped_before_writing(proc: subprocess.CompletedProcess, bucket: str, aws, folder: str) -> None:
    assert proc.returncode == 4, proc.stderr
    error = proc.stderr[proc.stderr.index("error: "):].strip()
    assert "\n" not in error  # one line
    assert f"writable folder for temporary files, and {folder} (TMPDIR names it)" in error
    assert "TMPDIR" in error and "--tmpfs /tmp" in error and "emptyDir" in error
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    record = json.loads(proc.stdout)
    assert record["stopped_at"] == "engine" and record["outcome"] == "failed"
    assert bucket not in [b["Name"] for b in aws.client("s3").list_buckets()["Buckets"]]


@pytest.mark.emulator
def test_a_tmpdir_that_does_not_exist(tmp_path, aws, emulator_endpoint):
    missing = str(tmp_path / "no-such-folder")
    proc, bucket = _up(tmp_path, emulator_endpoint, missing)
    _stopped_before_writing(proc, bucket, aws, missing)
    assert "does not exist" in proc.stderr


def _read_only_wrapper(folder: str) -> list[str]:
    """A command prefix under which `folder` cannot be written. Root writes through file modes, so for root the
    folder is bind-mounted read-only in a mount namespace of the command's own (as `docker run --read-only` does)."""
    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        return []
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed: a read-only folder cannot be made for root")
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here (unshare -m: {probe.stderr.decode()[:200].strip()})")
    script = ('mount --bind "$RO" "$RO" && mount -o remount,bind,ro "$RO" && '
              '! touch "$RO/written" 2> /dev/null && exec "$@"')
    return ["env", f"RO={folder}", "unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh"]


@pytest.mark.emulator
def test_a_tmpdir_that_cannot_be_written(tmp_path, aws, emulator_endpoint):
    folder = tmp_path / "read-only"
    folder.mkdir()
    proc, bucket = _up(tmp_path, emulator_endpoint, str(folder), _read_only_wrapper(str(folder)))
    _stopped_before_writing(proc, bucket, aws, str(folder))
    assert "cannot be written (Read-only file system)" in proc.stderr or os.geteuid() != 0
    assert list(folder.iterdir()) == []


def test_the_default_folder_is_named_when_tmpdir_is_unset():
    with pytest.raises(NoScratchFolder) as caught:
        require_scratch({}, probe=lambda folder: "cannot be written (Read-only file system)")
    assert caught.value.exit_code == 4
    assert "/tmp (the default: TMPDIR is unset) cannot be written (Read-only file system)" in caught.value.message
    assert require_scratch({"TMPDIR": "/x"}, probe=lambda folder: None) == "/x"


def test_pythons_own_no_usable_temporary_directory_is_exit_4_not_an_internal_error(monkeypatch, capsys, tmp_path):
    """Wherever Python's tempfile finds no folder at all (every candidate unusable), the front door says what to do."""
    def no_folder():
        raise FileNotFoundError(errno.ENOENT, f"No usable temporary directory found in {['/tmp']}")

    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setattr(tempfile, "_get_default_tempdir", no_folder)
    monkeypatch.setattr("bootstrap.spec.load_spec", lambda *a, **k: tempfile.mkdtemp())
    monkeypatch.delenv("TMPDIR", raising=False)
    assert_refused(groundctl(monkeypatch, capsys, "spec", "check", "local"), 4,
                   "writable folder for temporary files, and /tmp (the default: TMPDIR is unset)", "emptyDir")
