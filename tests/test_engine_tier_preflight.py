"""Engine tier: nothing is written before the engine is known to be able to run what comes after.

- A `pulumi` on PATH older than PULUMI_CLI_MIN: groundctl says which version it found and which it needs
  (exit 4), before the state bucket exists. The CLI here is a stand-in script that prints a version, so
  this test needs no real CLI.
- A fresh copy of the repository with the real CLI but no provider plugin (an empty private PULUMI_HOME,
  ambient plugins ignored): `up local` names the aws plugin, its version and the checked install command,
  and writes nothing (no bucket, no stack file beside the programs).
- The workflows' plugin step run with the real CLI, its downloads answered from tarballs made here over a
  loopback HTTP server (PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES): it installs what the engine check looks for, and
  a download that is not the recorded one fails it with Pulumi's own checksum error.
- A recovery whose layer program now needs a plugin that is missing stops before its restore.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, requires_pulumi
from tests.engine_programs.tier import tier  # noqa: F401 - fixture

pytestmark = pytest.mark.engine

COPY_IGNORE = shutil.ignore_patterns(".git", ".groundctl", "__pycache__", "*.egg-info", ".pytest_cache",
                                     "Pulumi.*.yaml")


def fresh_copy(tmp_path: Path, bucket: str) -> Path:
    """The repository as a second operator would check it out, its `local` spec naming `bucket`."""
    copy = tmp_path / "checkout"
    shutil.copytree(REPO, copy, ignore=COPY_IGNORE)
    spec = copy / "environments" / "local.yaml"
    data = yaml.safe_load(spec.read_text())
    data["backend"]["bucket"] = bucket
    spec.write_text(yaml.safe_dump(data))
    return copy


def buckets(endpoint: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                      aws_secret_access_key="testing")
    return [b["Name"] for b in s3.list_buckets()["Buckets"]]


def groundctl(cwd: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groundctl", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)


def base_env(path: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GROUNDCTL_ENDPOINT_URL", "PYTHONPATH")}
    return {**env, "PATH": path, "PULUMI_HOME": str(home), "PULUMI_CONFIG_PASSPHRASE": "engine-tier-preflight",
            "PULUMI_SKIP_UPDATE_CHECK": "true"}


def test_an_old_pulumi_cli_is_refused_with_both_versions_before_anything_is_written(tmp_path, emulator_endpoint):
    from bootstrap.engine.versions import PULUMI_CLI_MIN

    fake = tmp_path / "old-pulumi" / "pulumi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nif [ \"$1\" = version ]; then echo v3.200.0; exit 0; fi\n"
                    "echo \"error: unknown flag: $*\" >&2; exit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    bucket = f"gl-{uuid.uuid4().hex[:16]}"
    copy = fresh_copy(tmp_path, bucket)
    env = base_env(os.pathsep.join([str(fake.parent), os.path.dirname(sys.executable), "/usr/bin", "/bin"]),
                   tmp_path / "home")
    for args in (("up", "local", "--yes"), ("plan", "local"), ("drift", "local")):
        proc = groundctl(copy, env, *args, "--endpoint-url", emulator_endpoint)
        assert proc.returncode == 4, (args, proc.stderr)
        assert f"is v3.200.0, but groundctl needs v{PULUMI_CLI_MIN} or later" in proc.stderr, proc.stderr
        assert "unknown flag" not in proc.stderr.replace("reject as an unknown flag", "")
        assert "Traceback" not in proc.stderr
    assert bucket not in buckets(emulator_endpoint)
    assert not list((copy / "stacks").rglob("Pulumi.local.yaml"))


@requires_pulumi
def test_up_local_from_a_fresh_copy_without_provider_plugins_names_them_and_writes_nothing(tmp_path,
                                                                                           emulator_endpoint):
    from bootstrap.engine.plugins import sdk_plugin

    aws = sdk_plugin("pulumi_aws")
    bucket = f"gl-{uuid.uuid4().hex[:16]}"
    copy = fresh_copy(tmp_path, bucket)
    home = tmp_path / "empty-pulumi-home"
    env = {**base_env(os.pathsep.join([os.path.dirname(shutil.which("pulumi")), os.path.dirname(sys.executable),
                                       "/usr/bin", "/bin"]), home),
           "PULUMI_IGNORE_AMBIENT_PLUGINS": "true"}
    proc = groundctl(copy, env, "up", "local", "--yes", "--endpoint-url", emulator_endpoint)
    assert proc.returncode == 4, proc.stderr
    text = " ".join(proc.stderr.split())  # the console wraps the paragraph at the terminal's width
    assert f"the aws resource plugin v{aws.version}" in text and "backend and network and cluster layers" in text
    # The fresh copy has no pins lock: the command that records the plugin, then the checked install from it.
    assert "`groundctl pins update` in the repository" in text and "groundctl pins install --plugins" in text
    assert "Traceback" not in proc.stderr and "retry" not in proc.stderr.lower()
    assert bucket not in buckets(emulator_endpoint)
    assert not list((copy / "stacks").rglob("Pulumi.local.yaml")) and not home.joinpath("plugins").exists()


@requires_pulumi
def test_recover_stops_before_the_restore_when_the_layer_needs_a_missing_plugin(tier, tmp_path):
    from bootstrap.records.ledger import read_ledger

    assert tier.cli_json("up", "SPEC", "--layers", "network", "--yes")["outcome"] == "succeeded"
    tier.s3.delete_object(Bucket=tier.state_bucket, Key=tier.stack_key("network"))
    program = tier.stacks / "network" / "__main__.py"
    original = program.read_text()
    before = sorted((v.key, v.version_id, v.delete_marker) for v in tier.store.versions(""))
    serials = tier.ledger_serials("network")
    # The stand-in now imports the AWS SDK, so its layer needs the aws plugin the private PULUMI_HOME lacks.
    program.write_text("import pulumi_aws  # noqa: F401\n" + original)
    try:
        code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--json",
                                  env={"PULUMI_IGNORE_AMBIENT_PLUGINS": "true"})
    finally:
        program.write_text(original)
    assert code == 4, err
    phases = {p["phase"]: p for p in json.loads(out)["phases"]}
    assert phases["restore"]["status"] == "failed" and "Nothing was restored or written" in phases["restore"]["message"]
    assert "aws resource plugin" in phases["restore"]["message"]
    assert "groundctl pins install --plugins" in phases["restore"]["message"]
    assert sorted((v.key, v.version_id, v.delete_marker) for v in tier.store.versions("")) == before
    assert tier.ledger_serials("network") == serials
    assert [r.operation for r in read_ledger(tier.store, "network", tier.env_name).records] == ["up"]
    # With the plugin problem gone the same command restores the state.
    code, out, err = tier.cli("recover", "SPEC", "network", "--yes", "--json")
    assert json.loads(out)["phases"][4]["status"] == "achieved", err


GO = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)


@contextlib.contextmanager
def serving(folder: Path, tmp_path: Path, http2: bool = True):
    """A loopback server answering GETs from `folder`, for the length of the block: (base URL, the variables
    that make the CLI trust it). HTTP/2 over TLS as GitHub serves release downloads (a tiny Go server:
    tests/h2_file_server.go), or plain HTTP/1.1 (Python's)."""
    import functools
    import http.server
    import threading

    if not http2:
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.protocol_version = "HTTP/1.1"
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}", {}
        finally:
            server.shutdown()
            server.server_close()
        return
    if GO is None:
        pytest.skip("needs the Go toolchain to build the HTTP/2 test server (tests/h2_file_server.go)")
    binary, cert = tmp_path / "h2-file-server", tmp_path / "h2-cert.pem"
    subprocess.run([GO, "build", "-o", str(binary), str(REPO / "tests" / "h2_file_server.go")], check=True,
                   capture_output=True, timeout=600, cwd=tmp_path,
                   env={**os.environ, "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": ""})
    server = subprocess.Popen([str(binary), str(folder), str(cert)], stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        assert port.isdigit(), "the HTTP/2 test server did not start"
        yield f"https://127.0.0.1:{port}", {"SSL_CERT_FILE": str(cert)}
    finally:
        server.kill()
        server.wait(timeout=60)


def _old_install(release_folder: Path, plugin: str, version: str, digest: str, home: Path, tmp_path: Path,
                 http2: bool) -> subprocess.CompletedProcess:
    """`pulumi plugin install resource <plugin> v<version> --exact --checksum <digest>`, what the workflows ran
    before the pins lock, with the real CLI, its download answered from `release_folder`."""
    with serving(release_folder, tmp_path, http2) as (url, trust):
        env = {**base_env(os.pathsep.join([os.path.dirname(shutil.which("pulumi")), "/usr/bin", "/bin"]), home),
               **trust,
               "PULUMI_PLUGIN_DOWNLOAD_URL_OVERRIDES": f"^github://api.github.com/pulumi/pulumi-{plugin}$={url}"}
        return subprocess.run(["pulumi", "plugin", "install", "resource", plugin, f"v{version}", "--exact",
                               "--checksum", digest], env=env, capture_output=True, text=True, timeout=300)


@requires_pulumi
def test_the_install_step_installs_with_the_real_cli_and_refuses_another_file(tmp_path):
    """The workflows' and the image's plugin step, `groundctl pins install --plugins`, with the real CLI on PATH and
    an empty PULUMI_HOME: each tarball from the local mirror, its sha256 checked against the lock, then `pulumi
    plugin install … --file … --reinstall`. The kubernetes plugin is the real binary when it is built."""
    from bootstrap.engine import plugins
    from bootstrap.engine.versions import PROVIDER_PLUGINS
    from bootstrap.kit.errors import EngineError
    from bootstrap.pins.artifacts import LINUX_AMD64, Want, plugin_name
    from tests.plugin_releases import real_plugin, served

    repo = tmp_path / "infra"
    shutil.copytree(REPO / "environments", repo / "environments")
    needs = {plugins.Plugin(r.name, r.version): [("any", plugins.PROGRAM)] for r in PROVIDER_PLUGINS}
    path = os.pathsep.join([os.path.dirname(shutil.which("pulumi")), os.path.dirname(sys.executable), "/usr/bin",
                            "/bin"])
    with served(tmp_path / "mirror") as releases:
        releases.lock(repo)
        done = groundctl(repo, {**base_env(path, tmp_path / "home"), "PYTHONPATH": str(REPO)}, "pins", "install",
                         "--plugins")
        assert done.returncode == 0, done.stderr
        installed = {"PULUMI_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
        plugins.require_plugins(needs, installed, LINUX_AMD64)
        kubernetes = next(r for r in PROVIDER_PLUGINS if r.name == "kubernetes")
        if real_plugin("kubernetes"):  # the installed plugin is the real one, and answers as a provider does
            binary = tmp_path / "home" / "plugins" / f"resource-kubernetes-v{kubernetes.version}" / \
                "pulumi-resource-kubernetes"
            assert binary.read_bytes() == real_plugin("kubernetes").read_bytes()
        aws = next(r for r in PROVIDER_PLUGINS if r.name == "aws")
        tarball = releases.mirror.file(Want(plugin_name("aws"), aws.version, LINUX_AMD64))
        tarball.write_bytes(tarball.read_bytes() + b"\0")
        done = groundctl(repo, {**base_env(path, tmp_path / "home-2"), "PYTHONPATH": str(REPO)}, "pins", "install",
                         "--plugins")
    assert done.returncode == 4 and "but the lock records" in done.stderr, done.stderr
    with pytest.raises(EngineError, match="the aws resource plugin"):
        plugins.require_plugins(needs, {"PULUMI_HOME": str(tmp_path / "home-2"), "PATH": "/usr/bin:/bin"},
                                LINUX_AMD64)


@requires_pulumi
def test_the_real_clis_checksum_refuses_the_recorded_file_over_http_1_1_and_checks_nothing_once_installed(tmp_path):
    """Why installs no longer use `pulumi plugin install --checksum`. Pulumi's checksum reader leaves out the bytes
    of a read that also returns EOF (sdk/go/common/workspace/plugins.go:889-900 at v3.259.0), which Go's HTTP/1.1
    client does for the last read of every body with a Content-Length, so the right digest is refused; and once
    that version is installed it returns before any download (pkg/cmd/pulumi/plugin/plugin_install.go:287-294), so
    even an all-zero checksum exits 0. If this test fails, Pulumi changed: say so in the README."""
    import hashlib

    from bootstrap.engine.versions import PROVIDER_PLUGINS
    from bootstrap.pins.artifacts import LINUX_AMD64, Want, plugin_name
    from tests.plugin_releases import build_mirror

    aws = next(r for r in PROVIDER_PLUGINS if r.name == "aws")
    mirror = build_mirror(tmp_path / "mirror", real=())
    tarball = mirror.file(Want(plugin_name("aws"), aws.version, LINUX_AMD64))
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(tarball, flat / tarball.name)
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    done = _old_install(flat, "aws", aws.version, digest, tmp_path / "home", tmp_path, http2=False)
    assert done.returncode != 0 and "invalid checksum, expected" in done.stderr, done.stderr
    env = base_env(os.pathsep.join([os.path.dirname(shutil.which("pulumi")), "/usr/bin", "/bin"]), tmp_path / "home")
    done = subprocess.run(["pulumi", "plugin", "install", "resource", "aws", f"v{aws.version}", "--file", str(tarball),
                           "--reinstall"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    done = _old_install(flat, "aws", aws.version, "0" * 64, tmp_path / "home", tmp_path, http2=False)
    assert done.returncode == 0, done.stderr  # nothing was checked
