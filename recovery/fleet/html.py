"""The fleet status as one static HTML file: a row per environment and its drills' timelines. Pure.

No script, no external asset: the page opens from a file share or a CI artifact as it is. Every value
from a record is escaped (records are written by many runs; a phase message may hold markup), and the
timelines are the drills' own SVG (`recovery.drills.timeline_svg`), which escapes through its serializer.
"""

from __future__ import annotations

from html import escape
from typing import Optional

from recovery.drills.phases import PhaseResult
from recovery.drills.report import recovery_phases
from recovery.drills.timeline_svg import render as render_svg

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#212121}
h1{font-size:1.4rem;margin:0 0 .3rem}
.meta{color:#616161;margin-bottom:1rem}
table{border-collapse:collapse;width:100%;font-size:.85rem}
th,td{border-bottom:1px solid #e0e0e0;padding:.35rem .5rem;text-align:left;vertical-align:top}
th{background:#f5f5f5;position:sticky;top:0}
.badge{display:inline-block;padding:.05rem .4rem;border-radius:.6rem;font-size:.75rem;color:#fff}
.ok{background:#2e7d32}.warn{background:#ef6c00}.bad{background:#c62828}.none{background:#9e9e9e}
tr.attention td:first-child{border-left:4px solid #c62828}
.small{color:#616161;font-size:.75rem}
section.env{margin-top:1.2rem}
section.env h2{font-size:1.05rem;margin:.2rem 0}
details{margin:.3rem 0}
"""

_CLASS = {"clean": "ok", "passed": "ok", "meets": "ok", "improving": "ok", "steady": "ok",
          "drift": "bad", "failed": "bad", "fails": "bad", "worsening": "warn", "at-risk": "warn",
          "unverified": "warn", "refused": "warn", "unknown": "none"}


def _badge(text: Optional[str], cls: Optional[str] = None) -> str:
    if text is None:
        return '<span class="badge none">none</span>'
    return f'<span class="badge {cls or _CLASS.get(text, "none")}">{escape(text)}</span>'


def _age(seconds: Optional[float]) -> str:
    if seconds is None:
        return ""
    if seconds < 3600:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.1f} days ago"


def _small(text: str) -> str:
    return f'<div class="small">{escape(text)}</div>' if text else ""


def _drift_cell(row: dict) -> str:
    d = row.get("drift")
    if not d:
        return _badge(None) + _small("no drift check recorded")
    layers = f"in {', '.join(d['drifted_layers'])}" if d["drifted_layers"] else ""
    return _badge(d["result"]) + _small(" ".join(x for x in (layers, _age(d["age_seconds"])) if x))


def _drill_cell(row: dict) -> str:
    drills = row.get("drills") or {}
    last = drills.get("last")
    if not last:
        return _badge(None) + _small("no drill recorded")
    took = "" if last["recovery_seconds"] is None else f"{last['recovery_seconds']:.0f} s of {last['rto_seconds']:.0f} s RTO"
    trends = "; ".join(f"{kind}: {t['trend']} ({', '.join(f'{s:.0f}' for s in t['recovery_seconds'])} s)"
                       for kind, t in drills.get("trends", {}).items())
    return (_badge(last["verdict"]) + _small(f"{last['kind']} {took} {_age(last['age_seconds'])}")
            + _small(f"RTO trend: {trends}" if trends else ""))


def _lock_cell(row: dict) -> str:
    lock = row.get("lock")
    if lock is None:
        return ""
    if not lock["held"]:
        text = "free" + (f", {lock['pulumi_locks']} Pulumi lock(s)" if lock["pulumi_locks"] else "")
        return _badge(text, "warn" if lock["pulumi_locks"] else "ok")
    return _badge("stale" if lock["stale"] else "held", "bad" if lock["stale"] else "warn") + _small(lock["holder"] or "")


def _ledger_cell(row: dict) -> str:
    led = row.get("ledger")
    if not led or not led["head_at"]:
        return '<span class="small">no ledger record</span>'
    serials = ", ".join(f"{k} #{v['serial']}" for k, v in led["layers"].items())
    return escape(_age(led["head_age_seconds"])) + _small(serials)


def _protection_cell(row: dict) -> str:
    p = row.get("protection")
    if not p:
        return ""
    rep = p.get("replication") or {}
    facts = [f"versioning {p.get('versioning')}", f"replication {'on' if rep.get('enabled_rules') else 'off'}"
             + (" (RTC)" if rep.get("time_control") else ""),
             "noncurrent kept forever" if p.get("noncurrent_days") == 0 else f"noncurrent {p.get('noncurrent_days')} d"]
    found = "".join(_small(f["what"]) for f in p.get("findings", []))
    return _badge(p["verdict"]) + _small(f"RPO {row['rpo_minutes']} min; " + ", ".join(facts)) + found


def _timelines(row: dict) -> str:
    items = (row.get("drills") or {}).get("timelines") or []
    if not items:
        return ""
    parts = [f'<section class="env" id="env-{escape(row["environment"])}"><h2>{escape(row["environment"])}</h2>']
    for t in items:
        phases = tuple(PhaseResult.from_dict(p) for p in t["phases"] if isinstance(p, dict) and "name" in p)
        if not phases:
            continue
        svg = render_svg(phases, rto_seconds=float(t["rto_seconds"] or 0), recovery=recovery_phases(str(t["kind"])),
                         title=f"{t['kind']} {t['environment']} {t['drill_id']}")
        parts.append(f'<details open class="timeline" data-kind="{escape(str(t["kind"]))}"><summary>{escape(str(t["kind"]))} '
                     f'— {escape(str(t["drill_id"]))} ({escape(str(t["verdict"]))})</summary>{svg}</details>')
    return "".join(parts) + "</section>"


def render(report: dict) -> str:
    """The whole page."""
    rows = []
    for row in report["environments"]:
        name = escape(row["environment"])
        prod = ' <span class="small">production</span>' if row.get("production") else ""
        if row.get("skipped"):
            rows.append(f'<tr data-env="{name}"><td>{name}{prod}</td><td colspan="5" class="small">skipped: '
                        f'{escape(row["skipped"])}</td></tr>')
            continue
        look = row.get("attention") or []
        cls = ' class="attention"' if look else ""
        cells = [f"{name}{prod}" + "".join(_small(a) for a in look), _drift_cell(row), _drill_cell(row),
                 _lock_cell(row), _ledger_cell(row), _protection_cell(row)]
        rows.append(f'<tr data-env="{name}"{cls}>' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    counts = report["counts"]
    timelines = "".join(_timelines(r) for r in report["environments"])
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>groundctl fleet status</title>'
            f'<style>{_CSS}</style></head><body>'
            f'<h1>groundctl fleet status</h1><div class="meta">{counts["environments"]} environments, '
            f'{counts["needing_attention"]} needing attention; generated {escape(report["generated_at"])}</div>'
            '<table id="fleet"><thead><tr><th>environment</th><th>last drift</th><th>last drill</th><th>lock</th>'
            '<th>ledger head</th><th>state bucket vs RPO</th></tr></thead><tbody>' + "".join(rows) +
            f'</tbody></table><h1 style="margin-top:1.5rem">Drill timelines</h1>{timelines or "<p>No drill recorded.</p>"}'
            '</body></html>\n')
