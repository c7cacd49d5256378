"""What the tests ask of a process they did not start themselves (a Pulumi child's plugin): Linux /proc."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, ended but not yet reaped, is not alive)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
