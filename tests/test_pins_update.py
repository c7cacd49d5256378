"""`groundctl pins update`, `check` and `install` through the front door, against a local release mirror in the
publishers' formats (tests/release_mirror.py), and the bad input of issue 35 §3: each a clear exit 2 or 4 naming
the file and the fix, nothing installed and nothing half-written (the lock, and any Flux copy, as they were)."""

from __future__ import annotations

import http.server
import json
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from bootstrap.engine import versions
from bootstrap.pins.artifacts import ANY, CLI, FLUX, LINUX_AMD64, Want, plugin_name
from bootstrap.pins.fetch import FetchProblem, fetch
from bootstrap.pins.lockfile import LOCK_FILE, parse
from tests.conftest import REPO
from tests.local_http import serving
from tests.plugin_releases import FLUX_MANIFEST, served
from tests.test_cli_errors import assert_refused, groundctl

AWS = versions.PROVIDER_PLUGINS[0]


@pytest.fixture
def repo(tmp_path) -> Path:
    infra = tmp_path / "infra"
    shutil.copytree(REPO / "environments", infra / "environments")
    return infra


@pytest.fixture
def mirror(tmp_path):
    """A mirror of this test's own (its files may be broken), served while the test runs."""
    with served(tmp_path / "mirror", real=(), platforms=(LINUX_AMD64, "darwin-arm64")) as releases:
        yield releases


def update(monkeypatch, capsys, repo: Path, url: str, *args: str):
    return groundctl(monkeypatch, capsys, "pins", "update", "--dir", str(repo), "--no-image",
                     "--no-verify-signatures", *args, env={"GROUNDCTL_RELEASE_MIRROR": url})


def _aws_checksums(releases) -> Path:
    return releases.mirror.file(Want(plugin_name("aws"), AWS.version, LINUX_AMD64)).with_name(
        f"pulumi-aws_{AWS.version}_checksums.txt")


# -- update, check, install -------------------------------------------------------------------------------

def test_update_records_every_artifact_sorted_with_the_urls_read_and_check_accepts_it(monkeypatch, capsys, repo,
                                                                                      mirror):
    code, out, err = update(monkeypatch, capsys, repo, mirror.url, "--platform", "darwin-arm64", "--json")
    assert code == 0, err
    report = json.loads(out)
    text = (repo / LOCK_FILE).read_text()
    entries = parse(text.encode())
    assert [(e.name, e.version, e.platform) for e in entries] == sorted(
        [(FLUX, "2.4.0", ANY)] + [(n, v, p) for p in (LINUX_AMD64, "darwin-arm64") for n, v in
                                  [(CLI, versions.PULUMI_CLI_PINNED)] + [(plugin_name(r.name), r.version)
                                                                         for r in versions.PROVIDER_PLUGINS]])
    for e in entries:  # each digest is the checksums file's line, read from the mirror
        want = Want(e.name, e.version, e.platform)
        assert e.url == want.url(mirror.url) and e.checksums_url == want.checksums_url(mirror.url)
        assert f"{e.sha256}  {e.file}" in Path(mirror.mirror.file(want).with_name(want.checksums_file)).read_text()
    # Each checksums file read once; Flux's install.yaml too, checked and written where the specs read it.
    flux = next(e for e in entries if e.name == FLUX)
    assert sorted(report["read"]) == sorted({e.checksums_url for e in entries} | {flux.url})
    assert report["files"] == ["manifests/flux-v2.4.0.yaml"] and flux.path == "manifests/flux-v2.4.0.yaml"
    assert (repo / flux.path).read_bytes() == FLUX_MANIFEST.read_bytes()
    assert text.count("\n    {") == len(entries)  # one artifact a line: a bump is a small diff
    # Again: nothing changes, and the platform stays recorded without --platform.
    code, out, err = update(monkeypatch, capsys, repo, mirror.url, "--json")
    assert code == 0 and json.loads(out)["changed"] is False and (repo / LOCK_FILE).read_text() == text
    code, out, err = groundctl(monkeypatch, capsys, "pins", "check", "--dir", str(repo))
    assert code == 0, err


def test_flux_is_verified_with_cosign_or_refused_without_it(monkeypatch, capsys, repo, mirror, tmp_path):
    """cosign (Sigstore's keyless verification needs its servers, which this machine cannot reach) is run, not
    reimplemented: absent, the update stops; a stand-in that refuses stops it too; one that accepts is
    recorded with the identity and issuer asked for. The stand-in proves groundctl's use of cosign's answer
    only, not a signature."""
    bin_dir = tmp_path / "cosign-bin"
    bin_dir.mkdir()
    env = {"GROUNDCTL_RELEASE_MIRROR": mirror.url, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    args = ["pins", "update", "--dir", str(repo), "--no-image"]
    assert_refused(groundctl(monkeypatch, capsys, *args, env=env), 4, "cosign is not on PATH", "--no-verify-signatures")
    assert not (repo / LOCK_FILE).exists()
    cosign = bin_dir / "cosign"
    log = tmp_path / "cosign-args"
    cosign.write_text(f'#!/bin/sh\necho "$@" > "{log}"\necho "Error: none of the expected identities" >&2\nexit 1\n')
    cosign.chmod(0o755)
    assert_refused(groundctl(monkeypatch, capsys, *args, env=env), 4, "cosign refused the signature of "
                   "flux_2.4.0_checksums.txt", "Nothing was written")
    assert not (repo / LOCK_FILE).exists()
    called = log.read_text()
    assert "verify-blob" in called and "--certificate-identity-regexp=^https://github.com/fluxcd/.*" in called
    assert "--certificate-oidc-issuer=https://token.actions.githubusercontent.com" in called
    cosign.write_text("#!/bin/sh\necho Verified OK >&2\n")
    code, out, err = groundctl(monkeypatch, capsys, *args, env=env)
    assert code == 0, err
    flux = next(e for e in parse((repo / LOCK_FILE).read_bytes()) if e.name == FLUX)
    assert flux.signature.startswith("cosign verify-blob: identity ^https://github.com/fluxcd/")


def test_a_specs_flux_manifest_path_gets_the_checked_release_file(monkeypatch, capsys, repo, mirror):
    spec = repo / "environments" / "dev.yaml"
    spec.write_text(spec.read_text().replace("  version: v2.4.0\n",
                                             "  version: v2.4.0\n  manifest_path: flux/install.yaml\n"))
    code, _, err = update(monkeypatch, capsys, repo, mirror.url)
    assert code == 0, err
    # The file dev names, and the default copy the specs that name none read through the lock.
    assert (repo / "flux" / "install.yaml").read_bytes() == FLUX_MANIFEST.read_bytes()
    assert (repo / "manifests" / "flux-v2.4.0.yaml").read_bytes() == FLUX_MANIFEST.read_bytes()
    flux = next(e for e in parse((repo / LOCK_FILE).read_bytes()) if e.name == FLUX)
    assert flux.path == "manifests/flux-v2.4.0.yaml"
    # A mirror serving another install.yaml than its checksums line: nothing is written.
    shutil.rmtree(repo / "flux")
    shutil.rmtree(repo / "manifests")
    (repo / LOCK_FILE).unlink()
    mirror.mirror.file(Want(FLUX, "2.4.0", ANY)).write_bytes(b"kind: Namespace\n")
    assert_refused(update(monkeypatch, capsys, repo, mirror.url), 4, "install.yaml has sha256",
                   "the mirror serves another file", "Nothing was written")
    assert not (repo / "flux").exists() and not (repo / "manifests").exists() and not (repo / LOCK_FILE).exists()


def test_install_checks_each_download_and_installs_nothing_that_differs(monkeypatch, capsys, repo, mirror, tmp_path):
    assert update(monkeypatch, capsys, repo, mirror.url)[0] == 0
    code, out, err = groundctl(monkeypatch, capsys, "pins", "install", "--dir", str(repo), "--cli",
                               str(tmp_path / "cli"), "--platform", LINUX_AMD64)
    assert code == 0 and out.strip() == str(tmp_path / "cli") and (tmp_path / "cli" / "pulumi").is_file(), err
    tarball = mirror.mirror.file(Want(CLI, versions.PULUMI_CLI_PINNED, LINUX_AMD64))
    tarball.write_bytes(tarball.read_bytes() + b"\0")
    assert_refused(groundctl(monkeypatch, capsys, "pins", "install", "--dir", str(repo), "--cli",
                             str(tmp_path / "cli-2"), "--platform", LINUX_AMD64), 4,
                   "but the lock records", "Nothing was installed")
    assert not (tmp_path / "cli-2").exists() and not list(tmp_path.glob(".cli-2.*"))
    assert_refused(groundctl(monkeypatch, capsys, "pins", "install", "--dir", str(repo)), 2, "--cli FOLDER",
                   "--plugins")


# -- bad input: exit 2 or 4, the file and the fix named, nothing half-written --------------------------------

def _files(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file()}


def _refused_and_untouched(monkeypatch, capsys, repo, url, code, *needles):
    before = _files(repo)  # the lock and every Flux copy as they were, and no temporary file left
    assert_refused(update(monkeypatch, capsys, repo, url), code, *needles)
    assert _files(repo) == before


def test_a_checksums_file_without_the_needed_entry(monkeypatch, capsys, repo, mirror):
    path = _aws_checksums(mirror)
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines() if "linux-amd64" not in line))
    _refused_and_untouched(monkeypatch, capsys, repo, mirror.url, 4, f"pulumi-aws_{AWS.version}_checksums.txt has no "
                           f"line for pulumi-resource-aws-v{AWS.version}-linux-amd64.tar.gz",
                           "check the version and platform")


@pytest.mark.parametrize("content,needle", [
    (b"\x1b[2J" + b"0" * 64 + b"  x.tar.gz\n", "holds a control or non-ASCII byte (0x1b at offset 0)"),
    (b"<!DOCTYPE html><html><body>Sign in to Artifactory</body></html>", "answered an HTML page"),
    (b"not a checksums line\n", "line 1 is not '<sha256> <file name>'"),
])
def test_a_checksums_file_that_is_not_one(monkeypatch, capsys, repo, mirror, content, needle):
    _aws_checksums(mirror).write_bytes(content)
    _refused_and_untouched(monkeypatch, capsys, repo, mirror.url, 4, f"pulumi-aws_{AWS.version}_checksums.txt", needle)


def test_a_checksums_file_of_100_mb_is_refused_unread(monkeypatch, capsys, repo, mirror):
    path = _aws_checksums(mirror)
    with path.open("r+b") as fh:
        fh.truncate(100 << 20)  # sparse: 100 MB served, none of it stored
    _refused_and_untouched(monkeypatch, capsys, repo, mirror.url, 4, f"pulumi-aws_{AWS.version}_checksums.txt",
                           "104,857,600 bytes, over the 262,145-byte limit")


def test_a_mirror_that_is_down(monkeypatch, capsys, repo):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    _refused_and_untouched(monkeypatch, capsys, repo, f"http://127.0.0.1:{port}", 4, "could not be read from "
                           f"http://127.0.0.1:{port}/", "cannot connect", "GROUNDCTL_RELEASE_MIRROR")


def test_a_mirror_url_that_is_not_one(monkeypatch, capsys, repo):
    _refused_and_untouched(monkeypatch, capsys, repo, "ftp://user:secret@mirror", 2, "GROUNDCTL_RELEASE_MIRROR",
                           "is not a base URL")


def test_a_slow_mirror_is_given_up_on_within_the_deadline():
    """A server that accepts and never answers, and one that drips a byte at a time: each read ends by its
    deadline (the CLI's is DEFAULT_DEADLINE_SECONDS a file, every attempt included)."""
    stop = threading.Event()

    class Drip(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/silent":
                stop.wait(60)
                return
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            while not stop.is_set():
                self.wfile.write(b"a")
                self.wfile.flush()
                stop.wait(0.2)

        def log_message(self, *args):
            pass

    with serving(Drip) as url:
        try:
            for path in ("/silent", "/drip"):
                started = time.monotonic()
                with pytest.raises(FetchProblem, match="deadline|timed out"):
                    fetch(f"{url}{path}", max_bytes=2 << 20, deadline=3)
                assert time.monotonic() - started < 30  # 3 s, plus slack for a loaded machine
        finally:
            stop.set()  # before the server's shutdown, which waits for its handlers


def test_a_slow_mirror_stops_the_update_by_its_deadline_and_writes_nothing(repo):
    """`pins update` as `groundctl init` calls it, over a fetch with a short deadline (the CLI's is
    DEFAULT_DEADLINE_SECONDS a file): a mirror that accepts and never answers stops it, naming the mirror."""
    from functools import partial

    from bootstrap.kit.errors import GroundctlError
    from bootstrap.pins.update import Sources
    from groundctl.pins import record_pins

    stop = threading.Event()

    class Silent(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            stop.wait(60)

        def log_message(self, *args):
            pass

    before = _files(repo)
    with serving(Silent) as url:
        try:
            started = time.monotonic()
            with pytest.raises(GroundctlError) as err:
                record_pins(repo, partial(fetch, deadline=3), Sources(url), image=False)
            assert time.monotonic() - started < 30  # 3 s, plus slack for a loaded machine
        finally:
            stop.set()
    assert "deadline" in err.value.message and "GROUNDCTL_RELEASE_MIRROR" in err.value.message
    assert f"The lock {repo / LOCK_FILE} was left as it was" in err.value.message and _files(repo) == before


def _pulumi_stand_in(tmp_path) -> tuple[dict, Path]:
    """A `pulumi` on PATH that writes down every call (the install under test must never reach it)."""
    bin_dir, calls = tmp_path / "pulumi-bin", tmp_path / "pulumi-calls"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\n')
    (bin_dir / "pulumi").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "PULUMI_HOME": str(tmp_path / "home")}, calls


@pytest.mark.parametrize("served,needle", [
    (lambda body: body + b"\0", "but the lock records"),  # a tarball whose digest differs
    (lambda body: b"<!DOCTYPE html><html><body>Sign in</body></html>", "answered an HTML page"),
])
def test_a_download_that_is_not_the_locked_file_installs_nothing(monkeypatch, capsys, repo, mirror, tmp_path,
                                                                 served, needle):
    """The last plugin's download differs: neither the CLI nor the plugins before it are installed."""
    assert update(monkeypatch, capsys, repo, mirror.url)[0] == 0
    last = max(versions.PROVIDER_PLUGINS, key=lambda r: r.name)
    tarball = mirror.mirror.file(Want(plugin_name(last.name), last.version, LINUX_AMD64))
    tarball.write_bytes(served(tarball.read_bytes()))
    env, calls = _pulumi_stand_in(tmp_path)
    assert_refused(groundctl(monkeypatch, capsys, "pins", "install", "--dir", str(repo), "--platform", LINUX_AMD64,
                             "--cli", str(tmp_path / "cli"), "--plugins", env=env), 4,
                   tarball.name, needle, "Nothing was installed")
    assert not calls.exists() and not (tmp_path / "cli").exists() and not (tmp_path / "home").exists()


@pytest.mark.parametrize("edit,needle", [
    (lambda t: re.sub(r'"sha256": "([0-9a-f]{12})[0-9a-f]{52}"', r'"sha256": "\1"', t, count=1),
     "is not 64 lowercase hex digits"),  # a short digest
    (lambda t: t.replace('"name": "pulumi"', '"name": "terraform"', 1),
     "'terraform' is not an artifact groundctl installs"),
])
def test_a_hand_edited_lock(monkeypatch, capsys, repo, mirror, edit, needle):
    assert update(monkeypatch, capsys, repo, mirror.url)[0] == 0
    (repo / LOCK_FILE).write_text(edit((repo / LOCK_FILE).read_text()))
    for args in (["pins", "check", "--dir", str(repo)], ["ci", "init", "--dir", str(repo), "--install", "."]):
        assert_refused(groundctl(monkeypatch, capsys, *args), 2, f"{repo / LOCK_FILE} is not usable", needle,
                       f"git checkout -- {LOCK_FILE}", "never edit it by hand")
    assert not (repo / ".github").exists()
    _refused_and_untouched(monkeypatch, capsys, repo, mirror.url, 2, needle)


def test_a_lock_older_than_the_installed_sdks(monkeypatch, capsys, repo, mirror):
    assert update(monkeypatch, capsys, repo, mirror.url)[0] == 0
    lock = repo / LOCK_FILE
    lock.write_text(lock.read_text().replace(f'"version": "{AWS.version}"', '"version": "7.40.0"'))
    for args in (["pins", "check", "--dir", str(repo)], ["ci", "init", "--dir", str(repo), "--install", "."],
                 ["pins", "install", "--dir", str(repo), "--plugins"]):
        assert_refused(groundctl(monkeypatch, capsys, *args), 4, f"{lock} does not record pulumi-resource-aws "
                       f"{AWS.version} for linux-amd64 (pulumi-resource-aws-v{AWS.version}-linux-amd64.tar.gz) (the "
                       "lock holds 7.40.0)", "Run `groundctl pins update` in the repository")
    assert not (repo / ".github").exists()
