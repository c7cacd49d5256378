"""Masking secret values out of anything groundctl prints or stores.

One mechanism for every place that masks (engine errors, run records, recovery and drill reports):
longest value first so a secret containing another is masked whole, and its escaped forms too,
because JSON, Python reprs and CLI output show quotes, backslashes, newlines and non-ASCII escaped,
and an escaped secret no longer matches its plain value.

A value shorter than MIN_SECRET_LENGTH is never masked, anywhere: a one-letter passphrase "x" would
otherwise turn every "x" of every message into the mask ("Fi[secret] the cause above") while protecting
nothing, since a value that short is guessed at once. `short_secret_warning` tells the operator instead.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Optional

MIN_SECRET_LENGTH = 6
RECOMMENDED_LENGTH = 8


def _forms(value: str) -> list[str]:
    forms = [value]
    for escaped in (json.dumps(value)[1:-1], value.encode("unicode_escape").decode("ascii"), repr(value)[1:-1]):
        if escaped not in forms:
            forms.append(escaped)
    return forms


def mask_text(text: str, secrets: Iterable[str], mask: str, *, min_length: int = MIN_SECRET_LENGTH) -> str:
    """`text` with every secret value (and its escaped forms) replaced by `mask`.

    Values shorter than `min_length` are left alone: masking "a" everywhere would make every message
    unreadable without protecting anything."""
    for value in sorted({s for s in secrets if s and len(s) >= min_length}, key=len, reverse=True):
        for form in _forms(value):
            text = text.replace(form, mask)
    return text


def mask_obj(obj: Any, secrets: Iterable[str], mask: str, *, min_length: int = MIN_SECRET_LENGTH) -> Any:
    """`obj` (a string, or dicts, lists and tuples of them) with `mask_text` applied to every string."""
    values = [s for s in secrets if s and len(s) >= min_length]
    if not values:
        return obj

    def walk(x: Any) -> Any:
        if isinstance(x, str):
            return mask_text(x, values, mask)
        if isinstance(x, dict):
            return {walk(k): walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        return x

    return walk(obj)


def short_secret_warning(name: str, value: str) -> Optional[str]:
    """What to tell the operator about a secret too short to be one (None when it is long enough). Pure."""
    if not value or len(value) >= RECOMMENDED_LENGTH:
        return None
    masked = ("it is too short to be masked in messages (masking it would mangle every message that "
              "contains those characters)" if len(value) < MIN_SECRET_LENGTH else "it is masked in messages")
    return (f"{name} is {len(value)} character{'s' if len(value) != 1 else ''} long, too short to be a secret that "
            f"cannot be guessed; {masked}. Use a passphrase of {RECOMMENDED_LENGTH} characters or more.")
