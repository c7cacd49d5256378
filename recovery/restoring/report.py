"""The record of a recovery: the JSON transcript made safe, and the Markdown report for people.

Both are rendered from `Transcript.to_dict()` after `redact`, so a secret value the run knows about
(a passphrase, a deploy key, a secret stack output) can never reach a file or a terminal, whatever
phase put it into a message. Pure: dicts in, strings out.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from bootstrap.kit.masking import mask_obj
from bootstrap.kit.untrusted import inert

MASK = "[secret]"
_STATUS_MARK = {"achieved": "achieved", "skipped": "skipped", "refused": "REFUSED", "failed": "FAILED",
                "not-attempted": "not attempted"}


def redact(obj: Any, secrets: Iterable[str], mask: str = MASK) -> Any:
    """`obj` (a string, or dicts and lists of them) with every occurrence of every secret value replaced
    by `mask`."""
    return mask_obj(obj, secrets, mask)


def transcript_json(transcript: dict, secrets: Iterable[str] = ()) -> str:
    return json.dumps(redact(transcript, secrets), indent=2, sort_keys=True, default=str) + "\n"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render_markdown(transcript: dict, secrets: Iterable[str] = ()) -> str:
    t = redact(transcript, secrets)
    out = [f"# State recovery: {t['layer']} / {t['environment']}", ""]
    wrote = [c["phase"] for c in t["phases"] if c["status"] == "achieved" and c["phase"] in ("restore", "import",
                                                                                              "pending")]
    verdict = {"complete": "**Complete**: the verification plan shows no changes"
                           + (" other than the creates the interrupted update never finished." if
                              any(c["reason"] == "OnlyUnfinishedCreates" for c in t["phases"]) else "."),
               "dry-run": "**Dry run**: nothing was written.",
               "refused": (f"**Refused** after {', '.join(wrote)}; nothing was written from the refusal on."
                           if wrote else "**Refused**: nothing was restored."),
               "declined": "**Declined** by the operator.",
               "incomplete": "**Not complete**: a phase failed; see below."}.get(t["outcome"], t["outcome"])
    opts = ", ".join(k for k, v in t["options"].items() if v) or "none"
    out += [verdict, "", f"- run: `{t['run_id']}`", f"- started: {t['started_at']}, finished: {t['finished_at']}",
            f"- options: {opts}", f"- state downloads: {t.get('state_downloads', '-')}", "",
            "## Phases", "", "| phase | status | reason | message | next step |", "|---|---|---|---|---|"]
    for c in t["phases"]:
        out.append(f"| {c['phase']} | {_STATUS_MARK.get(c['status'], c['status'])} | {c['reason']} | "
                   f"{_cell(c['message'])} | {_cell(c['next_step'])} |")
    phases = {c["phase"]: c for c in t["phases"]}
    choose = phases.get("choose", {}).get("details") or {}
    if choose:
        out += ["", "## Choice", ""]
        if choose.get("chosen"):
            c = choose["chosen"]
            out.append(f"- chosen: `{c['key']}` version `{c['version_id']}` ({c['source']}, {c['time']}), serial "
                       f"{c['serial'] if c['serial'] is not None else 'unledgered'}, {c['resources']} resources, "
                       f"lineage `{c['lineage']}`, sha256 `{(c['sha256'] or '')[:16]}…`")
        for r in choose.get("refusals", []):
            out.append(f"- refused ({r['code']}{', flag that lifts it: ' + r['flag'] if r.get('flag') else ', no flag lifts it'}): {r['message']}")
        for r in choose.get("overridden", []):
            out.append(f"- allowed by {r['flag']}: {r['message']}")
        for s in choose.get("skipped", []):
            out.append(f"- passed over: {s['candidate']}: {s['reason']}")
        for n in choose.get("notes", []):
            out.append(f"- note: {n}")
        point = choose.get("recovery_point")
        if point:
            out += ["", "### Recovery point", "", f"- newest known state: {point['newest_known']}",
                    f"- serials lost: {', '.join(map(str, point['serials_lost'])) or 'none'}",
                    f"- resources lost from state: {len(point['resources_lost'])}"
                    + ("" if point["newest_readable"] else
                       f" (the newest state cannot be read to compare; the ledger head held "
                       f"{point.get('head_resources')} resources, the chosen state {point.get('chosen_resources')})")]
            out += [f"  - `{u}`" for u in point["resources_lost"][:50]]
    lineage = phases.get("lineage", {}).get("details") or {}
    if lineage.get("forks"):
        out += ["", "## Fork", ""] + [f"- serial {f['serial']}: {f['message']}" for f in lineage["forks"]]
    rec = phases.get("reconcile", {}).get("details") or {}
    if rec:
        plan = rec.get("import_plan") or {}
        out += ["", "## Reconcile", "", f"- counts: {rec.get('counts')}"]
        out += [f"- import `{e['type']}` `{e['name']}` id `{e['id']}`" for e in plan.get("resources", [])[:100]]
        out += [f"- in state, not live: `{u}`" for u in rec.get("in_state_not_live", [])[:100]]
        out += [f"- pending create `{p['urn']}`: " + (f"live as `{p['import_id']}`" if p["live"] else "not found live")
                for p in rec.get("pending_creates", [])]
    pending = phases.get("pending", {}).get("details") or {}
    if pending.get("decisions"):
        done = phases["pending"]["status"] == "achieved"
        verbs = {"import": "imported" if done else "import", "clear": "cleared" if done else "clear",
                 "refuse": "REFUSED"}
        out += ["", "## Pending creates", ""]
        out += [f"- {verbs[d['action']]} `{d['urn']}`: {_cell(d['reason'])}" for d in pending["decisions"]]
    return inert("\n".join(out) + "\n")  # state and records may hold control characters
