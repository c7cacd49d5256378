"""The environment's summary: one small object beside its records, so `fleet status` reads in one GET what would
otherwise take a listing of its rehearsals and two or three reads of its bucket's settings.

Stored at `.groundctl/drift/<env>/~summary.json`: inside a prefix the record role may already write (the IAM
statements adopters applied, `groundctl spec roles`), and after every drift record's name (`~` sorts after the
digits they start with), so a listing of the newest drift records never meets it. It holds:
- `rehearsals`: the names of the REHEARSAL_PAGE newest rehearsal records (the names carry every verdict), when
  the bucket wrote each one where known, whether older ones exist, and the reason of each failure a layer last
  showed (what a reader would otherwise GET);
- `settings`: the bucket's protection as `recovery.evidence.protection.read_protection` read it, and when (the
  bucket's clock: the Date of S3's answer), so the settings are not re-read on every run.

Writers: every rehearsal recorded adds its name (`rehearsal_record.save_rehearsal_record`); every drift check
recorded rebuilds the whole summary from a listing and re-reads the settings (`reading.refresh_summary`), so
records an earlier version wrote are in it within one drift check. Updates are conditional (If-Match, If-None-Match)
and retried: two writers never lose each other's change. It is a cache of what the records say, never the
truth: a reader falls back to the listings when it is missing, unreadable, or older than the newest drift record
(then a drift check ran without refreshing it: an earlier version, or a write that failed). Someone who may write
it may also write a record named now, which hides as much; the records' clocks are checked as everywhere.
"""

from __future__ import annotations

import json
from typing import Callable, Iterable, Optional

from bootstrap.kit.untrusted import Unreadable, flag, items, load_record, obj, prose, text, when, whole
from bootstrap.records import layout
from bootstrap.records.runs import redact

SCHEMA = 1
PAGE = 32                 # as many rehearsal names as `fleet status` judges (reading.REHEARSAL_PAGE)
MAX_BYTES = 64 * 1024     # 32 names of at most 600 characters, their reasons, the settings
SETTINGS_TTL_SECONDS = 26 * 3600  # the settings a daily job refreshed (plus its spread) are still taken as read
ATTEMPTS = 5


def key(environment: str) -> str:
    return f"{layout.drift_prefix(environment)}~summary.json"


def empty(environment: str) -> dict:
    return {"kind": "summary", "schema": SCHEMA, "environment": environment,
            "rehearsals": None, "settings": None}


def with_rehearsal(doc: dict, name: str, reasons: dict[str, str]) -> dict:
    """`doc` with one more rehearsal record named `name` (its failed layers' `reasons`, "" for a run that stopped
    before any layer). Names sort newest first; only the newest PAGE are kept, with their reasons. Pure."""
    part = doc.get("rehearsals") or {"records": [], "complete": True, "listed": False}
    records = [r for r in part["records"] if r["name"] != name] + [{"name": name, "written": None,
                                                                   "reasons": reasons}]
    records.sort(key=lambda r: r["name"])
    # `listed`: a listing built it (a drift check's refresh); until one has, older records may be missing
    return doc | {"rehearsals": {"records": records[:PAGE], "complete": part["complete"] and len(records) <= PAGE,
                                 "listed": bool(part.get("listed"))}}


def with_listing(doc: dict, records: list[dict], complete: bool, settings: Optional[dict]) -> dict:
    """`doc` rebuilt from a listing: `records` [{name, written, reasons}] newest first, and the bucket's settings
    as read now ({at, protection}). Pure."""
    return doc | {"rehearsals": {"records": records[:PAGE], "complete": complete and len(records) <= PAGE,
                                 "listed": True}, "settings": settings}


def dumps(doc: dict, secret_values: Iterable[str] = ()) -> bytes:
    return redact(json.dumps(doc, sort_keys=True, separators=(",", ":")), list(secret_values)).encode()


def load_summary(body: Optional[bytes], where: str) -> dict:
    """The summary stored at `where`, checked field by field (it is untrusted input); raises `Unreadable`."""
    d = load_record(body, where, kind="summary", max_bytes=MAX_BYTES)
    try:
        if d.get("kind") != "summary":
            raise ValueError("field 'kind' is not 'summary'")
        whole(d, "schema", low=1, high=SCHEMA)
        text(d, "environment")
        part = obj(d, "rehearsals")
        if part:
            flag(part, "complete"), flag(part, "listed")
            for rec in items(part, "records", optional=False, max_items=PAGE):
                if not isinstance(rec, dict):
                    raise ValueError("an entry of 'records' is not an object")
                text(rec, "name", max_len=600), when(rec, "written", optional=True)
                for layer, why in obj(rec, "reasons").items():
                    text({"layer": layer}, "layer", empty=True, max_len=64), prose({"reason": why}, "reason")
        settings = obj(d, "settings")
        if settings:
            when(settings, "at")
            _protection(obj(settings, "protection", optional=False))
    except ValueError as exc:
        raise Unreadable(where, str(exc)) from None
    return d


def _protection(p: dict) -> None:
    text(p, "bucket"), flag(p, "exists")
    for item in items(p, "unreadable", optional=False, max_items=8):
        text({"unreadable": item}, "unreadable")
    text(p, "versioning", optional=True), flag(p, "mfa_delete")
    whole(p, "noncurrent_days", optional=True, high=1 << 31)
    rep = p.get("replication")
    if isinstance(rep, dict):
        whole(rep, "enabled_rules", high=10_000), flag(rep, "time_control")
        for dest in items(rep, "destinations", optional=False, max_items=1000):
            text({"destination": dest}, "destination", empty=True)
    elif rep is not None and not isinstance(rep, str):
        raise ValueError("field 'replication' is neither an object nor a word")


def update(store, environment: str, change: Callable[[dict], dict], secret_values: Iterable[str] = ()) -> bool:
    """Apply `change` to the stored summary (or to an empty one), written only if nobody wrote it in between
    (If-Match, or If-None-Match for the first): read again and retried, ATTEMPTS times. An unreadable summary
    is replaced. True when written."""
    where = key(environment)
    for _ in range(ATTEMPTS):
        found = store.get(where)
        try:
            doc = load_summary(found.body, where) if found is not None else empty(environment)
        except Unreadable:
            doc = empty(environment)
        body = dumps(change(doc), secret_values)
        if found is None:
            if store.put_if_absent(where, body):
                return True
        elif store.put_if_match(where, body, found.etag):
            return True
    return False
