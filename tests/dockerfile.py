"""The Dockerfile an adopter's repository holds: what `groundctl pins dockerfile` writes there for a repository
pinning groundctl as the README says (tests/ci_workflow.py's committed wheel and hashed requirements file, in
pip-compile's `file:` URL form from another machine, which the image's install step points at the committed
wheel as the workflows' does)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.ci_workflow import WHEEL, WHEEL_SHA256, pin_groundctl

# pip-compile names a local wheel by the absolute file: URL of the machine that compiled.
REQUIREMENTS = (f"groundctl @ file:///home/alice/infra/{WHEEL} \\\n    --hash=sha256:{WHEEL_SHA256}\n"
                f"boto3==1.35.0 \\\n    --hash=sha256:{'2' * 64}\n")


def adopter_repository(root: Path) -> Path:
    """A repository at `root` with the example specs and groundctl pinned by its committed wheel."""
    import shutil

    from tests.conftest import REPO

    shutil.copytree(REPO / "environments", root / "environments")
    pin_groundctl(root, REQUIREMENTS)
    return root


def shipped_dockerfile() -> str:
    """The Dockerfile `groundctl pins dockerfile` writes for such a repository (the command's own rendering)."""
    from bootstrap.ci.requirements import install_run
    from bootstrap.ci.workflows import DEFAULT_REQUIREMENTS
    from bootstrap.engine.versions import BASE_IMAGE
    from bootstrap.pins.dockerfile import render

    return render(DEFAULT_REQUIREMENTS, WHEEL, install_run(DEFAULT_REQUIREMENTS, str(Path(WHEEL).parent)), BASE_IMAGE)


def instructions(text: str) -> list[str]:
    """Each instruction on one line (continuations joined), comments left out."""
    joined = re.sub(r"\s*\\\n\s*", " ", text)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
