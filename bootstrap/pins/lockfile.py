"""groundctl-pins.json: the adopter's record of every checked release artifact, one JSON object per line, sorted,
so that a bump is a small diff a reviewer reads. Parsing treats the file as untrusted (bounded, every field
validated); `shortfall` says what the lock lacks for what is installed and pinned. Pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Iterable, Optional, Sequence

from bootstrap.pins.artifacts import ANY, BASE_IMAGE, Want, is_platform, known_name

LOCK_FILE = "groundctl-pins.json"
FORMAT = 1
MAX_LOCK_BYTES = 1 << 20
MAX_ENTRIES = 2000
UPDATE = "groundctl pins update"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_:/-]{0,127}")
_FILE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}")
_URL = re.compile(r"https?://[!-~]{1,2000}")
FIELDS = ("name", "version", "platform", "file", "sha256", "url")


@dataclass(frozen=True, order=True)
class Entry:
    name: str
    version: str
    platform: str
    file: str
    sha256: str
    url: str
    checksums_url: str = ""   # the publisher's checksums file the digest was read from ("" for the base image)
    signature: str = ""       # how that file's signature was checked, or why it was not
    path: str = ""            # Flux: where the checked install.yaml was written in the repository, if anywhere

    @property
    def key(self) -> tuple[str, str, str]:
        return self.name, self.version, self.platform


class LockProblem(ValueError):
    """The lock file is not one groundctl wrote; the message says where and how to fix it."""


def render(entries: Iterable[Entry]) -> str:
    """The file's text: sorted, one artifact per line, no dates. Pure."""
    rows = sorted(set(entries))
    lines = [json.dumps({k: v for k, v in asdict(e).items() if v or k in FIELDS}, separators=(", ", ": "))
             for e in rows]
    body = ",\n    ".join(lines)
    return (f'{{\n  "groundctl_pins": {FORMAT},\n  "written_by": "{UPDATE}: review a change here like code",\n'
            f'  "artifacts": [\n    {body}\n  ]\n}}\n' if lines else
            f'{{\n  "groundctl_pins": {FORMAT},\n  "written_by": "{UPDATE}",\n  "artifacts": []\n}}\n')


def _entry(index: int, raw: object) -> Entry:
    where = f"artifact {index + 1}"
    if not isinstance(raw, dict):
        raise LockProblem(f"{where} is not an object")
    unknown = sorted(set(raw) - set(Entry.__dataclass_fields__))
    if unknown:
        raise LockProblem(f"{where} has unknown field {unknown[0][:40]!r}")
    values = {}
    for field in Entry.__dataclass_fields__:
        value = raw.get(field, "")
        if not isinstance(value, str):
            raise LockProblem(f"{where}: {field} is not a string")
        values[field] = value
    e = Entry(**values)
    if not known_name(e.name):
        raise LockProblem(f"{where}: {e.name[:60]!r} is not an artifact groundctl installs (the Pulumi CLI "
                          "'pulumi', a plugin 'pulumi-resource-<name>', 'flux' or 'base-image')")
    checks = ((_VERSION.fullmatch(e.version), f"version {e.version[:60]!r} is not a version"),
              (e.platform == ANY or is_platform(e.platform), f"platform {e.platform[:40]!r} is not one such as "
                                                             "linux-amd64"),
              (_FILE.fullmatch(e.file), f"file {e.file[:60]!r} is not a file name"),
              (_SHA256.fullmatch(e.sha256), f"sha256 {e.sha256[:80]!r} is not 64 lowercase hex digits"),
              (_URL.fullmatch(e.url), "url is not an http(s) URL"),
              (not e.checksums_url or _URL.fullmatch(e.checksums_url), "checksums_url is not an http(s) URL"),
              (len(e.signature) <= 200 and e.signature.isprintable(), "signature is not one line of text"),
              (not e.path or (_FILE.fullmatch(e.path) and ".." not in e.path.split("/")),
               "path is not a plain path inside the repository"))
    for ok, what in checks:
        if not ok:
            raise LockProblem(f"{where} ({e.name} {e.version[:40]}): {what}")
    return e


def parse(data: bytes) -> list[Entry]:
    """The entries of a lock file's bytes; LockProblem saying what is wrong. Pure over untrusted bytes."""
    if len(data) > MAX_LOCK_BYTES:
        raise LockProblem(f"it is over the {MAX_LOCK_BYTES:,}-byte limit")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LockProblem(f"it is not JSON ({str(exc)[:120]})") from None
    if not isinstance(doc, dict) or doc.get("groundctl_pins") != FORMAT or not isinstance(doc.get("artifacts"), list):
        raise LockProblem(f"it is not a groundctl pins file of format {FORMAT} (an object with \"groundctl_pins\": "
                          f"{FORMAT} and a list \"artifacts\")")
    if len(doc["artifacts"]) > MAX_ENTRIES:
        raise LockProblem(f"it lists over {MAX_ENTRIES} artifacts")
    entries = [_entry(i, raw) for i, raw in enumerate(doc["artifacts"])]
    seen: set = set()
    for e in entries:
        if e.key in seen:
            raise LockProblem(f"{e.name} {e.version} {e.platform} is listed twice")
        seen.add(e.key)
    return entries


def find(entries: Sequence[Entry], want: Want) -> Optional[Entry]:
    return next((e for e in entries if e.key == (want.name, want.version, want.platform)), None)


def shortfall(entries: Sequence[Entry], wanted: Sequence[Want]) -> list[str]:
    """What the lock lacks for `wanted`, each naming the artifact and, where the lock holds another version of
    it, that version (a groundctl or SDK upgrade changed a pin). Pure."""
    missing = []
    for want in wanted:
        if find(entries, want):
            continue
        others = sorted({e.version for e in entries if e.name == want.name and e.platform == want.platform})
        held = f" (the lock holds {', '.join(others)})" if others else ""
        missing.append(f"{want.label()}{held}")
    return missing


def shortfall_message(lock_path: str, missing: Sequence[str], purpose: str, update_flags: str = "") -> str:
    """One paragraph: what `purpose` needs that the lock lacks, and the command that records it. Pure."""
    return (f"{purpose} stops: {lock_path} does not record {'; '.join(missing)}. Every release file groundctl "
            "installs is checked against the digest this lock records from its publisher's checksums file. Run "
            f"`{UPDATE}{update_flags}` in the repository (with --release-mirror/GROUNDCTL_RELEASE_MIRROR behind an "
            "artifact proxy), review and commit the change to the lock, then run this again.")


def base_image_digest(entries: Sequence[Entry], reference: str) -> Optional[str]:
    """'sha256:…' the lock records for the base image `reference`, or None. Pure."""
    entry = next((e for e in entries if e.name == BASE_IMAGE and e.version == reference), None)
    return f"sha256:{entry.sha256}" if entry else None
