"""The image's Dockerfile, written into the adopter's repository (`groundctl pins dockerfile`): the image is built
from that repository, which holds what an adopter has (the committed wheel, the hashed requirements file naming
it, the pins lock, the specs), never from groundctl's source tree. The template ships in the wheel
(image/groundctl.Dockerfile); its install step is the workflows' (bootstrap.ci.requirements.install_run), its base
image the versions table's, its base digest, CLI and plugins the lock's at build time. Pure but for reading the
template."""

from __future__ import annotations

import re
from importlib.resources import files
from typing import Optional

DOCKERFILE = "groundctl.Dockerfile"
_PLAIN = re.compile(r"[A-Za-z0-9._/-]{1,200}")


def template() -> str:
    return files("bootstrap.pins").joinpath("image", DOCKERFILE).read_text(encoding="utf-8")


def render(requirements: str, wheel: Optional[str], install: str, base_image: str) -> str:
    """The Dockerfile for a repository whose hashed requirements file is `requirements` (a repository path),
    whose committed groundctl wheel is `wheel` (a repository path; None when the file names one from an index or
    URL), installed with the shell command `install` (reading the file named by $GROUNDCTL_INSTALL), from
    `base_image` (a reference without digest: the build takes the lock's)."""
    for path in (requirements, wheel or "x"):
        if not _PLAIN.fullmatch(path) or path.startswith("/") or ".." in path.split("/"):
            raise ValueError(f"{path!r} is not a plain path inside the repository")
    copy = f"COPY {wheel} /src/{wheel}" if wheel else "# (the requirements file names groundctl's wheel by URL)"
    return (template().replace("@REQUIREMENTS@", requirements).replace("@COPY_WHEEL@", copy)
            .replace("@INSTALL@", install).replace("@BASE_IMAGE@", base_image))
