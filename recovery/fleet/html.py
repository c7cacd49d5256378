"""The fleet status as one static HTML file for triage. Pure.

Top: the summary strip (how many environments at each level, the critical ones named and linked). Then
one row per environment that needs acting on (critical, warning), worst first and production first: its worst
finding, whole (it wraps), since when it holds, and the next step (the command and its runbook); a fact cell
is coloured by the level of the finding about it, so red means act and what is only true is grey. The
environments with nothing to act on (info, ok) sit in one collapsed section. Every row links to its
environment's collapsed details: all findings (each with since when and its command), the facts, and the
latest drill of each kind as a small bar (one path per phase status, a few hundred bytes); the rules table,
with each rule's next step and runbook, closes the page. At most about 2.5 KiB per environment.
No script, no external asset: the page opens from a file share or a CI artifact as it is. Every value
from a record is escaped (records are written by many runs; a phase name or message may hold markup).
"""

from __future__ import annotations

import math
from html import escape
from typing import Optional

from recovery.drills.report import recovery_phases
from recovery.fleet.findings import RULES
from recovery.fleet.next_steps import NEXT_STEPS

_CSS = """
body{font-family:system-ui,sans-serif;margin:1rem 1.5rem;color:#212121;font-size:14px}
h1{font-size:1.3rem;margin:0}h2{font-size:1.1rem;margin:1.2rem 0 .4rem}
.meta{color:#616161;font-size:.8rem;margin:.1rem 0 .5rem}
#summary{display:flex;gap:.5rem;align-items:center;flex-wrap:wrap;margin-bottom:.6rem}
#summary .n{padding:.3rem .7rem;border-radius:.3rem;color:#fff;font-weight:600}
#summary .crit{flex-basis:100%;font-size:.85rem}
.critical{background:#c62828}.warning{background:#ef6c00}.info{background:#90a4ae}.ok{background:#2e7d32}
table{border-collapse:collapse;width:100%;font-size:.8rem;table-layout:fixed}
th,td{border-bottom:1px solid #e0e0e0;padding:.2rem .4rem;text-align:left;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis;vertical-align:top}
th{background:#f5f5f5}
td.w,td.x{white-space:normal;overflow-wrap:anywhere}
i,small{display:block;font-style:normal;color:#616161;font-size:.7rem}li i{display:inline}
code{font-size:.75rem;background:#f5f5f5;padding:0 .15rem}
td.lc{color:#c62828;font-weight:600}td.lw{color:#a64b00}td.li{color:#9e9e9e}#quiet td{color:#757575}
td b{display:inline-block;padding:0 .35rem;border-radius:.5rem;color:#fff;font-weight:500;font-size:.72rem}
.p{font-size:.7rem;color:#616161}
details{border-bottom:1px solid #eee;padding:.15rem 0}details>div{padding:.2rem 1rem .6rem}
svg.tl{width:560px;height:12px;display:block;margin:.2rem 0}.tl path{stroke-width:8}
.tl .a{stroke:#2e7d32}.tl .f{stroke:#c62828}.tl .r{stroke:#ef6c00}.tl .s{stroke:#9e9e9e}.tl .o{stroke:#bdbdbd}
.tl .t{stroke:#212121;stroke-width:1.5}
"""
_LEVELS = ("critical", "warning", "info", "ok")
_STATUS = {"achieved": "a", "failed": "f", "refused": "r", "skipped": "s"}
W = 560  # px: the drill bars' width


def _age(seconds: Optional[float]) -> str:
    if seconds is None:
        return ""
    if seconds < 7200:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.0f} h ago" if seconds < 172800 else f"{seconds / 86400:.0f} d ago"


def _anchor(name: str) -> str:
    return "env-" + escape(name, quote=True)


def _drift(row: dict) -> str:
    d = row.get("drift")
    if not d:
        return "never checked"
    return f"{d['result']} {_age(d['age_seconds'])}" + (f" ({', '.join(d['drifted_layers'])})" if d["drifted_layers"] else "")


def _drills(row: dict) -> str:
    parts = []
    for kind, k in ((row.get("drills") or {}).get("per_kind") or {}).items():
        last, trend = k.get("last"), (k.get("trend") or {}).get("trend")
        if last:
            parts.append(f"{kind} {last['verdict']}" + (f", {trend}" if trend in ("slower", "faster") else ""))
    return "; ".join(parts) or "none"


def _lock(row: dict) -> str:
    lock = row.get("lock") or {}
    if not lock.get("held"):
        return "free"
    return "stale" if lock.get("stale") else "unknown" if lock.get("verdict") == "unknown" else "held"


# Which findings each fact cell is about: the cell takes the worst level among them.
_CELL_RULES = {
    "drift": ("drift", "drift-check-failed", "drift-stale", "drift-never"),
    "drills": ("drill-failed", "drill-overdue", "drill-never", "drill-unverified", "rto-slower"),
    "lock": ("lock-stale", "lock-unknown", "lock-held"),
    "bucket": ("protection-fails", "protection-at-risk", "protection-unknown", "bucket-missing"),
}


def _cell(row: dict, column: str, text: str) -> str:
    levels = [f["level"] for f in row["findings"] if f["rule"] in _CELL_RULES[column]]
    level = min(levels, key=_LEVELS.index, default="ok")
    cls = {"critical": ' class="lc"', "warning": ' class="lw"', "info": ' class="li"'}.get(level, "")
    return f"<td{cls}>{escape(text)}</td>"


def _since(f: Optional[dict]) -> str:
    if not f or f.get("since_age_seconds") is None:
        return ""
    return f' <i>since {"" if f.get("since_exact", True) else "at least "}{escape(_age(f["since_age_seconds"]))}</i>'


def _next(f: Optional[dict]) -> str:
    step = (f or {}).get("next")
    if not step:
        return ""
    return f'<code>{escape(step["command"])}</code><small>{escape(step["runbook"])}</small>'


def _finding(f: dict) -> str:
    """A finding in the details with its command; its level links to its rule in the rules table (the runbook)."""
    return (f'<li><a href="#rule-{f["rule"]}">{f["level"]}</a>: {escape(f["what"])}{_since(f)} '
            f'<code>{escape(f["next"]["command"])}</code></li>')


def _rules() -> str:
    """The rules table (docs/fleet.md): what each level and next step on this page comes from."""
    rows = "".join(f'<tr id="rule-{rule}"><td>{rule}</td><td>{prod}</td><td>{other}</td>'
                   f'<td class="w">{escape(when)}</td><td class="x"><code>{escape(NEXT_STEPS[rule][0])}</code></td>'
                   f'<td class="x">{escape(NEXT_STEPS[rule][1])}</td></tr>' for rule, (prod, other, when) in RULES.items())
    return ('<h2>Rules</h2><table><colgroup><col style="width:9rem"><col style="width:6rem"><col style="width:6rem">'
            '<col><col style="width:18rem"><col style="width:18rem"></colgroup><thead><tr><th>rule</th>'
            '<th>production</th><th>elsewhere</th><th>when</th><th>next step</th><th>runbook</th></tr></thead>'
            f'<tbody>{rows}</tbody></table>')


def _row(row: dict) -> str:
    name, level = row["environment"], row["level"]
    worst = next((f for f in row["findings"] if f["level"] == level), None)
    more = len([f for f in row["findings"] if f["level"] in ("critical", "warning")]) - 1
    what = escape(worst["what"] if worst else row.get("note", "")) + (f" (+{more} more)" if more > 0 else "")
    if row.get("skipped") or row.get("error") or row.get("note"):
        facts = "<td></td>" * 4
    else:
        facts = (_cell(row, "drift", _drift(row)) + _cell(row, "drills", _drills(row)) + _cell(row, "lock", _lock(row))
                 + _cell(row, "bucket", (row.get("protection") or {}).get("verdict", "")))
    prod = " <span class=p>prod</span>" if row.get("production") else ""
    return (f'<tr data-env="{escape(name, quote=True)}" data-level="{level}"><td><b class="{level}">{level}</b></td>'
            f'<td><a href="#{_anchor(name)}">{escape(name)}</a>{prod}</td>'
            f'<td class="w">{what}{_since(worst)}</td><td class="x">{_next(worst)}</td>{facts}</tr>')


def _table(rows: list[dict]) -> str:
    return ('<table><colgroup><col style="width:5rem"><col style="width:10rem"><col><col style="width:16rem">'
            '<col style="width:8rem"><col style="width:11rem"><col style="width:3.5rem"><col style="width:4.5rem">'
            '</colgroup><thead><tr><th>level</th><th>environment</th><th>worst finding</th><th>next step</th>'
            '<th>last drift</th><th>last drills</th><th>lock</th><th>bucket</th></tr></thead><tbody>'
            + "".join(_row(r) for r in rows) + "</tbody></table>")


def _num(x) -> Optional[float]:
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) else None


def _bar(t: dict) -> str:
    """The drill as one small bar, 560 px wide: its phases on a time axis, one path per status (neighbouring
    phases of one status drawn as one segment), and the RTO as a tick from the recovery's start. Without
    phases (a passing drill known by its name), the recovery time alone."""
    if not isinstance(t.get("phases"), list):
        return ""
    timed = [(p, _num(p.get("started_at")), _num(p.get("ended_at"))) for p in t.get("phases") or []
             if isinstance(p, dict) and _num(p.get("started_at")) is not None]
    took = _num(t.get("recovery_seconds"))
    if not timed and took is not None:
        # A passing drill known by its name: its recovery time against the RTO, without phases.
        timed = [({"status": "achieved", "name": recovery_phases(str(t.get("kind")))[0]}, 0.0, took)]
    if not timed:
        return ""
    origin = min(s for _p, s, _e in timed)
    end = max([e for _p, _s, e in timed if e is not None] or [origin])
    rec = [s for p, s, _e in timed if p.get("name") in recovery_phases(str(t.get("kind")))]
    rto = _num(t.get("rto_seconds")) or 0.0
    rto_at = (min(rec) if rec else origin) - origin + rto
    scale = W / max(end - origin, rto_at, 1.0)
    segments: list[list] = []  # [status class, x0, x1]
    for p, s, e in sorted(timed, key=lambda x: x[1]):
        cls, x0, x1 = _STATUS.get(str(p.get("status")), "o"), (s - origin) * scale, ((e or s) - origin) * scale
        if segments and segments[-1][0] == cls and x0 - segments[-1][2] < 1:
            segments[-1][2] = max(segments[-1][2], x1)
        else:
            segments.append([cls, x0, max(x1, x0 + 1)])
    paths: dict[str, str] = {}
    for cls, x0, x1 in segments:
        paths[cls] = paths.get(cls, "") + f"M{round(x0)} 6h{max(1, round(x1 - x0))}"
    body = "".join(f'<path class="{c}" d="{d}"/>' for c, d in sorted(paths.items()))
    tick = f'<path class="t" d="M{round(rto_at * scale)} 0v12"/>' if rto else ""
    return f'<svg class="tl">{body}{tick}</svg>'  # W × 12 px (the CSS): one user unit is one pixel'


def _drill_detail(kind: str, k: dict, timeline: Optional[dict]) -> str:
    last, trend = k.get("last"), k.get("trend") or {}
    if not last:
        return f"<li>{escape(kind)}: no drill recorded</li>"
    took = last.get("recovery_seconds")
    reason = f" ({last.get('reason')})" if last.get("reason") else ""
    text = (f"{kind}: {last.get('verdict')}{reason} {_age(last.get('age_seconds'))}"
            + (f", recovered in {took:.0f} s of {last.get('rto_seconds') or 0:.0f} s RTO"
               if _num(took) is not None else "")
            + f"; trend {trend.get('trend')}"
            + (f" (median {trend['baseline']:.0f} ± {trend['threshold_seconds']:.0f} s)"
               if trend.get("baseline") is not None else ""))
    failed = next((p for p in (timeline or {}).get("phases") or [] if isinstance(p, dict)
                   and p.get("status") in ("failed", "refused")), None)
    why = f" — {failed.get('name')}: {failed.get('message')}" if failed else ""
    return f"<li>{escape(text + why)}{_bar(timeline) if timeline else ''}</li>"


def _restores(row: dict) -> str:
    """Per layer: when its restore was last proven and its measured RPO (what that restore would lose), or its last
    verdict."""
    parts = []
    for layer, x in ((row.get("rehearsals") or {}).get("layers") or {}).items():
        proven, last = x.get("last_proven"), x.get("last")
        text = f"{_age(proven['age_seconds'])} (RPO {(proven['rpo_seconds'] or 0) / 60:.0f} min)" if proven else "never"
        parts.append(f"{layer} {text}" + (", then failed" if last and last["outcome"] == "failed" else ""))
    return "; ".join(parts)


def _details(row: dict) -> str:
    name = row["environment"]
    items = "".join(_finding(f) for f in row["findings"])
    facts = []
    if row.get("drills"):
        timelines = {str(t.get("kind")): t for t in row["drills"].get("timelines") or []}
        facts += [_drill_detail(kind, k, timelines.get(kind)) for kind, k in row["drills"]["per_kind"].items()]
    restores = _restores(row)
    if restores:
        facts.append(f"<li>proven restores: {escape(restores)}</li>")
    led = row.get("ledger") or {}
    if led.get("head_at"):
        serials = ", ".join(f"{k} #{v['serial']}" for k, v in led["layers"].items())
        facts.append(f"<li>ledger head {escape(_age(led['head_age_seconds']))}: {escape(serials)}</li>")
    prot = row.get("protection") or {}
    if prot.get("exists", True) and prot.get("versioning") is not None:
        facts.append(f"<li>bucket {escape(row['bucket'])}: versioning {escape(str(prot.get('versioning')))}, "
                     f"RPO {row['rpo_minutes']} min, RTO {row['rto_minutes']} min</li>")
    # The link target sits inside the closed <details>: following a row's link opens it (browsers expand a
    # closed <details> to show a fragment's target), with no script.
    return (f'<details><summary>{escape(name)} — {row["level"]}</summary>'
            f'<div id="{_anchor(name)}"><ul>{items}</ul><ul>{"".join(facts)}</ul></div></details>')


def render(report: dict) -> str:
    """The whole page."""
    rows = report["environments"]
    counts = report["counts"]["by_level"]
    loud = [r for r in rows if r["level"] in ("critical", "warning")]
    quiet = [r for r in rows if r["level"] not in ("critical", "warning")]
    crit = [r["environment"] for r in rows if r["level"] == "critical"]
    strip = "".join(f'<span class="n {lvl}">{counts[lvl]} {lvl}</span>' for lvl in _LEVELS)
    named = ('<div class="crit">Critical: ' + ", ".join(f'<a href="#{_anchor(n)}">{escape(n)}</a>' for n in crit)
             + "</div>") if crit else '<div class="crit">Nothing critical.</div>'
    quiet_html = (f'<details id="quiet"><summary>{len(quiet)} environments with nothing to act on (info or ok)'
                  f'</summary>{_table(quiet)}</details>') if quiet else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>groundctl fleet status</title>'
            f'<style>{_CSS}</style></head><body><h1>groundctl fleet status</h1>'
            f'<div class="meta">{len(rows)} environments; generated {escape(report["generated_at"])}; levels and next '
            f'steps from the <a href="#rules">rules</a></div><div id="summary">{strip}{named}</div>'
            f'<div id="fleet">{_table(loud) if loud else "<p>No environment needs acting on.</p>"}{quiet_html}</div>'
            f'<h2>Details</h2>{"".join(_details(r) for r in rows)}<div id="rules">{_rules()}</div></body></html>\n')
