"""Where Pulumi runs a layer: a private folder of this run's, never the program's own.

Pulumi keeps a stack's settings file (`Pulumi.<stack>.yaml`: config, secrets provider, data key or salt)
beside the project file it was given, and `config set-all` writes it there. The programs may sit in a
read-only install (the fleet image), and a file an earlier run left must not change what a new run does,
so every engine gets a fresh private folder holding, per layer, a copy of the layer's project file whose
`main` is the program's own folder: Pulumi then runs the program from there, its working directory being
that folder (pkg/engine/project.go getPwdMain: an absolute `main` is used as is, a folder becomes the pwd),
while the settings file lands in the private folder and is gone with it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Mapping

import yaml

from bootstrap.kit.errors import BadInput

# The `pip` toolchain runs PULUMI_PYTHON_CMD (groundctl's interpreter) with no virtualenv of its own
# (sdk/python/toolchain/pip.go newPip, CommandPath); left on `auto`, Pulumi >= 3.230 looks upward from the
# program for uv.lock/poetry.lock and, finding one, runs uv or poetry instead (sdk/python/toolchain/toolchain.go
# ResolveToolchain).
PINNED_TOOLCHAIN = "pip"


def run_project(project: Mapping[str, Any], program_dir: Path) -> dict[str, Any]:
    """The project document Pulumi is given for one run of the program in `program_dir`. Pure."""
    runtime = project.get("runtime")
    name = runtime.get("name") if isinstance(runtime, Mapping) else runtime
    if name != "python":
        raise BadInput(f"The Pulumi program at {program_dir} declares runtime {name!r}; groundctl's layers are "
                       "Python programs (runtime: python). Restore the layer's Pulumi.yaml.")
    options = dict(runtime.get("options") or {}) if isinstance(runtime, Mapping) else {}
    options.pop("virtualenv", None)  # the programs run in groundctl's own environment
    options["toolchain"] = PINNED_TOOLCHAIN
    main = project.get("main")
    out = dict(project)
    out["main"] = str((program_dir / main).resolve() if isinstance(main, str) and main else program_dir.resolve())
    out["runtime"] = {"name": "python", "options": options}
    return out


class RunDir:
    """A private folder (mode 0700) for this run's per-layer project files and stack settings, removed
    when the run ends (or its owner is collected)."""

    def __init__(self) -> None:
        self._root: Path | None = None
        self._finalizer: weakref.finalize | None = None

    def layer_dir(self, layer: str, program_dir: Path) -> Path:
        """The folder Pulumi treats as the layer's project root in this run."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="groundctl-run-"))
            self._finalizer = weakref.finalize(self, shutil.rmtree, str(self._root), True)
        folder = self._root / layer
        project_file = folder / "Pulumi.yaml"
        if not project_file.is_file():
            source = program_dir / "Pulumi.yaml"
            try:
                project = yaml.safe_load(source.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as exc:
                raise BadInput(f"The Pulumi project file {source} cannot be read ({type(exc).__name__}). "
                               "Restore the layer's Pulumi.yaml and run the command again.") from None
            if not isinstance(project, Mapping):
                raise BadInput(f"The Pulumi project file {source} is not a YAML mapping. Restore it.")
            folder.mkdir(mode=0o700, exist_ok=True)
            project_file.write_text(yaml.safe_dump(run_project(project, program_dir), sort_keys=False),
                                    encoding="utf-8")
        return folder

    def stack_settings(self, layer: str, stack: str) -> Path | None:
        """This run's settings file of the layer's stack, when Pulumi has written one."""
        path = self._root / layer / f"Pulumi.{stack}.yaml" if self._root else None
        return path if path is not None and path.is_file() else None

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()


def write_secrets_provider(settings_file: Path, provider: str) -> None:
    """Declare the provider a stack's next secret will be encrypted with, in a settings file of this run
    that holds none yet (Pulumi then makes the data key: pkg/cmd/pulumi/stack/secrets.go)."""
    fd = os.open(settings_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump({"secretsprovider": provider}, fh)


def write_plain_config(settings_file: Path, values: Mapping[str, str]) -> None:
    """Set plain config values in a stack's settings file of this run as `pulumi config set-all --plaintext`
    does (`config: {KEY: string}`), keeping what else it holds (the secrets provider, its salt or data key,
    secret values the CLI set). Written whole to a private file, then moved into place."""
    bad = [key for key, value in values.items() if not isinstance(value, str) or ":" not in key]
    if bad:  # the spec's config is namespaced strings (bootstrap/spec/stack_config.py)
        raise ValueError(f"plain config must be namespaced strings: {', '.join(sorted(bad))}")
    data: Any = yaml.safe_load(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else None
    data = dict(data) if isinstance(data, Mapping) else {}
    config = data.get("config")
    data["config"] = {**(config if isinstance(config, Mapping) else {}), **values}
    part = settings_file.with_name(settings_file.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh, sort_keys=False)
    os.replace(part, settings_file)
