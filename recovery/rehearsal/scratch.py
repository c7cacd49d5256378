"""The scratch backend: a Pulumi DIY backend in a private folder of this run (`file://`), never the stack's.

Laid out as Pulumi's project mode lays out a bucket (`.pulumi/meta.yaml` version 1, `.pulumi/stacks/<project>/
<stack>.json`), so a restored state keeps its project and stack names, its resources' URNs stay its own, and
the StackReferences of the layers above resolve here. A state is placed as a recovery places it: its bytes
(decompressed), not re-encoded, its secrets still encrypted with their own provider. The folder (mode 0700)
goes when the run ends.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from bootstrap.records import layout

META = "version: 1\n"  # project mode (pkg/backend/diy/meta.go)


class ScratchBackend:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="groundctl-rehearse-"))
        (self.root / layout.PULUMI).mkdir(mode=0o700)
        self._write(self.root / layout.PULUMI / "meta.yaml", META.encode())

    @property
    def url(self) -> str:
        return self.root.as_uri()

    def place(self, project: str, stack: str, state: bytes) -> Path:
        """Make `state` (a checkpoint's plain JSON) the current state of organization/<project>/<stack> here."""
        path = self.root / layout.stack_key(project, stack)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._write(path, state)
        return path

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "ScratchBackend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
