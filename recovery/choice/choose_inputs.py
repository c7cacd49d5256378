"""The decision's inputs from what recovery read: ledger records as `Evidence`, candidates as `Option`s.

Pure adapters for `recovery.choice.choose.decide`: `evidence_from` says how far the ledger can be trusted,
and `options_from` places each candidate on the ledger's timeline (recorded at a serial, or written
just after one), without downloading anything it does not have to.
"""

from __future__ import annotations

from datetime import datetime
from typing import Optional, Sequence

from recovery.choice.choose import Evidence, Fork, Option


def evidence_from(records: Sequence, chain_findings: Sequence = (), ledger_problems: Sequence = (),
                  missing: bool = False) -> Evidence:
    """Evidence from ledger records (`bootstrap.records.ledger.LedgerRecord`) and what is wrong with them.

    A fork is strong evidence (it refuses); any other damage (unreadable records, gaps, a broken chain)
    makes the whole ledger weaker evidence, and the decision falls back to integrity and time.
    """
    recs = sorted(records, key=lambda r: r.serial)
    forks = tuple(Fork(f.serial or 0, "", "", f.sentence) for f in chain_findings if f.code == "fork")
    other = [f for f in list(chain_findings) + list(ledger_problems) if f.code != "fork"]
    if missing or not recs:
        return Evidence("weaker", notes=("there is no ledger for this stack: the choice rests on integrity and "
                                         "time ordering alone (weaker evidence)",))
    lineage = recs[0].lineage
    if other:
        why = "; ".join(f.sentence for f in other[:5]) + (f" (and {len(other) - 5} more)" if len(other) > 5 else "")
        return Evidence("weaker", lineage=lineage, forks=forks,
                        notes=(f"the ledger is damaged ({why}): serials are not trusted, the choice rests on "
                               "integrity and time ordering (weaker evidence)",))
    return Evidence("ledger", lineage=lineage, head_serial=recs[-1].serial, serials=tuple(r.serial for r in recs),
                    forks=forks, head_resources=recs[-1].resources)


def _record_time(r) -> Optional[datetime]:
    for value in (getattr(r, "state_last_modified", None), getattr(r, "at", None)):
        if value:
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
    return None


def options_from(candidates: Sequence, records: Sequence, evidence: Evidence) -> list[Option]:
    """Each candidate (`recovery.choice.versions.Candidate`) as an `Option`, placed on the ledger's timeline.

    A candidate is recorded at a serial when its version id (exact, no download) or its sha256 (once
    evaluated) is in a record. An unledgered version of the stack object is placed after the newest
    recorded version below it in S3's own version order (exact, whatever the clock resolution); any
    other copy after the newest record stored strictly before it, by time.
    """
    ledgered = evidence.strength == "ledger"
    by_vid = {r.version_id: r for r in records if r.version_id} if ledgered else {}
    by_sha = {r.sha256: r for r in records} if ledgered else {}
    matched: dict[tuple, object] = {}
    for c in candidates:
        ev = c.evaluation
        rec = by_vid.get(c.version_id) if c.source in ("current", "version") else None
        if rec is not None and ev is not None and ev.sha256 and ev.sha256 != rec.sha256:
            rec = None  # the version id was recorded with other bytes: do not trust the match
        rec = rec or (by_sha.get(ev.sha256) if ev is not None and ev.sha256 else None)
        if rec is not None:
            matched[c.ident] = rec
    # Pulumi's .bak and history copies hold the same bytes as a recorded version: equal single-part
    # ETag (the MD5) and size place them at that serial without a download.
    by_etag = {(c.etag.strip('"'), c.size): r for c in candidates if (r := matched.get(c.ident)) is not None
               and r.version_id == c.version_id and "-" not in c.etag and c.etag}
    for c in candidates:
        if c.ident not in matched and c.evaluation is None and (c.etag.strip('"'), c.size) in by_etag:
            matched[c.ident] = by_etag[(c.etag.strip('"'), c.size)]
    # A record's time: the listed time of its own version when that is a candidate (finer than the
    # HTTP date a GET returns), else the time it carries.
    listed = {r.serial: c.last_modified for c in candidates if (r := matched.get(c.ident)) is not None
              and r.version_id == c.version_id}
    times = sorted((t, r.serial) for r in records if (t := listed.get(r.serial) or _record_time(r)) is not None)
    after: dict[tuple, int] = {}
    if ledgered:
        same_key: dict[str, list] = {}
        for c in candidates:
            if c.source in ("current", "version"):
                same_key.setdefault(c.key, []).append(c)
        for group in same_key.values():
            last = None
            for c in sorted(group, key=lambda c: getattr(c, "order", ()) or (c.last_modified,)):
                rec = matched.get(c.ident)
                if rec is not None:
                    last = rec.serial
                elif last is not None:
                    after[c.ident] = last
    out = []
    for c in candidates:
        ev = c.evaluation
        rec = matched.get(c.ident)
        pos = None
        if rec is None and ledgered:
            pos = after.get(c.ident)
            if pos is None:
                # Strictly before: S3 times have one-second resolution, and Pulumi copies the checkpoint to
                # .bak (the older state) in the same second as it writes the version a record names.
                pos = max((s for t, s in times if t < c.last_modified), default=0)
        out.append(Option(
            ident=c.ident, source=c.source, when=c.last_modified, verdict=ev.verdict if ev else None,
            lineage=ev.lineage if ev else None, sha256=ev.sha256 if ev else None,
            serial=rec.serial if rec else None, after_serial=pos,
            resources=ev.resource_count if ev else None, findings=len(ev.findings) if ev else 0,
            pending=ev.pending_operations if ev else (), is_current=c.source == "current",
            foreign=ev.foreign if ev else ()))
    return out
