"""Installs that check what they install: a release file is downloaded from the URL the lock records, its sha256
compared with the lock's before anything is installed, and only then handed on: a plugin tarball to
`pulumi plugin install resource <name> v<version> --file <tarball> --reinstall` (pkg/cmd/pulumi/plugin/
plugin_install.go:91-94, 321-348: `--file` unpacks the tarball into the plugin folder with no network;
`--reinstall` replaces a folder already there), the CLI's tarball unpacked into a folder of its own.

Not `pulumi plugin install --checksum`: at v3.259.0 its checksumReader (sdk/go/common/workspace/plugins.go:
884-904) hashes each chunk only when Read returns no error, so the final chunk of an HTTP/1.1 download, returned
together with io.EOF, is never hashed and the right digest is refused; and it checks nothing when that version
is already installed (plugin_install.go:287-294 returns before any download)."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Mapping, Optional

from bootstrap.pins.fetch import Answer, FetchProblem
from bootstrap.pins.lockfile import Entry

MAX_TARBALL_BYTES = 1 << 30       # the aws plugin's tarball, the largest, is ~150 MiB
DOWNLOAD_DEADLINE_SECONDS = 900.0
INSTALL_TIMEOUT_SECONDS = 600.0


class InstallProblem(Exception):
    pass


def checked_download(entry: Entry, fetch: Callable[..., Answer]) -> bytes:
    """`entry`'s file, read from its recorded URL, when its sha256 is the lock's; InstallProblem otherwise."""
    try:
        body = fetch(entry.url, max_bytes=MAX_TARBALL_BYTES, deadline=DOWNLOAD_DEADLINE_SECONDS).body
    except FetchProblem as exc:
        raise InstallProblem(f"{entry.file} could not be downloaded from {exc.url}: {exc.reason}. Nothing was "
                             "installed.") from None
    actual = hashlib.sha256(body).hexdigest()
    if actual != entry.sha256:
        raise InstallProblem(f"{entry.url} has sha256 {actual}, but the lock records {entry.sha256} for "
                             f"{entry.file} (from {entry.checksums_url or 'its publisher'}): the download is not "
                             "the release the lock checked. Nothing was installed. Find out why (a mirror serving "
                             "another file?) before you install it.")
    return body


def checked_first(entries: list[Entry], fetch: Callable[..., Answer]) -> Callable[..., Answer]:
    """Download every entry's file and check each against the lock before anything is installed; a fetch that
    serves those checked bytes, so a later file that differs leaves nothing installed by an earlier one."""
    bodies = {e.url: checked_download(e, fetch) for e in entries}

    def served(url: str, **_kwargs) -> Answer:
        return Answer(bodies[url], {}, url)

    return served


def install_plugin(entry: Entry, fetch: Callable[..., Answer], env: Mapping[str, str], pulumi: str = "pulumi",
                   run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> None:
    """Install the resource plugin `entry` names with Pulumi, from its checked tarball."""
    body = checked_download(entry, fetch)
    name = entry.name.removeprefix("pulumi-resource-")
    with tempfile.TemporaryDirectory(prefix="groundctl-plugin-") as scratch:
        tarball = Path(scratch) / entry.file
        tarball.write_bytes(body)
        argv = [pulumi, "plugin", "install", "resource", name, f"v{entry.version}", "--file", str(tarball),
                "--reinstall"]
        try:
            done = run(argv, env=dict(env), capture_output=True, text=True, timeout=INSTALL_TIMEOUT_SECONDS)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InstallProblem(f"`{' '.join(argv[:6])} --file …` could not run: {exc}") from None
    if done.returncode != 0:
        raise InstallProblem(f"`pulumi plugin install resource {name} v{entry.version} --file {entry.file} "
                             f"--reinstall` failed (exit {done.returncode}): {done.stderr.strip()[-600:]}")


def install_cli(entry: Entry, fetch: Callable[..., Answer], dest: Path) -> Path:
    """Unpack the CLI's checked tarball into `dest` (its binaries directly inside), whole or not at all; the
    folder to put on PATH."""
    body = checked_download(entry, fetch)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        with tempfile.TemporaryFile() as raw:
            raw.write(body)
            raw.seek(0)
            with tarfile.open(fileobj=raw, mode="r:gz") as tar:
                for member in tar.getmembers():
                    parts = Path(member.name).parts
                    if not member.isfile() or len(parts) != 2 or parts[0] != "pulumi":
                        continue  # the release holds pulumi/<binary>; nothing else is unpacked
                    member.name = parts[1]
                    tar.extract(member, staging, filter="data")
        if not (staging / "pulumi").is_file():
            raise InstallProblem(f"{entry.file} holds no pulumi/pulumi binary")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    except (OSError, tarfile.TarError) as exc:
        raise InstallProblem(f"{entry.file} could not be unpacked into {dest}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def install_command(entry: Entry, home_word: Optional[str]) -> str:
    """A shell command that installs `entry`'s plugin with its download checked against the lock's digest: no
    value to fetch by hand. `home_word`: PULUMI_HOME already quoted as one shell word, or None. Pure."""
    name = entry.name.removeprefix("pulumi-resource-")
    prefix = f"PULUMI_HOME={home_word} " if home_word else ""
    return (f't="$(mktemp -d)/{entry.file}" && curl -fsSL --max-time 900 -o "$t" {shlex.quote(entry.url)} && '
            f'echo "{entry.sha256}  $t" | sha256sum --check --strict - && '
            f'{prefix}pulumi plugin install resource {name} v{entry.version} --file "$t" --reinstall')


def lock_here(folder: Optional[Path] = None) -> list[Entry]:
    """The pins lock of the repository groundctl runs in (the working folder: where environments/ is), or []
    when it has none or it cannot be used (the message then names `groundctl pins update`)."""
    from bootstrap.pins.lockfile import LOCK_FILE, MAX_LOCK_BYTES, LockProblem, parse
    from bootstrap.kit.user_files import UnusableFile, read_user_file

    path = (folder or Path.cwd()) / LOCK_FILE
    if not path.is_file():
        return []
    try:
        return parse(read_user_file(str(path), what="The pins lock", max_bytes=MAX_LOCK_BYTES, fix=""))
    except (UnusableFile, LockProblem):
        return []
