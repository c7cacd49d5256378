"""What the journey tests share: the pinned Pulumi CLI laid out as its installers lay it out (the CLI's own
release files only, none of this machine's provider plugins), a process environment holding nothing but what a
step declares, and a listing of every file under a folder, to show what a run wrote."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Optional

from bootstrap.engine.versions import PULUMI_CLI_PINNED
from tests.conftest import REPO

# What the CLI's release tarball holds beside `pulumi` that a Python program needs (the language host and the
# dynamic-provider host): what pulumi/actions and get.pulumi.com put on PATH. Never a resource plugin.
CLI_FILES = ("pulumi", "pulumi-language-python", "pulumi-language-python-exec", "pulumi-resource-pulumi-python")
BASE_PATH = "/usr/bin:/bin"
PROGRAMS = REPO / "tests" / "engine_programs"


def pinned_cli() -> tuple[Optional[Path], str]:
    """The folder of the pinned Pulumi CLI found on PATH, or None and the reason a journey cannot run."""
    found = shutil.which("pulumi")
    if not found:
        return None, "needs the Pulumi CLI (`pulumi` on PATH, e.g. PATH=/root/engine/bin:$PATH)"
    folder = Path(found).resolve().parent
    missing = [name for name in CLI_FILES if not (folder / name).exists()]
    if missing:
        return None, f"the Pulumi CLI at {folder} lacks {', '.join(missing)}"
    done = subprocess.run([found, "version"], capture_output=True, text=True, timeout=120,
                          env={"PATH": BASE_PATH, "PULUMI_SKIP_UPDATE_CHECK": "true", "HOME": "/nonexistent"})
    if done.stdout.strip() != f"v{PULUMI_CLI_PINNED}":
        return None, f"the Pulumi CLI on PATH is {done.stdout.strip() or done.stderr.strip()!r}, not the pinned " \
                     f"v{PULUMI_CLI_PINNED}"
    return folder, ""


def install_cli(source: Path, bin_dir: Path) -> Path:
    """The CLI's release files linked into `bin_dir`, as an installer leaves them; `bin_dir`."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name in CLI_FILES:
        (bin_dir / name).symlink_to(source / name)
    return bin_dir


def clean_env(home: Path, path: str, extra: Mapping[str, str] = ()) -> dict[str, str]:
    """A process environment with nothing of this machine's in it: HOME, PATH and `extra`."""
    env = {"HOME": str(home), "PATH": path, "LANG": "C.UTF-8", "TMPDIR": os.environ.get("TMPDIR", "/tmp")}
    env.update(extra)
    return env


def files_under(folder: Path) -> set[str]:
    """Every file and link under `folder`, relative to it."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def checkout_copy(repo: Path, target: Path) -> Path:
    """The checkout's files as git sees them (tracked, and new files not ignored), copied into `target`."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, check=True, timeout=120).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = repo / name
        if source.is_symlink():  # environments/, a link to the bundled examples, stays one
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(source), target / name)
        elif source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


# Appended to the backend stand-in's program, so that its stack owns a resource.
OWNED_RECORD = """
from record_provider import Record  # noqa: E402

Record("bucket", f"{pulumi.get_stack()}/backend/bucket", {"bucket": bucket}, gc.require("awsEndpoint"))
"""


def stand_in_stacks(folder: Path) -> Path:
    """The stand-in programs: the engine tier's network and cluster, the cluster tier's backend owning a record,
    the real flux (skipped on the emulator); each importing its layer's SDK."""
    for layer in ("network", "cluster", "backend"):
        shutil.copytree(PROGRAMS / layer, folder / layer)
        main = folder / layer / "__main__.py"
        main.write_text(main.read_text().replace("import pulumi\n", "import pulumi\nimport pulumi_aws  # noqa\n", 1))
    with open(folder / "backend" / "__main__.py", "a") as program:
        program.write(OWNED_RECORD)
    # The backend stand-in's own project file (the cluster tier's) leaves the toolchain unset; here every program
    # pins pip, as each layer's project does.
    (folder / "backend" / "Pulumi.yaml").write_text(
        (PROGRAMS / "network" / "Pulumi.yaml").read_text().replace("name: network", "name: backend"))
    shutil.copytree(REPO / "stacks" / "flux", folder / "flux", ignore=shutil.ignore_patterns("__pycache__"))
    return folder
