"""A local release mirror in the publishers' exact formats, served over HTTP for `groundctl pins update` and the
installs: GitHub's release paths (<owner>/<repo>/releases/download/v<version>/<file>), pulumi/pulumi's CLI
tarball (pulumi/<binaries>) and `pulumi-<v>-checksums.txt`, each provider's `pulumi-resource-<name>-v<v>-<os>-
<arch>.tar.gz` and `pulumi-<name>_<v>_checksums.txt`, Flux's install.yaml and `flux_<v>_checksums.txt` (with a
.sig and .pem beside it that only a stand-in cosign accepts: Sigstore's keyless signatures need its servers).
Checksums lines are `sha256sum`'s, as goreleaser writes them. Binaries: a plugin's is the real one found on PATH
when `real` names it (the kubernetes plugin built by hand), else a stand-in that says so and fails; the CLI's are
the real ones given."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import http.server
import io
import tarfile
from pathlib import Path
from typing import Iterator, Mapping, Optional

from bootstrap.pins.artifacts import ANY, CLI, FLUX, Want, plugin_name
from tests.local_http import serving

STAND_IN_PLUGIN = "stand-in pulumi-resource-{name} v{version}: not a real provider"


def tarball(members: Mapping[str, bytes]) -> bytes:
    """A gzip tarball of `members` (path → bytes, mode 0755), byte-for-byte the same on every call. The fastest
    level: the real kubernetes plugin is ~320 MB, 7 s at level 1 against 45 s at gzip's default of 9."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in sorted(members.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=1, mtime=0)


def stand_in_plugin(name: str, version: str) -> bytes:
    return f'#!/bin/sh\necho "{STAND_IN_PLUGIN.format(name=name, version=version)}" >&2\nexit 1\n'.encode()


class Mirror:
    """Release files laid out as GitHub serves them under `root`; `serve()` answers them over HTTP."""

    def __init__(self, root: Path):
        self.root = root
        self.checksums: dict[Path, dict[str, str]] = {}

    def _put(self, want: Want, data: bytes, listed: bool = True) -> Path:
        folder = self.root / want.repository / "releases" / "download" / f"v{want.version}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / want.file
        path.write_bytes(data)
        if listed:
            self.checksums.setdefault(folder / want.checksums_file, {})[want.file] = hashlib.sha256(data).hexdigest()
        self._write_checksums()
        return path

    def _write_checksums(self) -> None:
        for path, lines in self.checksums.items():
            path.write_text("".join(f"{sha}  {name}\n" for name, sha in sorted(lines.items())))
            if path.name.startswith("flux_"):
                Path(f"{path}.sig").write_text("c3RhbmQtaW4gc2lnbmF0dXJl\n")
                Path(f"{path}.pem").write_text("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n")

    def add_cli(self, version: str, platform: str, binaries: Mapping[str, bytes]) -> Path:
        return self._put(Want(CLI, version, platform), tarball({f"pulumi/{n}": b for n, b in binaries.items()}))

    def add_plugin(self, name: str, version: str, platform: str, binary: Optional[bytes] = None) -> Path:
        data = tarball({f"pulumi-resource-{name}": binary or stand_in_plugin(name, version)})
        return self._put(Want(plugin_name(name), version, platform), data)

    def add_flux(self, version: str, install_yaml: bytes) -> Path:
        return self._put(Want(FLUX, version, ANY), install_yaml)

    def file(self, want: Want) -> Path:
        return self.root / want.repository / "releases" / "download" / f"v{want.version}" / want.file

    @contextlib.contextmanager
    def serve(self, handler_class=None) -> Iterator[str]:
        """The mirror's base URL (http://127.0.0.1:<free port>) while the context lasts."""
        root = str(self.root)

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=root, **kwargs)

            def log_message(self, *args):
                pass

        with serving(handler_class or Handler, quiet_errors=True) as url:
            yield url
