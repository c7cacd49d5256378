"""The one owner of the terminal.

Messages and progress go to stderr, data (tables meant to be read, JSON) to stdout, so that
`groundctl … --json | jq` always sees clean JSON. User data is printed with markup off: a resource
name containing `[bold]` is shown as written.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


def _width(stream) -> int | None:
    # Without a terminal (a CI log, a pipe) nothing is wrapped at 80 columns: a rule name or URN cut in two
    # cannot be searched for. Tables take the width they need; COLUMNS, when set, still wins.
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return None if tty or os.environ.get("COLUMNS") else 4096


_err = Console(stderr=True, highlight=False, width=_width(sys.stderr))
_out = Console(highlight=False, soft_wrap=True, width=_width(sys.stdout))


def info(text: str) -> None:
    _err.print(text, markup=False)


def step(text: str) -> None:
    _err.print(f"▸ {text}", markup=False, style="bold")


def warn(text: str) -> None:
    _err.print(f"warning: {text}", markup=False, style="yellow")


def error(text: str) -> None:
    _err.print(f"error: {text}", markup=False, style="red", soft_wrap=True)


def data(renderable: Any) -> None:
    """A table or text that is the command's result."""
    _out.print(renderable, markup=False) if isinstance(renderable, str) else _out.print(renderable)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def confirm(question: str) -> bool:
    """Ask on the terminal; without one (CI, a pipe) the answer is no."""
    if not sys.stdin.isatty():
        return False
    _err.print(f"{question} [y/N] ", markup=False, end="")
    try:
        answer = input()
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


@contextmanager
def progress(description: str) -> Iterator:
    """A spinner with elapsed time; yields a function that updates the line."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=_err, transient=True, disable=not _err.is_terminal) as bar:
        task = bar.add_task(description, total=None)
        yield lambda text: bar.update(task, description=f"{description}: {text}")
