"""Plans as Markdown (fit to paste as a pull-request comment) and JSON, per layer and combined.

Pure functions from `Plan` values to text; the caller writes the files. A plan carries only
URNs, types, operations and property keys, never values, so nothing rendered here can hold a
secret (the Pulumi saved plan written beside it holds values, its secrets encrypted by the stack's
provider). Layout: a summary line, counts per operation, risky changes first with their reasons,
then the full resource list in a collapsed <details> block.
"""

from __future__ import annotations

import hashlib
import json
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

from bootstrap.planning.plan import DESTRUCTIVE_OPS, NO_CHANGE_OPS, Plan, ResourceChange

# Reading order: what goes away first, what stays last.
_ORDER = ("delete", "replace", "delete-replaced", "create-replacement", "discard", "discard-replaced",
          "remove-pending-replace", "update", "create", "import", "refresh", "read", "same")
_WORDS = {"create": "to create", "update": "to update", "replace": "to replace", "delete": "to delete",
          "import": "to import", "refresh": "drifted", "same": "unchanged", "read": "read"}
_NONE: Mapping[str, str] = MappingProxyType({})
# GitHub refuses comments over 65,536 characters; past this the resource list is cut short.
MAX_DETAIL_ROWS = 400


def _rank(op: str) -> int:
    return _ORDER.index(op) if op in _ORDER else len(_ORDER) - 2


def _cell(text: str) -> str:
    """Table-safe text: a pipe or newline would break the row, a backtick the code span."""
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def _code(text: str) -> str:
    return f"`{_cell(text)}`"


def summary_line(counts: dict[str, int], risky: int) -> str:
    changing = [(op, n) for op, n in sorted(counts.items(), key=lambda kv: _rank(kv[0])) if op not in NO_CHANGE_OPS]
    parts = [f"{n} {_WORDS.get(op, op)}" for op, n in changing]
    text = ", ".join(parts) if parts else "No changes"
    same = counts.get("same", 0)
    if same:
        text += f" ({same} unchanged)"
    if risky:
        text += f" · **{risky} risky change{'s' if risky != 1 else ''}**"
    return text


def _counts_table(counts: dict[str, int]) -> list[str]:
    rows = ["| operation | resources |", "|---|---:|"]
    rows += [f"| {op} | {n} |" for op, n in sorted(counts.items(), key=lambda kv: _rank(kv[0]))]
    return rows


def _sorted_changes(changes: Iterable[ResourceChange]) -> list[ResourceChange]:
    return sorted(changes, key=lambda c: (_rank(c.operation), c.type, c.name))


def _gate_note(c: ResourceChange) -> str:
    """What the apply gate will ask of this change (see bootstrap/apply/gate.py)."""
    if c.operation not in DESTRUCTIVE_OPS:
        return ""
    if c.protected:
        return " — never applied while protected"
    return " — needs `--allow-destroy`"


def _risky_rows(items: Sequence[tuple[str, ResourceChange, str]], with_layer: bool) -> list[str]:
    head = "| layer | resource | type | operation | why |" if with_layer else "| resource | type | operation | why |"
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for layer, c, reason in sorted(items, key=lambda t: (_rank(t[1].operation), t[0], t[1].name)):
        lead = f"| {layer} " if with_layer else ""
        rows.append(f"{lead}| {_code(c.name)} | {_code(c.type)} | **{c.operation}** | {_cell(reason)}{_gate_note(c)} |")
    return rows


def _details(changes: Sequence[ResourceChange], title: str) -> list[str]:
    shown = _sorted_changes(changes)
    rows = ["<details>", f"<summary>{title}</summary>", "", "| resource | type | operation | changed keys |",
            "|---|---|---|---|"]
    for c in shown[:MAX_DETAIL_ROWS]:
        keys = ", ".join(_code(k) for k in c.diff_keys) or ""
        lock = " 🔒" if c.protected else ""
        rows.append(f"| {_code(c.name)}{lock} | {_code(c.type)} | {c.operation} | {keys} |")
    if len(shown) > MAX_DETAIL_ROWS:
        rows.append(f"| … {len(shown) - MAX_DETAIL_ROWS} more, see the JSON plan | | | |")
    rows += ["", "</details>"]
    return rows


def _layer_body(plan: Plan, heading: str) -> list[str]:
    if plan.skipped_reason:
        return [f"{heading} `{plan.layer}`: skipped", "", f"Skipped: {_cell(plan.skipped_reason)}"]
    risky = plan.risky
    lines = [f"{heading} `{plan.layer}` in `{plan.environment}`", "",
             f"{summary_line(plan.counts, len(risky))} · fingerprint `{plan.fingerprint[:12]}`", ""]
    if not plan.changes:
        return lines + ["The program declares no resources yet."]
    lines += _counts_table(plan.counts) + [""]
    if risky:
        lines += [f"**Risky changes ({len(risky)})** — review these first:", ""]
        lines += _risky_rows([(plan.layer, c, r) for c, r in risky], with_layer=False) + [""]
    lines += _details(plan.changes, f"All {len(plan.changes)} resources")
    return lines


def render_markdown(plan: Plan) -> str:
    """One layer's plan as a pull-request comment."""
    return "\n".join(_layer_body(plan, "### groundctl plan:")) + "\n"


def _totals(plans: Sequence[Plan]) -> dict[str, int]:
    total: dict[str, int] = {}
    for p in plans:
        for op, n in p.counts.items():
            total[op] = total.get(op, 0) + n
    return total


def not_deployed_yet(plans: Sequence[Plan]) -> str | None:
    """The one reason the layers give when none is deployed for the same reason (the environment has no state
    bucket yet), with its next step; None otherwise. Layers skipped for a reason of their own (no Kubernetes API
    here) were not previewed either."""
    reasons = {p.skipped_reason for p in plans if p.not_deployed}
    if len(reasons) == 1 and all(p.skipped_reason for p in plans):
        return reasons.pop()
    return None


def render_markdown_combined(plans: Sequence[Plan]) -> str:
    """Every layer of one environment's plan in one comment, in layer order."""
    if not plans:
        return "### groundctl plan\n\nNo layers were planned.\n"
    env = plans[0].environment
    risky = [(p.layer, c, r) for p in plans for c, r in p.risky]
    not_yet = not_deployed_yet(plans)
    lines = [f"### groundctl plan: `{env}` ({len(plans)} layer{'s' if len(plans) != 1 else ''})", "",
             f"**{_cell(not_yet)}**" if not_yet else summary_line(_totals(plans), len(risky)), "",
             "| layer | create | update | replace | delete | unchanged | risky | fingerprint |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for p in plans:
        if p.skipped_reason:
            # The reason every layer shares is said once, above the table.
            reason = "not deployed yet (above)" if p.skipped_reason == not_yet else _cell(p.skipped_reason)
            lines.append(f"| `{p.layer}` | skipped: {reason} | | | | | | |")
            continue
        c = p.counts
        lines.append(f"| `{p.layer}` | {c.get('create', 0)} | {c.get('update', 0)} | {c.get('replace', 0)} | "
                     f"{c.get('delete', 0)} | {c.get('same', 0)} | {len(p.risky)} | `{p.fingerprint[:12]}` |")
    lines.append("")
    if risky:
        lines += [f"**Risky changes ({len(risky)})** — review these first:", ""]
        lines += _risky_rows(risky, with_layer=True) + [""]
    for p in plans:
        if p.skipped_reason or not p.changes:
            continue
        lines += _details(p.changes, f"<code>{p.layer}</code>: {summary_line(p.counts, len(p.risky))}"
                          .replace("**", "")) + [""]
    return "\n".join(lines).rstrip() + "\n"


def plan_json(plan: Plan, saved_plans: Mapping[str, str] = _NONE) -> dict:
    """One layer's plan as data; `Plan.from_dict` reads it back (the approved-plan check). With the layer's
    Pulumi saved plan in `saved_plans` (layer → its text), the file it is written to and its digest, which
    bind it to this plan file."""
    doc = {**plan.to_dict(), "summary": summary_line(plan.counts, len(plan.risky)).replace("**", "")}
    if plan.layer in saved_plans:
        doc["saved_plan"] = {"file": saved_plan_name(plan.environment, plan.layer),
                             "sha256": hashlib.sha256(saved_plans[plan.layer].encode()).hexdigest()}
    return doc


def saved_plan_name(environment: str, layer: str) -> str:
    # Outside the plan files' `plan-<env>-*.json`: Pulumi's own format, read only by `up --plan-dir`.
    return f"pulumi-plan-{environment}-{layer}.json"


def combined_json(plans: Sequence[Plan], saved_plans: Mapping[str, str] = _NONE) -> dict:
    risky = sum(len(p.risky) for p in plans)
    not_yet = not_deployed_yet(plans)
    return {
        "environment": plans[0].environment if plans else None,
        "summary": not_yet or summary_line(_totals(plans), risky).replace("**", ""),
        "not_deployed": not_yet is not None,
        "counts": dict(sorted(_totals(plans).items())),
        "has_changes": any(p.has_changes for p in plans),
        "risky_count": risky,
        "layers": [plan_json(p, saved_plans) for p in plans],
    }


def live_plan_prefix(environment: str) -> str:
    # Named per environment, so the plans of several environments (and the offline plan-<env>.*) share a
    # directory without overwriting each other, and `up --plan-dir` reads only its environment's files.
    return f"plan-{environment}-"


def live_combined_names(environment: str) -> tuple[str, str]:
    """The combined live plan's file names (JSON, Markdown) for an environment."""
    prefix = live_plan_prefix(environment)
    return f"{prefix}live.json", f"{prefix}live.md"


def plan_files(plans: Sequence[Plan], saved_plans: Mapping[str, str] = _NONE) -> dict[str, str]:
    """File name → text for a plan directory: plan-<env>-<layer>.md/.json per layer, plan-<env>-live.md/.json
    combined, and pulumi-plan-<env>-<layer>.json, each layer's Pulumi saved plan in `saved_plans` (layer → text,
    its secret values encrypted by the stack's secrets provider), which `up --plan-dir` applies."""
    files: dict[str, str] = {}
    prefix = live_plan_prefix(plans[0].environment) if plans else "plan-"
    for p in plans:
        files[f"{prefix}{p.layer}.md"] = render_markdown(p)
        files[f"{prefix}{p.layer}.json"] = json.dumps(plan_json(p, saved_plans), indent=2, sort_keys=True) + "\n"
        if p.layer in saved_plans:
            files[saved_plan_name(p.environment, p.layer)] = saved_plans[p.layer]
    files[f"{prefix}live.md"] = render_markdown_combined(plans)
    files[f"{prefix}live.json"] = json.dumps(combined_json(plans, saved_plans), indent=2, sort_keys=True) + "\n"
    return files
