"""The command line this process runs, for a message that asks the operator to run it again.

"Re-run" alone leaves the operator to reconstruct flags and paths after a failure; naming the exact
command (re-run `groundctl recover dev network --yes`) makes the next step one paste.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Optional

_LONGEST = 400  # a command line longer than this is not quoted back; "re-run the same command" says it


def command_line(argv: Optional[list[str]] = None) -> Optional[str]:
    """`groundctl <its arguments>` when this process is groundctl run as a program; None in a library or a test,
    or when an argument holds a character that is not printable (it would not paste back the same)."""
    argv = sys.argv if argv is None else argv
    if not argv:
        return None
    prog = argv[0].replace(os.sep, "/")
    if os.path.basename(prog) != "groundctl" and not prog.endswith("groundctl/__main__.py"):
        return None
    if any(not arg.isprintable() for arg in argv[1:]):
        return None
    line = shlex.join(["groundctl", *argv[1:]])
    return line if len(line) <= _LONGEST else None


def rerun(argv: Optional[list[str]] = None) -> str:
    """'re-run `groundctl …`' with this process's own command line, or 're-run the same command'."""
    line = command_line(argv)
    return f"re-run `{line}`" if line else "re-run the same command"
