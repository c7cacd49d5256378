"""The repository's pinned copy of groundctl, which the workflows install: its requirements file read as pip reads
it, and what the install step must do with it. Pure: the caller reads the file and looks the wheel up in the
repository; this module decides.

What the documented tools write is accepted as they write it. `pip-compile --generate-hashes` names a local wheel
by its absolute `file://` URL on the machine that compiled (`groundctl @ file:///home/alice/infra/vendor/…`),
which no runner has: when that wheel is in the repository, the install step points the line at the repository's
copy before pip reads the file (the line's sha256 still decides what is installed). Option lines pip-compile or a
company mirror adds (`--index-url`, `--extra-index-url`, `--find-links`, …) are kept: pip on the runner reads them
as it did on the compiling machine, and `ci init` says so for each.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Optional
from urllib.parse import unquote, urlsplit, urlunsplit

CHECKOUT = "."  # groundctl's own repository: the workflows install the checkout they run on
# Options pip honours in a requirements file and that leave every package hash-checked.
KEPT_OPTIONS = {"--index-url": "-i", "--extra-index-url": None, "--find-links": "-f", "--no-index": None,
                "--trusted-host": None, "--prefer-binary": None, "--only-binary": None, "--no-binary": None,
                "--pre": None, "--require-hashes": None}
_SHORT = {short: name for name, short in KEPT_OPTIONS.items() if short}
_REFUSED_OPTIONS = {
    "-r": "it includes another file: list its requirements in this one",
    "--requirement": "it includes another file: list its requirements in this one",
    "-c": "it includes a constraints file: put the pins in this one",
    "--constraint": "it includes a constraints file: put the pins in this one",
    "-e": "an editable install cannot be hash-checked: name the built wheel instead",
    "--editable": "an editable install cannot be hash-checked: name the built wheel instead",
}
_HASH = re.compile(r"--hash[= ]sha256:([0-9a-f]{64})\b")
_WHEEL = re.compile(r"groundctl-[A-Za-z0-9_.+!-]+\.whl")
_SAFE_PATH = re.compile(r"[A-Za-z0-9._/-]+")
_COMMENT = re.compile(r"(^|\s+)#.*$")


@dataclass(frozen=True)
class Pin:
    """How the file pins groundctl: a release from an index, a wheel by path or URL."""
    line: int
    kind: str                 # "release", "path" (a wheel by relative path), "file-url", "url"
    where: str                # the version, path or URL as written
    hashes: tuple[str, ...]

    def candidates(self) -> tuple[str, ...]:
        """Repository-relative paths the wheel may be at, most specific first; empty when no file is named.

        An absolute path from another machine keeps its tail: /home/alice/infra/vendor/groundctl-….whl may be
        vendor/groundctl-….whl (or infra/vendor/…) in this clone."""
        if self.kind not in ("path", "file-url"):
            return ()
        path = unquote(urlsplit(self.where).path) if self.kind == "file-url" else self.where
        parts = [p for p in PurePosixPath(path).parts if p not in ("/", ".")]
        if ".." in parts:
            return ()
        if PurePosixPath(path).is_absolute():
            return tuple("/".join(parts[i:]) for i in range(len(parts)))
        return ("/".join(parts),) if parts else ()


@dataclass(frozen=True)
class Requirements:
    pin: Optional[Pin]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = field(default=())


def control_characters(line: str) -> list[str]:
    """The control and format characters in `line` (a tab is allowed), as code points such as U+001B."""
    return [f"U+{ord(c):04X}" for c in line if c != "\t" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


def _logical_lines(text: str, path: str) -> tuple[list[tuple[int, str]], list[str]]:
    """(first line number, logical line) as pip joins them, and a problem per line that holds a control character."""
    problems, out = [], []
    pending, start = "", 0
    # Only "\n" ends a line here: str.splitlines would also break at \x0b, \x1c… and hide them.
    for number, raw in enumerate(text.removeprefix("\ufeff").split("\n"), 1):  # pip drops a BOM too
        line = raw[:-1] if raw.endswith("\r") else raw
        bad = control_characters(line)
        if bad:
            problems.append(f"{path} line {number} ({_inert(line, 60)!r}) holds the control character"
                            f"{'s' if len(bad) > 1 else ''} {', '.join(sorted(set(bad)))}, which pip reads "
                            "differently from what an editor shows: remove it, or compile the file again")
            line = ""
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    if pending:
        out.append((start, pending))
    return out, problems


def _inert(text: str, limit: int = 80) -> str:
    """`text` safe to print: control characters as '?', a URL's user and password as ***."""
    text = re.sub(r"://[^/@\s]+@", "://***@", text)
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[:limit] + "…"


def _redact(value: str) -> str:
    parts = urlsplit(value)
    if parts.username is None and parts.password is None:
        return value
    host = parts.hostname or ""
    return urlunsplit((parts.scheme, f"***@{host}" + (f":{parts.port}" if parts.port else ""), parts.path,
                       parts.query, parts.fragment))


def _option(number: int, line: str, path: str) -> tuple[Optional[str], Optional[str]]:
    """(note, problem) for an option line: a kept option gets a note, any other a problem."""
    first, *rest = line.split()
    name, value = first.split("=", 1) if first.startswith("--") and "=" in first else (first, "")
    value = " ".join(([value] if value else []) + rest)
    name = _SHORT.get(name, name)
    if name in _REFUSED_OPTIONS:
        return None, f"{path} line {number}: {name} is not installed by the workflows: {_REFUSED_OPTIONS[name]}"
    if name not in KEPT_OPTIONS:
        return None, (f"{path} line {number}: {name[:40]} is not an option the workflows keep (they keep "
                      f"{', '.join(sorted(KEPT_OPTIONS))}); remove it")
    shown = _redact(value)
    note = f"{path} line {number}: {name}{' ' + shown if shown else ''} is kept: pip on the runner reads it"
    if shown != value:
        note += (" (the URL holds credentials, which the repository then holds too: set PIP_INDEX_URL or "
                 "PIP_EXTRA_INDEX_URL from a secret instead)")
    elif name == "--find-links" and value.startswith("/"):
        note += " (a folder of this machine: where the runner has no such folder, pip skips it with a warning)"
    return note, None


def _pin_of(number: int, requirement: str, hashes: tuple[str, ...]) -> Optional[Pin]:
    req = requirement.split(";", 1)[0].strip()
    if "@" in req:
        name, _, url = (s.strip() for s in req.partition("@"))
        if name.split("[", 1)[0].lower() != "groundctl":
            return None
        scheme = urlsplit(url).scheme
        if _WHEEL.fullmatch(PurePosixPath(urlsplit(url).path).name or ""):
            if scheme == "file":
                return Pin(number, "file-url", url, hashes)
            if scheme == "https":
                return Pin(number, "url", url, hashes)
        return Pin(number, "unusable", url, hashes)
    match = re.fullmatch(r"groundctl(?:\[[\w,\s-]*\])?\s*==\s*([\w.+!-]+)", req, re.I)
    if match:
        return Pin(number, "release", match.group(1), hashes)
    if _WHEEL.fullmatch(PurePosixPath(req).name) and "://" not in req:
        # A bare absolute path is one machine's: pip-compile writes a file: URL, which is mapped; this is not.
        return Pin(number, "unusable" if req.startswith("/") else "path", req, hashes)
    return None


def parse(text: str, path: str) -> Requirements:
    """Whether `text` can be installed with --require-hashes as groundctl's pinned copy: every requirement carries
    a sha256, one is groundctl itself, and no line holds a control character or an option that is not kept."""
    lines, problems = _logical_lines(text, path)
    notes, pins = [], []
    for number, line in lines:
        line = _COMMENT.sub("", line).strip()
        if not line:
            continue
        if line.startswith("-"):
            note, problem = _option(number, line, path)
            notes += [note] if note else []
            problems += [problem] if problem else []
            continue
        requirement = re.split(r"\s+--?[a-z]", line, maxsplit=1)[0].strip()
        hashes = tuple(_HASH.findall(line))
        if not hashes:
            problems.append(f"{path}: {_inert(requirement)!r} has no --hash=sha256:… (pip install --require-hashes "
                            "refuses it)")
        pin = _pin_of(number, requirement, hashes)
        if pin is not None:
            pins.append(pin)
    usable = [p for p in pins if p.kind != "unusable"]
    for pin in pins:
        if pin.kind == "unusable":
            problems.append(f"{path} line {pin.line}: {_inert(pin.where)} cannot be installed on a runner with its "
                            "hash checked: name a built wheel committed to the repository (its relative path, or the "
                            "file: URL pip-compile writes) or an https: URL ending in groundctl-….whl")
    if not pins:
        problems.append(f"{path} does not pin groundctl (groundctl==VERSION, or the path of a groundctl wheel "
                        "committed to the repository, as `groundctl @ file:…` or a relative path)")
    elif len(usable) > 1:
        problems.append(f"{path} pins groundctl on lines {', '.join(str(p.line) for p in usable)}: keep one")
    return Requirements(usable[0] if len(usable) == 1 else None, tuple(problems), tuple(notes))


@dataclass(frozen=True)
class Wheel:
    """The groundctl wheel as found in the repository: its repository-relative path and sha256."""
    path: str
    sha256: str


def wheel_problems(pin: Pin, found: Optional[Wheel], path: str) -> list[str]:
    """Whether the wheel the pin names is in the repository, as the line's hash pins it."""
    if pin.kind not in ("path", "file-url"):
        return []
    if found is None:
        tail = PurePosixPath(unquote(urlsplit(pin.where).path) if pin.kind == "file-url" else pin.where).name
        return [f"{path} line {pin.line} names the groundctl wheel {_inert(pin.where, 120)}, which is not in the "
                f"repository: commit it (e.g. vendor/{tail}) and name it by that path, or compile the file again from the "
                "committed copy; the runner has only the repository"]
    if not _SAFE_PATH.fullmatch(found.path):
        return [f"{path} line {pin.line}: the wheel's path in the repository, {found.path[:120]!r}, has characters "
                "other than letters, digits, '.', '_', '-' and '/': rename the folder it is in"]
    if found.sha256 not in pin.hashes:
        return [f"{path} line {pin.line}: the wheel {found.path} in the repository is not the one the line's "
                f"--hash pins (its sha256 is {found.sha256[:16]}…): it was rebuilt after the file was compiled; "
                "compile the file again"]
    return []


def wheel_dir(pin: Optional[Pin], found: Optional[Wheel]) -> Optional[str]:
    """The repository folder of a wheel the file names by a `file:` URL (the install step points the line there);
    None when pip can read the file as it is."""
    if pin is None or pin.kind != "file-url" or found is None:
        return None
    return str(PurePosixPath(found.path).parent).removeprefix(".")


def install_run(install: str, wheel_folder: Optional[str]) -> str:
    """The workflows' install command (one line): the checkout, the file as written, or the file with its
    groundctl `file:` URL pointed at the repository's copy of the wheel (the same bytes: the hash still checks)."""
    if install == CHECKOUT:
        return 'python -m pip install "$GROUNDCTL_INSTALL"'
    if wheel_folder is None:
        return 'python -m pip install --require-hashes -r "$GROUNDCTL_INSTALL"'
    folder = f"{wheel_folder}/" if wheel_folder else ""  # letters, digits and ._-/ only (wheel_problems)
    point = rf"s#^groundctl @ file:[^ ]*/{folder.replace('.', r'[.]')}(groundctl-[^/ ]+[.]whl)#./{folder}\1#"
    return (f"sed -E '{point}' \"$GROUNDCTL_INSTALL\" > \"$GROUNDCTL_INSTALL.runner\" && "
            'python -m pip install --require-hashes -r "$GROUNDCTL_INSTALL.runner"')
