"""Every command that writes files answers a destination it cannot write — full, read-only, under a file, or
on a file system that refuses new entries — with exit 2 and the path, before it does its work; and a write
that fails after the recovery changed the state is a warning, never "bad input" hiding a restore.

How each kind of destination is made here, honestly (the tests run as root, so permission bits are ignored):
- under a file: `<tmp>/a-file/out` (ENOTDIR) — always available;
- /sys and /proc: sysfs refuses a new entry (EPERM), procfs says it does not exist (ENOENT) — always available;
- read-only and full: a tiny tmpfs mounted (read-only, or filled to the last byte) for the test; skipped with
  the reason where `mount` is not permitted. /dev/full is no folder: it is used where a command writes one file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli_errors import groundctl

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "tests" / "data" / "fleet"
IMAGE = "registry.example/groundctl@sha256:" + "0" * 64
STATE = REPO / "tests" / "data" / "pulumi-states" / "aws-subnet-group.json"


def _mount_tmpfs(where: Path, *options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(("size=256k", *options)), "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here ({done.stderr.strip() or done.returncode}), so a read-only "
                    "or full file system cannot be made for the test")


@pytest.fixture
def tmpfs(tmp_path):
    mounted = []

    def make(name: str, *options: str) -> Path:
        where = tmp_path / name
        _mount_tmpfs(where, *options)
        mounted.append(where)
        return where
    yield make
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder: Path) -> None:
    """Fill the file system of `folder` to the last byte (a real ENOSPC for the next write)."""
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


@pytest.fixture(params=["under-a-file", "sysfs", "procfs", "read-only", "full"])
def bad_dir(request, tmp_path, tmpfs) -> tuple[Path, str]:
    """(a destination folder that cannot be written, the reason the message must give)."""
    kind = request.param
    if kind == "under-a-file":
        (tmp_path / "a-file").write_text("x")
        return tmp_path / "a-file" / "out", "a part of the path is a file"
    if kind == "sysfs":
        return Path("/sys/groundctl-out"), "not permitted"
    if kind == "procfs":
        return Path("/proc/groundctl/out"), "does not exist"
    if kind == "read-only":
        return tmpfs("ro", "ro") / "out", "read-only"
    full = tmpfs("full")
    _fill(full)
    return full / "out", "full"


# (command, how the destination is passed) for each command that writes a folder or a file.
DIR_COMMANDS = {
    "plan-offline": lambda d: ["plan", "local", "--offline", "--out", str(d)],
    "plan-live": lambda d: ["plan", "local", "--out", str(d)],
    "recover": lambda d: ["recover", "local", "network", "--dry-run", "--out", str(d)],
    "drill-state-loss": lambda d: ["drill", "state-loss", "local", "--layer", "network", "--dry-run", "--out", str(d)],
    "drill-rebuild": lambda d: ["drill", "rebuild-cluster", "local", "--dry-run", "--out", str(d)],
    "fleet-status-html": lambda d: ["fleet", "status", "--environments", str(FLEET), "--html", str(d)],
}
FILE_COMMANDS = {
    "fleet-manifests": lambda f: ["fleet", "manifests", "--image", IMAGE, "--environments", str(FLEET),
                                  "--out", str(f)],
    "state-import-plan": lambda f: ["state", "import-plan", str(STATE), "--force", "--out", str(f)],
    "ci-comment": lambda f: ["ci", "comment", "dev", "--plan-dir", "/nonexistent-plans", "--out", str(f)],
}


@pytest.mark.parametrize("command", sorted(DIR_COMMANDS))
def test_an_unwritable_folder_is_bad_input_before_any_work(monkeypatch, capsys, bad_dir, command):
    folder, reason = bad_dir
    rc, out, err = groundctl(monkeypatch, capsys, *DIR_COMMANDS[command](folder))
    said = " ".join(err.split())
    assert rc == 2, err
    assert str(folder) in said and reason in said, err
    assert "Traceback" not in err and "internal error" not in err
    assert "emulator" not in err and out == ""  # refused before an emulator was started or a report printed


@pytest.mark.parametrize("command", sorted(FILE_COMMANDS))
def test_an_unwritable_file_is_bad_input(monkeypatch, capsys, bad_dir, command):
    folder, reason = bad_dir
    target = folder / "out.yaml"
    rc, out, err = groundctl(monkeypatch, capsys, *FILE_COMMANDS[command](target))
    said = " ".join(err.split())
    assert rc == 2, err
    assert str(target) in said and reason in said, err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("command", sorted(FILE_COMMANDS))
def test_a_device_is_not_a_file_destination(monkeypatch, capsys, command):
    rc, out, err = groundctl(monkeypatch, capsys, *FILE_COMMANDS[command](Path("/dev/full")))
    assert rc == 2, err
    assert "/dev/full exists and is not a regular file" in " ".join(err.split())


def test_a_folder_made_for_the_check_is_not_left_behind(monkeypatch, capsys, tmp_path):
    """The check makes the folder as the write would, then removes it: a refused command writes nothing."""
    from bootstrap.destinations import check_dir

    out = tmp_path / "a" / "b" / "plans"
    check_dir(out)
    assert not (tmp_path / "a").exists()


def test_a_write_that_fills_the_disk_names_the_path(tmpfs):
    """The check passes, then the disk fills before the write: the write's own failure is bad input with the
    path, and nothing half-written is left."""
    from bootstrap.destinations import check_dir, write_files
    from bootstrap.kit.errors import BadInput

    folder = tmpfs("fills")
    check_dir(folder)
    _fill(folder)
    with pytest.raises(BadInput) as refused:
        write_files(folder, {"plan-dev.md": "x" * 100_000})
    assert f"{folder / 'plan-dev.md'} cannot be written: the file system is full" in refused.value.message
    assert sorted(p.name for p in folder.iterdir()) == ["filler"]


def test_recover_reports_a_change_even_when_its_report_cannot_be_written(monkeypatch, capsys, tmpfs,
                                                                         local_spec_file, emulator_endpoint):
    """The disk fills while the recovery runs (after the up-front check): the restore it made is still the
    answer — its exit code, and the transcript as JSON on stdout — and the lost files are a warning naming
    the path. The guide is stood in for at its seam (a transcript whose restore phase ran): what is under
    test is the command's reporting; the file system is real."""
    import recovery.guide.flow as flow
    from recovery.guide.model import Condition, Transcript

    out = tmpfs("reports")

    def restored(opts, svc, on_condition=None):
        _fill(out)  # the disk fills during the run
        conditions = tuple(Condition(p, "achieved" if p != "verify" else "failed", "x", "m", attempted=True)
                           for p in flow.PHASES)
        return Transcript(opts.environment, opts.layer, opts.run_id, "t0", "t1", {}, conditions, "incomplete")

    monkeypatch.setattr(flow, "run_guide", restored)
    rc, stdout, err = groundctl(monkeypatch, capsys, "recover", str(local_spec_file), "network", "--yes", "--json",
                                "--out", str(out), "--endpoint-url", emulator_endpoint)
    transcript = json.loads(stdout)
    assert rc == transcript["exit_code"] != 2, err
    assert {p["phase"] for p in transcript["phases"] if p["attempted"]} >= {"restore"}
    said = " ".join(err.split())
    assert "warning:" in err and str(out) in said and "the file system is full" in said
    assert "The recovery itself ran" in said


def test_recover_without_a_change_keeps_bad_input(monkeypatch, capsys):
    from groundctl.recover import state_may_have_changed

    assert not state_may_have_changed({"phases": [{"phase": "assess", "attempted": True},
                                                  {"phase": "restore", "attempted": False}]})
    assert state_may_have_changed({"phases": [{"phase": "pending", "attempted": True}]})


@pytest.mark.parametrize("link", [".github", ".github/workflows", ".github/workflows/groundctl-pr.yml"])
def test_ci_init_never_writes_through_a_symlink(monkeypatch, capsys, tmp_path, link, release_mirror):
    """A link planted in the repository (a pull request can add one) at the workflows folder, its parent or a
    workflow file: refused with the link's path, nothing written anywhere, with or without --force."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    (repo / "environments").mkdir(parents=True)
    (repo / "environments" / "dev.yaml").write_text((REPO / "environments" / "dev.yaml").read_text())
    release_mirror.lock(repo)
    outside.mkdir()
    target = outside / "victim.yml" if link.endswith(".yml") else outside
    if link.endswith(".yml"):
        target.write_text("keep me\n")
    (repo / link).parent.mkdir(parents=True, exist_ok=True)
    (repo / link).symlink_to(target)
    for extra in ([], ["--force"]):
        rc, out, err = groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(repo), "--install", ".", *extra)
        assert rc == 2, err
        assert f"{repo / link} is a symbolic link" in " ".join(err.split())
    assert sorted(p.name for p in outside.rglob("*")) == (["victim.yml"] if link.endswith(".yml") else [])
    if link.endswith(".yml"):
        assert target.read_text() == "keep me\n"


def test_ci_init_on_a_read_only_repository(monkeypatch, capsys, tmpfs, release_mirror):
    repo = tmpfs("repo")
    (repo / "environments").mkdir()
    (repo / "environments" / "dev.yaml").write_text((REPO / "environments" / "dev.yaml").read_text())
    release_mirror.lock(repo)
    subprocess.run(["mount", "-o", "remount,ro", str(repo)], check=True)
    rc, out, err = groundctl(monkeypatch, capsys, "ci", "init", "--dir", str(repo), "--install", ".")
    assert rc == 2, err
    said = " ".join(err.split())
    assert str(repo / ".github" / "workflows") in said and "read-only" in said
