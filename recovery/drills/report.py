"""A drill's report: the record kept in the state bucket, the Markdown and SVG for people, and history.

The JSON record goes to `.groundctl/drills/<env>/<drill_id>--<outcome>[-<secs>s].json` (`record_name`; while
the drill runs, its progress is `<drill_id>.json`);
Markdown and the timeline SVG go under `--out`. The report is passed through `redact` with the
secret values the drill knows of before anything is rendered, stored or written: a report never
holds a secret.
`summarize_history` (pure) lists past drills and says whether recovery is getting faster or slower.
"""

from __future__ import annotations

import json
import secrets as _secrets
import statistics
from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from bootstrap.records import layout
from bootstrap.records.runs import REDACTED
from bootstrap.kit.untrusted import Unreadable, inert
from recovery.evidence.drill_record import load_drill_record
from recovery.drills.phases import (FAILED, REBUILD_RECOVERY, REFUSED, SKIPPED, STATE_LOSS_RECOVERY,
                                   PhaseResult, Verdict, next_step)
from recovery.restoring.report import redact
from recovery.drills.timeline_svg import render as render_svg


def iso(ts: Optional[float]) -> Optional[str]:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def new_drill_id(kind: str, clock: Callable[[], float]) -> str:
    """Sortable by start: 20261202T110000Z-rebuild-cluster-3f9a1c."""
    stamp = datetime.fromtimestamp(clock(), tz=timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{kind}-{_secrets.token_hex(3)}"


def recovery_phases(kind: str) -> tuple[str, ...]:
    return REBUILD_RECOVERY if kind == "rebuild-cluster" else STATE_LOSS_RECOVERY


@dataclass(frozen=True)
class DrillReport:
    drill_id: str
    kind: str                           # rebuild-cluster | state-loss
    environment: str
    started_at: float
    ended_at: float
    rto_minutes: int
    phases: tuple[PhaseResult, ...]
    verdict: Verdict
    options: dict = field(default_factory=dict)
    layer: Optional[str] = None
    baseline: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)
    recovery_point: Optional[dict] = None
    plans: tuple[dict, ...] = ()
    left_half_done: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    @property
    def total_seconds(self) -> float:
        return round(self.ended_at - self.started_at, 3)

    @property
    def exit_code(self) -> int:
        """docs/exit-codes.md's contract. A dry run exits with the code the real drill would have where it stops;
        a phase stopped by an error exits as that error's class does (no credentials: 4)."""
        stop = self.phase(self.verdict.failed_phase) if self.verdict.failed_phase else None
        if stop is not None and stop.status in (REFUSED, FAILED):
            return stop.exit_code if stop.exit_code is not None else (3 if stop.status == REFUSED else 1)
        return {"passed": 0, "dry-run": 0, "refused": 3}.get(self.verdict.outcome, 1)

    def phase(self, name: str) -> Optional[PhaseResult]:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict:
        return {"drill_id": self.drill_id, "kind": self.kind, "environment": self.environment, "layer": self.layer,
                "started_at": iso(self.started_at), "ended_at": iso(self.ended_at), "started_ts": self.started_at,
                "ended_ts": self.ended_at, "total_seconds": self.total_seconds, "rto_minutes": self.rto_minutes,
                "verdict": self.verdict.to_dict(), "options": self.options,
                "phases": [p.to_dict() for p in self.phases], "baseline": self.baseline, "after": self.after,
                "recovery_point": self.recovery_point, "plans": list(self.plans),
                "left_half_done": list(self.left_half_done), "runs": list(self.runs)}


def redact_obj(obj: Any, secret_values: Iterable[str]) -> Any:
    """`obj` with every secret value masked: the recovery transcript's redaction (`recovery.restoring.report`),
    so a guide transcript embedded in a state-loss drill report is masked by the same rule."""
    return redact(obj, secret_values, REDACTED)


def redact_report(obj: Any, secret_values: list[str]) -> Any:
    """The report (and every dataclass in it) with each secret masked in every string field.

    Done before rendering, not after: Markdown, JSON and XML escape what they hold (a kubeconfig's
    newlines, a `|`, an `&`), and a secret escaped on the way out no longer matches its value.
    """
    if is_dataclass(obj):
        return replace(obj, **{f.name: redact_report(getattr(obj, f.name), secret_values)
                               for f in fields(obj) if f.init})
    if isinstance(obj, tuple):
        return tuple(redact_report(x, secret_values) for x in obj)
    return redact_obj(obj, secret_values)


def report_json(report: DrillReport, secret_values: Iterable[str] = ()) -> str:
    return json.dumps(redact_obj(report.to_dict(), secret_values), indent=2, sort_keys=True, default=str)


# -- Markdown -----------------------------------------------------------------------------------------

def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _secs(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.1f} s"


def what_to_look_at(report: DrillReport) -> list[str]:
    """The operator's reading list when the drill did not pass. Pure."""
    v, out = report.verdict, []
    failed = report.phase(v.failed_phase) if v.failed_phase else None
    if failed is not None:
        out.append(f"The **{failed.name}** phase {failed.status} ({failed.reason}): {failed.message}")
        out.append(f"Next step: {failed.next_step or next_step(failed.name, report.environment, report.layer or 'cluster')}")
    if v.reason == "OverRTO":
        slow = max((p for p in report.phases if p.seconds is not None), key=lambda p: p.seconds, default=None)
        if slow is not None:
            out.append(f"The recovery took {_secs(v.recovery_seconds)} against an RTO of {_secs(v.rto_seconds)}; "
                       f"the longest phase was {slow.name} ({_secs(slow.seconds)}). Shorten it, or revisit "
                       "`recovery.rto_minutes` in the spec if the objective is unrealistic.")
    for p in report.phases:
        if p.status == SKIPPED:
            out.append(f"{p.name} was skipped: {p.message} A drill with skipped phases proves only what ran.")
    for item in report.left_half_done:
        out.append(f"LEFT CHANGED: {item}.")
    if report.runs:
        out.append("Orchestrator run records: " + ", ".join(
            f"`{layout.run_key(report.environment, r)}`" for r in report.runs))
    return out


def render_markdown(report: DrillReport, svg_name: Optional[str] = None) -> str:
    v = report.verdict
    lines = [f"# Drill `{report.kind}` on `{report.environment}`" + (f" (layer `{report.layer}`)" if report.layer else ""),
             "", f"Drill `{report.drill_id}`, started {iso(report.started_at)}, ended {iso(report.ended_at)}.", "",
             f"**Verdict: {v.outcome.upper()}** ({v.reason}) — {v.message}", "",
             f"- Recovery time (measured over {', '.join(recovery_phases(report.kind))}): {_secs(v.recovery_seconds)}",
             f"- RTO (`recovery.rto_minutes`): {report.rto_minutes} min ({_secs(v.rto_seconds)})",
             f"- Whole drill, including the simulated loss: {_secs(report.total_seconds)}", ""]
    if svg_name:
        lines += [f"![timeline: one bar per phase against the RTO line]({svg_name})", ""]
    lines += ["## Phases", "", "| phase | status | attempted | achieved | reason | duration | message |",
              "|---|---|---|---|---|---|---|"]
    for p in report.phases:
        lines.append(f"| {p.name} | {p.status} | {'yes' if p.attempted else 'no'} | {'yes' if p.achieved else 'no'} | "
                     f"{_cell(p.reason)} | {_secs(p.seconds)} | {_cell(p.message)} |")
    look = what_to_look_at(report)
    if look:
        lines += ["", "## What to look at", ""] + [f"- {item}" for item in look]
    if report.recovery_point is not None:
        rp = report.recovery_point
        lines += ["", "## Recovery point", "",
                  f"- Serials lost: {len(rp.get('serials_lost') or [])} {rp.get('serials_lost') or ''}".rstrip(),
                  f"- Resources lost: {len(rp.get('resources_lost') or [])}",
                  f"- Restored state identical to the baseline: {rp.get('identical_to_baseline')}"]
    for title, data in (("Baseline", report.baseline), ("After", report.after)):
        if data:
            lines += ["", f"## {title}", "", "```json", json.dumps(data, indent=2, sort_keys=True, default=str), "```"]
    if report.plans:
        lines += ["", "## Plans (dry run)", ""]
        for plan in report.plans:
            lines.append(f"- **{plan.get('phase')}** ({plan.get('layer')}): {_cell(plan.get('summary'))}")
    return inert("\n".join(lines) + "\n")  # state and records may hold control characters


@dataclass(frozen=True)
class Written:
    bucket_key: Optional[str]
    files: tuple[str, ...]


RUNNING = "running"  # the outcome of a progress checkpoint (recovery.drills.runner)


def record_name(report: DrillReport) -> str:
    """`<drill_id>--<outcome>[-<seconds>s]` for a finished drill: a listing alone tells each drill's verdict and
    measured recovery time, so `fleet status` judges the RTO trend without reading every record
    (`recovery.evidence.reading`). A progress checkpoint keeps the plain `<drill_id>`, rewritten after each phase."""
    if report.verdict.outcome == RUNNING:
        return report.drill_id
    took = report.verdict.recovery_seconds
    return f"{report.drill_id}--{report.verdict.outcome}" + ("" if took is None else f"-{round(took)}s")


def write_report(report: DrillReport, *, store=None, out_dir: Optional[Path] = None,
                 secret_values: Iterable[str] = ()) -> Written:
    """The JSON record into the bucket (unless `store` is None) and Markdown, JSON and SVG under `out_dir`."""
    secret_values = list(secret_values)
    report = redact_report(report, secret_values)
    text = report_json(report)
    files: list[str] = []
    if out_dir is not None:  # local files first: they survive a bucket that cannot be written
        out_dir.mkdir(parents=True, exist_ok=True)
        svg = render_svg(report.phases, rto_seconds=report.verdict.rto_seconds,
                         recovery=recovery_phases(report.kind),
                         title=f"{report.kind} {report.environment} {report.drill_id}")
        outputs = {f"{report.drill_id}.svg": svg,
                   f"{report.drill_id}.md": render_markdown(report, f"{report.drill_id}.svg"),
                   f"{report.drill_id}.json": text + "\n"}
        for name, content in outputs.items():
            (out_dir / name).write_text(content)
            files.append(str(out_dir / name))
    key = None
    if store is not None:
        key = layout.drill_key(report.environment, record_name(report))
        store.put(key, text.encode())
        if report.verdict.outcome != RUNNING:
            # The finished record replaces the progress checkpoint (kept as a noncurrent version), so a drill
            # is listed once. Best effort: a checkpoint left behind is the same drill, shown once by its readers.
            try:
                store.delete(layout.drill_key(report.environment, report.drill_id))
            except Exception:  # noqa: BLE001 - the record itself is stored; a stray checkpoint is harmless
                pass
    return Written(key, tuple(files))


# -- history ------------------------------------------------------------------------------------------

def load_history(store, environment: str) -> tuple[list[dict], list[str]]:
    """Every stored drill record of the environment, and the keys that could not be read."""
    prefix = f"{layout.GROUNDCTL}/drills/{environment}/"
    records, unreadable = [], []
    for key, _size, _mod in store.keys(prefix):
        obj = store.get(key)
        try:
            records.append(load_drill_record(obj.body if obj is not None else None, key))
        except Unreadable:
            unreadable.append(key)
    return records, unreadable


def trend(seconds: list[float]) -> str:
    """improving | worsening | steady | not enough data — the latest against the mean of the ones before."""
    if len(seconds) < 2:
        return "not enough data"
    latest, before = seconds[-1], statistics.mean(seconds[:-1])
    if latest < before * 0.9:
        return "improving"
    if latest > before * 1.1:
        return "worsening"
    return "steady"


def summarize_history(records: list[dict], last_n: int = 5) -> dict:
    """Rows oldest first, and per drill kind the recovery times of the last `last_n` measured runs."""
    rows = sorted(({"drill_id": r.get("drill_id"), "kind": r.get("kind"), "layer": r.get("layer"),
                    "started_at": r.get("started_at"), "verdict": (r.get("verdict") or {}).get("outcome"),
                    "reason": (r.get("verdict") or {}).get("reason"),
                    "message": (r.get("verdict") or {}).get("message"),
                    "failed_phase": (r.get("verdict") or {}).get("failed_phase"),
                    "recovery_seconds": (r.get("verdict") or {}).get("recovery_seconds"),
                    "rto_seconds": (r.get("verdict") or {}).get("rto_seconds"),
                    "total_seconds": r.get("total_seconds"),
                    "dry_run": bool((r.get("options") or {}).get("dry_run"))} for r in records),
                  key=lambda row: str(row["started_at"]))
    trends = {}
    for kind in sorted({str(r["kind"]) for r in rows}):
        measured = [r for r in rows if r["kind"] == kind and r["recovery_seconds"] is not None
                    and r["verdict"] not in ("refused", "dry-run")][-last_n:]
        times = [float(r["recovery_seconds"]) for r in measured]
        trends[kind] = {"last_n": len(times), "recovery_seconds": times, "trend": trend(times),
                        "passed": sum(1 for r in measured if r["verdict"] == "passed")}
    return {"drills": rows, "trends": trends}


__all__ = ["DrillReport", "FAILED", "REFUSED", "new_drill_id", "write_report", "record_name", "render_markdown", "load_history",
           "redact_obj", "redact_report",
           "summarize_history", "trend", "what_to_look_at", "report_json"]
