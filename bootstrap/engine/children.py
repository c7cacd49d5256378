"""Every Pulumi process groundctl starts, and how an interrupted groundctl ends it.

Each runs in a process group of its own, so that groundctl alone decides what it is told: a SIGTERM sent to
groundctl alone (an evicted pod's main process, `kill <pid>`) reaches no child, and a terminal's Ctrl-C
reaches groundctl's group only. On SIGINT or SIGTERM groundctl sends SIGINT to each child's group, which is
what Pulumi's cancellation waits for (pkg/backend/cancellation_scope.go:63-118: the first SIGINT or SIGTERM
cancels, finishing the steps in flight and releasing the stack's lock; a second terminates), waits
GRACE_SECONDS for it to end, then kills the group and every process under the child (Pulumi starts its
plugins in process groups of their own: sdk/go/common/resource/plugin/plugin.go:598, cmdutil/child_unix.go).
The command then unwinds (its scratch folder removed, its environment lock released) and exits with 130:
within INTERRUPTED_EXIT_SECONDS of the signal, as the README says.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import threading
import time
from typing import Callable, Mapping, Optional, Sequence

from bootstrap.kit import interrupts

GRACE_SECONDS = 10.0            # Pulumi's own cancellation, before its process group is killed
KILL_SECONDS = 3.0              # a killed group's exit, reaped
INTERRUPTED_EXIT_SECONDS = 20   # the README's bound, signal to exit 130: the two above and the unwinding
_SLICE = 0.25                   # how often a wait looks at the clock

_live: dict[int, subprocess.Popen] = {}
_under: dict[int, list[tuple[int, str]]] = {}  # a told child -> the processes under it when it was told
_told_at: Optional[float] = None  # when the first interrupt was passed on (time.monotonic)
killed: list[str] = []  # `pulumi <command>` of each told child that had to be killed: the interrupt message names them


def _tell(signum: int) -> None:
    """The interrupt handler's part: note what runs under every live child (a Pulumi that dies of the signal
    before its cancellation is set up orphans its plugins), then SIGINT to its group. Reads /proc, sends
    signals, sets flags: nothing that waits."""
    global _told_at
    if _told_at is None:
        _told_at = time.monotonic()
    for pid in tuple(_live):
        _under.setdefault(pid, []).extend(_descendants(pid))
        _signal_group(pid, signal.SIGINT)


interrupts.on_interrupt(_tell)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the group `pid` leads, if it leads one: never groundctl's own
    except (ProcessLookupError, PermissionError):
        pass


def _stat(pid: int) -> Optional[list[str]]:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _descendants(pid: int) -> list[tuple[int, str]]:
    """Every process under `pid` with its start time (which tells it from a later one given its pid), from
    /proc (none where there is none)."""
    parents: dict[int, list[tuple[int, str]]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields is None or len(fields) < 20:
            continue
        parents.setdefault(int(fields[1]), []).append((int(entry), fields[19]))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), ()):
            found.append(child)
            todo.append(child[0])
    return found


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL to the child's group and to every process seen under it, each in its own group too (Pulumi's
    plugins lead theirs): read before the kill, which orphans them."""
    under = _descendants(proc.pid)
    _signal_group(proc.pid, signal.SIGKILL)
    _kill_all(under)
    if _told_at is not None:
        name = f"`pulumi {_command_of(proc.args)}`"
        if name not in killed:
            killed.append(name)


def _command_of(argv) -> str:
    """`preview`, `up`, `stack export`: the Pulumi command an argv runs (its first words that are no flag)."""
    words = [a for a in argv[1:] if not a.startswith("-")] if isinstance(argv, list) else []
    if not words:
        return ""
    return " ".join(words[:2]) if words[0] in ("stack", "config", "plugin") else words[0]


def _kill_all(processes: list[tuple[int, str]]) -> None:
    for pid, started in processes:
        fields = _stat(pid)
        if fields is None or len(fields) < 20 or fields[19] != started or fields[0] == "Z":
            continue  # gone, or its pid is another process's now
        _signal_group(pid, signal.SIGKILL)
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _end(proc: subprocess.Popen) -> None:
    """An interrupted command's child: told (again, if the handler missed it), given what is left of the grace
    since the first signal, then killed with everything under it."""
    if _told_at is None:
        _under.setdefault(proc.pid, []).extend(_descendants(proc.pid))
        _signal_group(proc.pid, signal.SIGINT)
    told = _told_at if _told_at is not None else time.monotonic()
    try:
        proc.wait(timeout=max(0.0, told + GRACE_SECONDS - time.monotonic()))
        return
    except subprocess.TimeoutExpired:
        pass
    _kill(proc)
    try:
        proc.wait(timeout=KILL_SECONDS)
    except subprocess.TimeoutExpired:
        pass


def _pidfd(proc: subprocess.Popen) -> Optional[int]:
    """A descriptor that turns readable the moment the child ends (Linux 5.3+), or None where there is none. Its
    pid is still the child's: only this module reaps it."""
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def _wait(proc: subprocess.Popen, pidfd: Optional[int], seconds: float) -> None:
    """proc.wait(timeout=seconds), returning as the child ends: Popen.wait with a timeout polls, sleeping up to
    50 ms between looks (subprocess.py Popen._wait), which every Pulumi command would add to its own time."""
    if pidfd is None:
        proc.wait(timeout=seconds)
        return
    poll = select.poll()  # not select.select: a descriptor numbered past 1023 is out of its range
    poll.register(pidfd, select.POLLIN)
    poll.poll(seconds * 1000)  # a signal's handler that raises (KeyboardInterrupt) ends it too
    proc.wait(timeout=0)


def _reader(stream, sink: list[str], callback: Optional[Callable[[str], None]]):
    def read() -> None:
        try:
            for line in iter(stream.readline, ""):
                stripped = line.rstrip()
                if callback:
                    callback(stripped)
                sink.append(stripped)
        except (OSError, ValueError):
            pass  # the pipe went with a killed child
    thread = threading.Thread(target=read, name="pulumi-output", daemon=True)
    thread.start()
    return thread


def run(argv: Sequence[str], *, cwd: Optional[str], env: Mapping[str, str], input: Optional[str] = None,
        on_output: Optional[Callable[[str], None]] = None, on_error: Optional[Callable[[str], None]] = None,
        timeout: Optional[float] = None) -> tuple[int, str, str]:
    """Run one Pulumi process to its end in a process group of its own; (exit code, stdout, stderr), each
    stream's lines as the SDK joins them. `input` goes to its standard input (else it has none). Interrupted
    (KeyboardInterrupt, from groundctl's handler), it is ended as the module says and the interrupt goes on;
    past `timeout` it is killed and subprocess.TimeoutExpired raised."""
    global _told_at
    if not interrupts.received:
        _told_at = None  # a new command in the same process (a library caller, a test) starts untold
        killed.clear()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=dict(env),
                            encoding="utf-8", errors="replace", process_group=0)
    out: list[str] = []
    err: list[str] = []
    readers: list[threading.Thread] = []
    pidfd: Optional[int] = None
    ends = time.monotonic() + timeout if timeout is not None else None
    try:  # from here on an interrupt, wherever it lands, ends the child
        _live[proc.pid] = proc
        pidfd = _pidfd(proc)
        readers += [_reader(proc.stdout, out, on_output), _reader(proc.stderr, err, on_error)]
        if _told_at is not None:  # started after the interrupt (a clean-up's command): told at once
            _signal_group(proc.pid, signal.SIGINT)
        if input is not None:
            try:
                proc.stdin.write(input)
                proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass  # it ended without reading: its exit code says why
        while True:
            try:
                _wait(proc, pidfd, _SLICE)
                break
            except subprocess.TimeoutExpired:
                pass
            if _told_at is not None and time.monotonic() > _told_at + GRACE_SECONDS:
                _kill(proc)  # a wait off the main thread, which no KeyboardInterrupt reaches
            if ends is not None and time.monotonic() > ends:
                _kill(proc)
                proc.wait(timeout=KILL_SECONDS)
                raise subprocess.TimeoutExpired(list(argv), timeout or 0)
    except BaseException:
        if proc.poll() is None:
            _end(proc)
        raise
    finally:
        if pidfd is not None:
            os.close(pidfd)
        _live.pop(proc.pid, None)
        # What it left running after it was told (a plugin of a Pulumi the signal ended at once) goes with it.
        _kill_all(_under.pop(proc.pid, []))
        for thread, stream in zip(readers, (proc.stdout, proc.stderr)):
            thread.join(timeout=KILL_SECONDS)  # the pipes close when the child and its group are gone
            if not thread.is_alive():
                stream.close()  # closed under a blocked reader it would wait for that read
    return proc.returncode, "\n".join(out), "\n".join(err)
