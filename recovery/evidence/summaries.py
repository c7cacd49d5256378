"""What `fleet status` takes from an environment's summary (`recovery.evidence.summary`), and the drift check's
refresh of it.

A reader takes a summary only while it is no older than the newest drift record (every drift check of this
version refreshes it right after writing its record, so an older one means a check ran that did not: an earlier
version, or a write that failed), and only the parts a listing built (`listed`). The bucket's settings in it are
taken while they are younger than SETTINGS_TTL_SECONDS by the bucket's clock (the Date of the GET that read the
summary) and were all readable and read for what the spec asks (replication only with a replica); the row
says how old they are. A rehearsal named in it is from the future when it names a time after the bucket wrote
it, or, where that is not known, after the bucket wrote the summary.
"""

from __future__ import annotations

from typing import Iterable, Optional

import botocore.exceptions

from bootstrap.aws.clients import error_code
from bootstrap.kit.untrusted import Unreadable
from bootstrap.records import clock, layout
from recovery.evidence import summary
from recovery.evidence.listing import from_future
from recovery.evidence.protection import NOT_READ, read_protection
from recovery.evidence.rehearsal_listing import rehearsal_name, rehearsals

MISSING_BUCKET = "missing bucket"


def fetch(store, env: str, problems: list[dict]):
    """The stored summary (StoredObject, checked doc), None when there is none or it cannot be read (a problem
    then), or MISSING_BUCKET when the bucket does not exist. One GET."""
    where = summary.key(env)
    try:
        found = store.get(where)
    except botocore.exceptions.ClientError as exc:
        if error_code(exc) == "NoSuchBucket":
            return MISSING_BUCKET
        if error_code(exc) in ("AccessDenied", "403"):
            return None  # a reader without it reads the records themselves
        raise
    if found is None:
        return None
    try:
        return found, summary.load_summary(found.body, where)
    except Unreadable as exc:
        problems.append({"key": where, "why": f"is not a readable summary ({exc.reason})"})
        return None


def current(fetched, newest_drift_written) -> Optional[tuple]:
    """`fetched` when it is no older than the newest drift record (by the bucket's clock), else None."""
    if not fetched or fetched == MISSING_BUCKET:
        return None
    found, _doc = fetched
    if newest_drift_written is not None and (found.last_modified is None or
                                             found.last_modified < newest_drift_written):
        return None
    return fetched


def settings(fetched, replication: bool) -> Optional[dict]:
    """The bucket's protection as the summary holds it, with `as_of` and `age_seconds` (by the bucket's clock),
    when it may stand in for reading the settings now; else None."""
    found, doc = fetched
    snap = doc.get("settings") or {}
    prot = snap.get("protection")
    if not prot or prot.get("unreadable") or not prot.get("exists", True):
        return None
    if (prot.get("replication") != NOT_READ) is not replication:
        return None  # read for another spec: replication read where none is asked, or not read where one is
    now = found.server_time or found.last_modified
    age = None if now is None else now.timestamp() - (clock.ts(snap.get("at")) or 0)
    if age is None or not -clock.SKEW_SECONDS <= age <= summary.SETTINGS_TTL_SECONDS:
        return None
    return prot | {"as_of": clock.iso(snap["at"]), "age_seconds": round(max(0.0, age), 1), "from": "summary"}


def rehearsal_part(fetched, env: str, future: dict) -> Optional[dict]:
    """What `rehearsal_listing.rehearsals` returns, from the summary, when a listing built it; else None."""
    found, doc = fetched
    part = doc.get("rehearsals") or {}
    if not part.get("listed"):
        return None
    prefix = layout.rehearsals_prefix(env)
    records, reasons = [], {}
    for rec in part["records"]:
        parsed = rehearsal_name("", rec["name"])
        key = prefix + rec["name"]
        if parsed is None or from_future(key, parsed["at"], rec.get("written") or found.last_modified,
                                         "rehearsal", future):
            continue  # a name of another shape was a problem of the listing it came from
        records.append(parsed | {"key": key})
        if rec.get("reasons"):
            reasons[key] = dict(rec["reasons"])
    return {"records": records, "complete": bool(part.get("complete")), "reasons": reasons}


def refresh(store, s3, env: str, *, replication: bool, secret_values: Iterable[str] = ()) -> bool:
    """Rebuild the summary from the rehearsal listing and the bucket's settings read now (what a drift check
    runs after writing its record; `replication`: the spec asks for a replica). True when written."""
    problems: list[dict] = []
    listed = rehearsals(store, env, problems, {})
    records = []
    for rec in listed["records"]:
        layers = listed["reasons"].get(rec["key"]) or {}
        records.append({"name": rec["key"].rsplit("/", 1)[-1], "written": rec.get("written"), "reasons": layers})
    prot = read_protection(s3, store.bucket, replication=replication)
    snap = {"at": prot.pop("read_at"), "protection": prot} if prot.get("read_at") else None

    return summary.update(store, env, lambda doc: summary.with_listing(doc, records, listed["complete"], snap),
                          secret_values)
