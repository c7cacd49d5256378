"""The one owner of the terminal.

Messages and progress go to stderr, data (tables meant to be read, JSON) to stdout, so that
`groundctl … --json | jq` always sees clean JSON. Everything printed is inert: markup is off everywhere
(a resource name or lock holder containing `[bold]` is shown as written), and every control character
(ESC [2J, an OSC 8 link, a bell, a bidirectional override) in any message, table cell or progress line is
shown as its escape (`\x1b`) instead of reaching the terminal, whoever wrote the value: a record in the
bucket, an exception, a key name. JSON escapes them itself.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from bootstrap.kit.untrusted import inert


def _width(stream) -> int | None:
    # Without a terminal (a CI log, a pipe) nothing is wrapped at 80 columns: a rule name or URN cut in two
    # cannot be searched for. Tables take the width they need; COLUMNS, when set, still wins.
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return None if tty or os.environ.get("COLUMNS") else 4096


_err = Console(stderr=True, highlight=False, markup=False, emoji=False, width=_width(sys.stderr))
_out = Console(highlight=False, markup=False, emoji=False, soft_wrap=True, width=_width(sys.stdout))


def _text(value: Any) -> Any:
    """A string or Text with its control characters escaped, before layout (so a table's columns still line up)."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, Text):
        plain = value.plain
        clean = inert(plain)
        return value if clean == plain else Text(clean, style=value.style, justify=value.justify)
    return value


class _Inert:
    """Any renderable, with every text segment made inert after layout too (the net under `_text`)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __rich_console__(self, console, options):
        for seg in console.render(self.inner, options):
            yield seg if seg.control else Segment(inert(seg.text), seg.style)


def _prepare(renderable: Any) -> Any:
    if isinstance(renderable, Table):
        renderable.title = _text(renderable.title)
        for column in renderable.columns:
            column.header = _text(column.header)
            column._cells = [_text(c) for c in column._cells]
        return _Inert(renderable)
    if isinstance(renderable, (str, Text)):
        return _text(renderable)
    return _Inert(renderable)


def info(text: str) -> None:
    _err.print(inert(text))


def step(text: str) -> None:
    _err.print(f"▸ {inert(text)}", style="bold")


def warn(text: str) -> None:
    _err.print(f"warning: {inert(text)}", style="yellow")


def error(text: str) -> None:
    _err.print(f"error: {inert(text)}", style="red", soft_wrap=True)


def data(renderable: Any) -> None:
    """A table or text that is the command's result."""
    _out.print(_prepare(renderable))


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
    sys.stdout.flush()


def confirm(question: str) -> bool:
    """Ask on the terminal; without one (CI, a pipe) the answer is no."""
    if not sys.stdin.isatty():
        return False
    _err.print(f"{inert(question)} [y/N] ", end="")
    try:
        answer = input()
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


@contextmanager
def progress(description: str) -> Iterator:
    """A spinner with elapsed time; yields a function that updates the line."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn(),
                  console=_err, transient=True, disable=not _err.is_terminal) as bar:
        task = bar.add_task(inert(description), total=None)
        yield lambda text: bar.update(task, description=inert(f"{description}: {text}"))
