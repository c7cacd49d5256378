"""The base image's digest, read as `groundctl pins update` reads it from Docker Hub: through a real OCI registry
(go-containerregistry's cmd/registry, built by hand: no test builds it) holding an image index pushed with its
cmd/crane, behind a small token endpoint of the tests' own that asks for distribution's anonymous bearer-token
exchange, as Docker Hub does (the registry itself has no authentication). The digest recorded is crane's."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from bootstrap.engine.versions import BASE_IMAGE
from bootstrap.pins.lockfile import LOCK_FILE, parse
from tests.conftest import REPO
from tests.test_cli_errors import assert_refused, groundctl

BUILD = ("go install github.com/google/go-containerregistry/cmd/registry@v0.21.5 "
         "github.com/google/go-containerregistry/cmd/crane@v0.21.5")


def _tool(name: str):
    found = shutil.which(name) or str(Path.home() / "go" / "bin" / name)
    return found if os.access(found, os.X_OK) else None


REGISTRY, CRANE = _tool("registry"), _tool("crane")
pytestmark = [pytest.mark.oci, pytest.mark.skipif(
    REGISTRY is None or CRANE is None, reason=f"needs go-containerregistry's registry and crane: build them by hand "
                                              f"with `{BUILD}`")]
TOKEN = "anonymous-token-Zq81"
SERVICE = "test-registry"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """A real registry on a free port holding python:<tag> as an image index; (base URL, crane's digest)."""
    folder = tmp_path_factory.mktemp("oci")
    port = _free_port()
    server = subprocess.Popen([REGISTRY, "-port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/v2/", timeout=5).close()
                break
            except (urllib.error.URLError, OSError):
                assert time.monotonic() < deadline and server.poll() is None, "the registry did not start"
                time.sleep(0.2)
        layer = folder / "layer.tar"
        (folder / "hello").write_text("a small layer\n")
        with tarfile.open(layer, "w") as tar:
            tar.add(folder / "hello", arcname="hello")
        name, tag = BASE_IMAGE.split(":")
        image, index = f"127.0.0.1:{port}/library/{name}:single", f"127.0.0.1:{port}/library/{name}:{tag}"
        for argv in ([CRANE, "append", "--insecure", "-f", str(layer), "-t", image],
                     [CRANE, "index", "append", "--insecure", "-m", image, "-t", index]):
            subprocess.run(argv, check=True, capture_output=True, timeout=120, env={**os.environ, "HOME": str(folder)})
        digest = subprocess.run([CRANE, "digest", "--insecure", index], check=True, capture_output=True, text=True,
                                timeout=60).stdout.strip()
        yield base, digest
    finally:
        server.kill()
        server.wait(timeout=60)


class TokenFront(http.server.BaseHTTPRequestHandler):
    """Docker Hub's front as distribution's token specification describes it: /v2/… without the bearer token is
    a 401 naming the realm, service and scope; /token hands out the anonymous token for them; with it, the
    request goes on to the registry behind."""

    behind = ""
    realm = ""
    token_answer = {"token": TOKEN}
    seen: list = []

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/token":
            query = dict(urllib.parse.parse_qsl(url.query))
            self.seen.append(("token", query))
            ok = query.get("service") == SERVICE and query.get("scope") == "repository:library/python:pull"
            return self._answer(200 if ok else 400, json.dumps(self.token_answer if ok else {}).encode(),
                                {"Content-Type": "application/json"})
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.seen.append(("challenge", url.path))
            return self._answer(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {
                "WWW-Authenticate": f'Bearer realm="{self.realm}",service="{SERVICE}",'
                                    'scope="repository:library/python:pull"'})
        request = urllib.request.Request(self.behind + self.path, headers={"Accept": self.headers.get("Accept", "")})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
            headers = {k: v for k, v in response.headers.items() if k.lower() in ("content-type",
                                                                                   "docker-content-digest")}
        self.seen.append(("manifest", url.path))
        self._answer(200, body, headers)

    def _answer(self, code: int, body: bytes, headers: dict):
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def front(registry):
    base, digest = registry
    handler = type("Front", (TokenFront,), {"behind": base, "seen": [], "token_answer": {"token": TOKEN}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}"
    handler.realm = f"{url}/token"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield url, digest, handler
    finally:
        server.shutdown()
        server.server_close()


def _update(monkeypatch, capsys, repo: Path, registry_url: str, mirror_url: str):
    return groundctl(monkeypatch, capsys, "pins", "update", "--dir", str(repo), "--no-verify-signatures",
                     "--registry-mirror", registry_url, env={"GROUNDCTL_RELEASE_MIRROR": mirror_url})


def test_the_base_image_digest_is_read_through_the_anonymous_token_exchange(monkeypatch, capsys, tmp_path, front,
                                                                           release_mirror):
    url, digest, handler = front
    repo = tmp_path / "infra"
    shutil.copytree(REPO / "environments", repo / "environments")
    code, out, err = _update(monkeypatch, capsys, repo, url, release_mirror.url)
    assert code == 0, err
    base = next(e for e in parse((repo / LOCK_FILE).read_bytes()) if e.name == "base-image")
    assert f"sha256:{base.sha256}" == digest and base.version == BASE_IMAGE  # crane's digest of the index
    assert base.url == f"{url}/v2/library/python/manifests/{BASE_IMAGE.split(':')[1]}"  # the URL actually read
    assert [k for k, _ in handler.seen] == ["challenge", "token", "manifest"]
    code, out, err = groundctl(monkeypatch, capsys, "pins", "base-image", "--dir", str(repo))
    assert code == 0 and out.strip() == digest, err


def test_a_token_endpoint_that_answers_no_token_stops_the_update(monkeypatch, capsys, tmp_path, front,
                                                                release_mirror):
    url, _, handler = front
    handler.token_answer = {"detail": "no"}
    repo = tmp_path / "infra"
    shutil.copytree(REPO / "environments", repo / "environments")
    assert_refused(_update(monkeypatch, capsys, repo, url, release_mirror.url), 4,
                   f"the base image {BASE_IMAGE} could not be read", "did not answer a token")
    assert not (repo / LOCK_FILE).exists()


def test_a_registry_without_authentication_is_read_directly(monkeypatch, capsys, tmp_path, registry, release_mirror):
    base, digest = registry
    repo = tmp_path / "infra"
    shutil.copytree(REPO / "environments", repo / "environments")
    assert _update(monkeypatch, capsys, repo, base, release_mirror.url)[0] == 0
    entry = next(e for e in parse((repo / LOCK_FILE).read_bytes()) if e.name == "base-image")
    assert f"sha256:{entry.sha256}" == digest
