"""Reading what someone else wrote: bounded JSON, checked fields, and text made inert for a terminal.

Every record in the state bucket (groundctl's locks, ledger, drift, drill and run records, Pulumi's own
lock files) may have been written by another version of groundctl, another tool, or someone with bucket
access. Valid JSON can still overflow a float (`1e400` is `inf`), nest deeper than Python's recursion
limit, or put a string where an object belongs; a text field can carry Rich markup or terminal control
sequences (ESC [2J, OSC 8 links). One loader bounds the size and depth and rejects non-finite numbers;
the field helpers reject the wrong type, an overlong value and control characters, so a bad record is
classified as unreadable with its key instead of failing somewhere downstream; `inert` is what the
console applies to everything it prints.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any, Optional

MAX_RECORD_BYTES = 1 << 20    # the largest drill report groundctl writes is a few tens of KiB
MAX_RECORD_DEPTH = 32         # groundctl's own records nest at most 5 levels
MAX_TEXT = 1024               # a user, host, run id, key or time; free text (messages) is cut, not refused
MAX_PID = 1 << 22             # Linux's pid_max ceiling; Windows pids fit too

# C0 controls (but newline and tab, which groundctl's own multi-line messages use), DEL, C1 controls
# (0x9b is a one-byte CSI on some terminals) and the bidirectional overrides that reorder what is shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_CONTROL_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Printed as escapes too, though a record may hold them (a joiner in an emoji, a reason's separator): the
# zero-width characters hide text, the line and paragraph separators break a line in some viewers.
_HIDDEN = "\u200b-\u200d\u2028\u2029\u2060\ufeff"
_SHOWN = re.compile(f"{_CONTROL.pattern[:-1]}{_HIDDEN}]")
_SHOWN_LINE = re.compile(f"{_CONTROL_LINE.pattern[:-1]}{_HIDDEN}]")


class Unreadable(ValueError):
    """A record (or a file) that is not what it claims to be; `reason` says why, `source` names it."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a float")
    return value


def _constant(name: str):
    raise ValueError(f"'{name}' is not a JSON value")


def decode_json(text: str, **hooks) -> Any:
    """`json.loads` that raises ValueError (with a readable reason) for everything a hostile document can do
    to the decoder: syntax errors, NaN/Infinity, numbers that overflow a float, integers too long to convert,
    nesting past the recursion limit. The shared core of every reader of untrusted JSON (state files too)."""
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_finite, **hooks)
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}, "
                         f"character {exc.pos})") from None
    except RecursionError:
        raise ValueError("its JSON is nested too deeply") from None
    except ValueError as exc:  # non-finite numbers, integers of more digits than Python converts
        raise ValueError(f"it is not valid JSON ({exc})") from None


def _depth(value: Any, limit: int) -> bool:
    """Whether `value` nests no deeper than `limit` (iteratively: the check itself must not recurse)."""
    todo = [(value, 1)]
    while todo:
        v, d = todo.pop()
        if isinstance(v, (dict, list)):
            if d > limit:
                return False
            todo.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return True


def load_record(body: Optional[bytes], key: str, *, max_bytes: int = MAX_RECORD_BYTES,
                max_depth: int = MAX_RECORD_DEPTH, kind: str = "record") -> dict:
    """The JSON object stored at `key`, bounded in size and depth; raises `Unreadable` naming `key`."""
    if body is None:
        raise Unreadable(key, "it was removed while it was being read")
    if len(body) > max_bytes:
        raise Unreadable(key, f"it is {len(body):,} bytes, over the {max_bytes:,}-byte limit for a {kind}")
    try:
        doc = decode_json(body.decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise Unreadable(key, str(exc)) from None
    if not isinstance(doc, dict):
        raise Unreadable(key, f"it holds a JSON {type_name(doc)}, not the object a {kind} is")
    if not _depth(doc, max_depth):
        raise Unreadable(key, f"it nests more than {max_depth} levels deep, which no {kind} does")
    return doc


def type_name(v: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(v), type(v).__name__)


# -- fields ----------------------------------------------------------------------------------------


def _string(d: dict, name: str, optional: bool, max_len: int, empty: bool, control) -> Optional[str]:
    v = d.get(name)
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise ValueError(f"field '{name}' is {'missing' if v is None else 'a ' + type_name(v)}, not a string")
    if not v and not empty:
        raise ValueError(f"field '{name}' is empty")
    if len(v) > max_len:
        raise ValueError(f"field '{name}' is {len(v):,} characters long, over the limit of {max_len:,}")
    if control.search(v):
        raise ValueError(f"field '{name}' holds control characters")
    return v


def text(d: dict, name: str, *, optional: bool = False, max_len: int = MAX_TEXT, empty: bool = False) -> Optional[str]:
    """A one-line string field: the right type, at most `max_len` characters, no control characters."""
    return _string(d, name, optional, max_len, empty, _CONTROL_LINE)


def prose(d: dict, name: str, *, optional: bool = True, max_len: int = 16 * 1024) -> Optional[str]:
    """Free text (a message, a reason): newlines and tabs allowed, other control characters not."""
    return _string(d, name, optional, max_len, True, _CONTROL)


def number(d: dict, name: str, *, optional: bool = True, low: float = -1e15, high: float = 1e15) -> Optional[float]:
    """A finite number field within [low, high] (a boolean is not a number)."""
    v = d.get(name)
    if v is None and optional:
        return None
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ValueError(f"field '{name}' is {'missing' if v is None else 'a ' + type_name(v)}, not a number")
    if not low <= v <= high:
        raise ValueError(f"field '{name}' is {v}, outside {low:g}..{high:g}")
    return v


def obj(d: dict, name: str, *, optional: bool = True) -> dict:
    """An object field (an absent optional one is empty)."""
    v = d.get(name)
    if v is None and optional:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"field '{name}' is {'missing' if v is None else 'a ' + type_name(v)}, not an object")
    return v


def items(d: dict, name: str, *, optional: bool = True, max_items: int = 10_000) -> list:
    """An array field (an absent optional one is empty)."""
    v = d.get(name)
    if v is None and optional:
        return []
    if not isinstance(v, list):
        raise ValueError(f"field '{name}' is {'missing' if v is None else 'a ' + type_name(v)}, not an array")
    if len(v) > max_items:
        raise ValueError(f"field '{name}' has {len(v):,} items, over the limit of {max_items:,}")
    return v


def flag(d: dict, name: str) -> bool:
    """A boolean field; absent is false."""
    v = d.get(name, False)
    if not isinstance(v, bool):
        raise ValueError(f"field '{name}' is a {type_name(v)}, not true or false")
    return v


def whole(d: dict, name: str, *, low: int = 0, high: int = 1 << 53, optional: bool = False) -> Optional[int]:
    """A whole-number field within [low, high] (a boolean is not a number)."""
    v = d.get(name)
    if v is None and optional:
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"field '{name}' is {'missing' if v is None else 'a ' + type_name(v)}, not a whole number")
    if not low <= v <= high:
        raise ValueError(f"field '{name}' is {v}, outside {low}..{high}")
    return v


def outcome(d: dict, name: str, *, known: tuple[str, ...], explained: tuple[str, ...], reason: str = "reason",
            optional: bool = True) -> Optional[str]:
    """A verdict field, the same check for every record kind that has one: one of `known` and, when it is one of
    `explained` (a failure, a refusal), a non-empty `reason` beside it. A record that says it failed without
    saying why is not one groundctl writes: it is unreadable, never shown as "failed: None"."""
    v = text(d, name, optional=optional)
    if v is not None and v not in known:
        raise ValueError(f"field '{name}' is '{clip(v, 40)}', not one of {', '.join(known)}")
    if v in explained and not (prose(d, reason) or "").strip():
        raise ValueError(f"field '{name}' is '{v}' but field '{reason}' says nothing: a record of a {v} run says why")
    return v


def when(d: dict, name: str, *, optional: bool = False) -> Optional[str]:
    """An ISO 8601 time field (Go's RFC 3339 with nanoseconds too), kept as written."""
    v = text(d, name, optional=optional, max_len=64)
    if v is not None:
        epoch(v)
    return v


def epoch(stamp: str) -> float:
    """Epoch seconds of an ISO 8601 time; naive means UTC. Raises ValueError naming the value."""
    s = stamp.replace("Z", "+00:00")
    # Go writes nanoseconds; Python reads at most microseconds.
    s = re.sub(r"(\.\d{6})\d+", r"\1", s)
    try:
        t = datetime.fromisoformat(s)
    except ValueError:
        raise ValueError(f"'{stamp[:64]}' is not an ISO 8601 time") from None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


# -- printing --------------------------------------------------------------------------------------


def inert(value: str, *, keep_newlines: bool = True) -> str:
    """`value` with every control character shown as its escape (`\\x1b`), so what a record holds is printed
    as text and never acted on by the terminal. Newlines and tabs are kept unless `keep_newlines` is off."""
    pattern = _SHOWN if keep_newlines else _SHOWN_LINE
    if not pattern.search(value):
        return value
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), value)


def clip(value: str, limit: int = 200) -> str:
    """A value quoted in a message, cut to `limit` characters with how much was left out."""
    return value if len(value) <= limit else f"{value[:limit]}… ({len(value) - limit:,} more characters)"


def one_line(value: str, limit: int = 120) -> str:
    """`value` from outside (a CLI's output, a path from the environment) quoted inside a one-paragraph message:
    trimmed, inert with its newlines too, and clipped to `limit`."""
    return clip(inert(value.strip(), keep_newlines=False), limit)
