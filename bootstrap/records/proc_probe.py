"""What this host shows about itself and about a pid: the facts `bootstrap.records.liveness` judges.

Read from Linux's /proc: the boot id (/proc/sys/kernel/random/boot_id), the pid namespace (the inode of
/proc/self/ns/pid), and when a process started (field 22 of /proc/<pid>/stat, clock ticks after boot, set
against /proc/uptime and the wall clock now). Where something cannot be read (no /proc, hidepid) it is None,
which proves nothing dead. Everything read is bounded and checked: /proc can be a bind mount of anything.
"""

from __future__ import annotations

import os
import re
import socket
import time
from pathlib import Path
from typing import Callable, Optional

from bootstrap.records.liveness import GONE, Place, Process

PROC = Path("/proc")
BOOT_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_MAX_READ = 4096  # /proc/<pid>/stat is one line of about 300 bytes
MAX_NS_INODE = (1 << 32) - 1  # namespace inodes are 32-bit (fs/nsfs.c)


def _small(path: Path) -> Optional[str]:
    try:
        with open(path, "rb") as fh:
            return fh.read(_MAX_READ).decode("ascii", "replace")
    except OSError:
        return None


def boot_id(proc: Path = PROC) -> Optional[str]:
    raw = _small(proc / "sys/kernel/random/boot_id")
    value = raw.strip() if raw else ""
    return value if BOOT_ID.fullmatch(value) else None


def pid_namespace(proc: Path = PROC) -> Optional[int]:
    try:
        inode = os.stat(proc / "self/ns/pid").st_ino
    except OSError:
        return None
    return inode if 0 < inode <= MAX_NS_INODE else None


def here(host: Optional[str] = None, proc: Path = PROC) -> Place:
    """This process's place: host name (as Pulumi and groundctl record it), boot and pid namespace."""
    return Place(host or socket.gethostname(), boot_id(proc), pid_namespace(proc))


def _signal_zero(pid: int) -> Optional[bool]:
    """Whether a process with this pid exists (signal 0 probes without sending); None when it cannot be asked."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, it is just not ours
    except (OSError, OverflowError, ValueError):
        return None
    return True


def _started(pid: int, proc: Path, now: float) -> tuple[Optional[str], Optional[float]]:
    """(state letter, start time in epoch seconds) from /proc/<pid>/stat, or (None, None)."""
    stat, uptime = _small(proc / str(pid) / "stat"), _small(proc / "uptime")
    if not stat or not uptime or ")" not in stat:
        return None, None
    # The command name (field 2) may hold spaces and parentheses: the fields after the last ')' are fixed.
    rest = stat.rsplit(")", 1)[1].split()
    try:
        state, ticks, up = rest[0], int(rest[19]), float(uptime.split()[0])
        hz = os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError):
        return None, None
    if hz <= 0 or ticks < 0 or not 0 <= ticks / hz <= up + 1:
        return None, None
    return state, now - (up - ticks / hz)


def process(pid: int, *, proc: Path = PROC, clock: Callable[[], float] = time.time) -> Process:
    """Whether a process runs at `pid` on this host, and since when."""
    if pid <= 0 or _signal_zero(pid) is False:
        return GONE
    state, started = _started(pid, proc, clock())
    if state in ("Z", "X", "x"):
        return GONE  # exited, not yet reaped by its parent
    if started is None and (proc / "self").exists() and _signal_zero(pid) is False:
        return GONE  # exited between the two looks
    return Process(True, started)
