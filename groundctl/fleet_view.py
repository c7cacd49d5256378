"""`fleet status` in a terminal: one line per environment that fits 80 columns, worst first, then every finding
that needs a person (and every reason an environment was not read) listed once under the table.

A cell holds a word and an age, never a sentence: a reason squeezed into a 13-character column wrapped one word
per line. The row says what state each fact is in; the lines under the table say why and what to do.
"""

from __future__ import annotations

import textwrap
from typing import Optional

from rich.table import Table
from rich.text import Text

from bootstrap.kit import console

STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan", "ok": "green"}
# (header, width) of the fixed columns; the environment's name takes what is left of 80 columns
COLUMNS = (("level", 8), ("environment (* prod)", 24), ("drift", 10), ("drills", 7), ("restore", 7), ("lock", 5),
           ("bucket", 7))


def age(seconds: Optional[float]) -> str:
    """`12m`, `5h`, `3d`: the short form a cell has room for."""
    if seconds is None:
        return "?"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h" if seconds < 172800 else f"{seconds / 86400:.0f}d"


def summary(report: dict) -> str:
    c = report["counts"]
    lv = c["by_level"]
    crit = c["critical_environments"]
    return (f"{c['environments']} environments: {lv['critical']} critical, {lv['warning']} warning, {lv['info']} info, "
            f"{lv['ok']} ok ({c['unreadable']} unreadable, {c['skipped']} skipped)"
            + (f". Critical: {', '.join(crit[:20])}{' …' if len(crit) > 20 else ''}" if crit else ""))


def _drills(r: dict) -> str:
    """The worst of the last drill of each kind (`slower`: all passed, one kind's recovery is slowing)."""
    verdicts = [k["last"]["verdict"] for k in ((r.get("drills") or {}).get("per_kind") or {}).values() if k.get("last")]
    for word in ("failed", "refused", "unverified", "dry-run", "running", "passed"):
        if word in verdicts:
            slower = any(((k.get("trend") or {}).get("trend") == "slower")
                         for k in (r["drills"].get("per_kind") or {}).values())
            return "slower" if word == "passed" and slower else word.replace("unverified", "unverif")
    return "none"


def _restore(r: dict) -> str:
    """The layer whose restore was proven longest ago (or never, or failed last): the one that matters."""
    worst = ""
    oldest = -1.0
    for x in ((r.get("rehearsals") or {}).get("layers") or {}).values():
        last, proven = x.get("last"), x.get("last_proven")
        if last and last["outcome"] == "failed":
            return "failed"
        if not proven:
            worst, oldest = "never", float("inf")
        elif (proven["age_seconds"] or 0) > oldest:
            worst, oldest = age(proven["age_seconds"]), proven["age_seconds"] or 0
    return worst or "none"


def cells(r: dict) -> list[str]:
    """The row of one environment (`recovery.fleet.status.summarize`), as plain words. Pure."""
    name = r["environment"] + (" *" if r.get("production") else "")
    if r.get("skipped") or r.get("error") or r.get("note"):
        state = "skipped" if r.get("skipped") else "unreadable" if r.get("error") else "no bucket"
        return [r["level"], name, state, "", "", "", ""]
    d, lock, prot = r.get("drift"), r.get("lock") or {}, r.get("protection") or {}
    return [r["level"], name, f"{d['result']} {age(d['age_seconds'])}" if d else "never", _drills(r), _restore(r),
            ("stale" if lock.get("stale") else "held") if lock.get("held") else "free", prot.get("verdict", "?")]


def findings_lines(report: dict) -> list[str]:
    """Every critical and warning finding, and every reason an environment was not read, once, worst first."""
    out = []
    for r in report["environments"]:
        for f in r["findings"]:
            if f["level"] in ("critical", "warning") or f["rule"] == "skipped":
                out.append(f"{f['level']}: {r['environment']}: {f['what']} [{f['rule']}]{_since(f)}; next: "
                           f"{f['next']['command']} ({f['next']['runbook']})")
    return out


def _since(f: dict) -> str:
    if f.get("since_age_seconds") is None:
        return ""
    return f" since {f['since']} ({'at least ' if not f.get('since_exact', True) else ''}{age(f['since_age_seconds'])} ago)"


def table(report: dict) -> Table:
    """The rows, each exactly one line of at most 80 columns (with no border, two spaces between columns)."""
    t = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for header, width in COLUMNS:
        t.add_column(header, width=width, no_wrap=True, overflow="ellipsis")
    for r in report["environments"]:
        words = cells(r)
        t.add_row(Text(words[0], style=STYLE[r["level"]]), *(Text(w) for w in words[1:]))
    return t


def show(report: dict) -> None:
    """The counts and the table on stdout; the findings under it, and the counts again at the end, on stderr."""
    console.data("\n".join(textwrap.wrap(f"fleet status — {summary(report)}", width=console.data_width())))
    console.data(table(report))
    for line in findings_lines(report):
        console.info(line)
    console.info(summary(report))
