"""What a bench needs on the machine before it can measure anything, and how it stops when that is absent.

A bench whose prerequisite is missing has measured nothing, so it neither passes nor misses: it exits 2 and
names what is missing on stderr. Exit 0 (PASS) would let whoever runs the benches take a figure nobody measured
as met; exit 1 (MISS) would charge groundctl with the machine's gap. Nothing here builds or downloads a binary.
"""

from __future__ import annotations

import shutil
import sys
from typing import Optional

CANNOT_RUN = 2
# The Pulumi CLI and the two hosts beside it that the engine tier's Python programs (dynamic providers) run.
ENGINE = ("pulumi", "pulumi-language-python", "pulumi-resource-pulumi-python")


def missing_engine(bench: str, path: Optional[str] = None) -> Optional[str]:
    """The one paragraph saying why `bench` cannot run, or None when all of ENGINE is on `path` (default: PATH)."""
    absent = [name for name in ENGINE if shutil.which(name, path=path) is None]
    if not absent:
        return None
    return (f"{bench} cannot run: {', '.join(absent)} not on PATH. It needs the Pulumi CLI and its Python hosts "
            "(on this project's machines: export PATH=/root/engine/bin:$PATH; elsewhere see "
            "https://www.pulumi.com/docs/install/), then run it again. It builds and downloads nothing.")


def require_engine(bench: str) -> None:
    """Stop the bench with exit 2 and that paragraph on stderr unless the Pulumi CLI and its hosts are on PATH."""
    why = missing_engine(bench)
    if why:
        print(why, file=sys.stderr)
        sys.exit(CANNOT_RUN)
