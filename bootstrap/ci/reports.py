"""What the merge and drift jobs show: the job summary of an `up` (its run record and, when it did not
succeed, why), and the body of the one issue a drifted environment keeps open. Pure text from the JSON
groundctl printed; the workflow does the posting."""

from __future__ import annotations

import json
from typing import Optional, Sequence

from bootstrap.ci.comment import CUT_MARK, GITHUB_COMMENT_LIMIT, Block, fit, marker
from bootstrap.ci.workflows import DRIFT_TITLE

_MARK = {"succeeded": "✅", "refused": "⛔", "failed": "❌", "interrupted": "⚠️", "running": "⚠️"}
# A job summary may be much larger, but a reader wants the reason, not a wall of log.
MAX_LOG_LINES = 20


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("`", "'")


def error_lines(log_text: str) -> list[str]:
    """What groundctl reported as errors on stderr (`error: …`), in order, at most MAX_LOG_LINES."""
    found = [line[len("error: "):].strip() for line in log_text.splitlines() if line.startswith("error: ")]
    return found[-MAX_LOG_LINES:]


def up_summary(environment: str, record: Optional[dict], log_text: str, plan_dir: str = "",
               exit_code: Optional[int] = None) -> str:
    """The merge job's summary: the outcome, the reason it stopped, each layer, and the run record itself."""
    errors = error_lines(log_text)
    if record is None or record.get("stopped_before_report") is True:
        # No record, or the front door's record of a start that failed (groundctl.failed_start): its reason.
        code = exit_code if exit_code is not None else (record or {}).get("exit_code")
        code = f" (exit {code})" if isinstance(code, int) else ""
        said = str((record or {}).get("message") or "")
        why = said or "; ".join(errors) or "groundctl printed no error; see the job log"
        return "\n".join([
            f"## groundctl up `{environment}`: ❌ stopped before the run started{code}", "",
            f"**Why:** {why}", "",
            "No run record was written: groundctl stopped before it opened the environment (a bad spec, a "
            "missing approved plan, no credentials). Nothing was changed.", ""])
    outcome = record.get("outcome", "unknown")
    lines = [f"## groundctl up `{environment}`: {_MARK.get(outcome, '❔')} {outcome}", ""]
    if outcome != "succeeded":
        reason = record.get("message") or "; ".join(errors) or "see the job log"
        lines += [f"**Why:** {reason}", ""]
        lines += [f"**groundctl said:** {e}" for e in errors if e not in reason]
        if any(e not in reason for e in errors):
            lines.append("")
    facts = [f"run `{record.get('run_id', '?')}`"]
    if record.get("stopped_at"):
        facts.append(f"stopped at `{record['stopped_at']}`")
    if plan_dir:
        facts.append(f"approved plan `{plan_dir}`")
    if record.get("git_commit"):
        facts.append(f"commit `{str(record['git_commit'])[:12]}`")
    if record.get("stored") is True:
        facts.append(f"record `.groundctl/runs/{environment}/{record.get('run_id', '?')}.json` in the state bucket")
    lines += [" · ".join(facts), ""]
    if record.get("stored") is False:
        lines += ["The run record was not stored in the state bucket (the run stopped before the bucket was ready, or "
                  "the write failed): the copy below is the only one.", ""]
    lines += ["| layer | attempted | achieved | serial | fingerprint | detail |", "|---|---|---|---:|---|---|"]
    for lay in record.get("layers", []):
        fp = lay.get("fingerprint") or ""
        lines.append(f"| `{_cell(lay.get('layer', ''))}` | {_cell(lay.get('attempted', ''))} | "
                     f"{_cell(lay.get('achieved', ''))} | {'' if lay.get('serial') is None else lay['serial']} | "
                     f"{f'`{fp[:12]}`' if fp else ''} | {_cell(lay.get('message', ''))} |")
    body = json.dumps(record, indent=2, sort_keys=True)
    fence = "`" * max(4, _longest_backtick_run(body) + 1)
    lines += ["", "<details>", "<summary>Run record (JSON)</summary>", "", f"{fence}json", body, fence, "",
              "</details>", ""]
    return "\n".join(lines)


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return longest


# -- drift --------------------------------------------------------------------------------------------


def drift_title(environment: str) -> str:
    return DRIFT_TITLE.format(environment=environment)


def drift_issue(report: dict, run_url: str = "", commit: str = "", limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The issue body for a `groundctl drift --json` report that found drift."""
    env = report.get("environment", "?")
    layers = report.get("layers", [])
    drifted = [lay for lay in layers if lay.get("state") in ("drift", "not deployed")]
    names = ", ".join(f"`{lay.get('layer')}`" for lay in drifted) or "no layer"
    verb = "no longer matches" if len(drifted) == 1 else "no longer match"
    head = [marker("drift", env),
            f"groundctl found drift in **`{env}`**: {names} {verb} what the code and the recorded state say.", "",
            "| layer | state | detail |", "|---|---|---|"]
    head += [f"| `{_cell(lay.get('layer', ''))}` | {_cell(lay.get('state', ''))} | {_cell(lay.get('summary', ''))} |"
             for lay in layers]
    blocks = [_drift_block(lay) for lay in drifted if lay.get("changes")]
    found = "Found by " + (f"[this run]({run_url})" if run_url else "the scheduled drift run") + (
        f" at commit `{commit[:12]}`" if commit else "") + "."
    tail = "\n".join(["", found, "",
                      f"Check it yourself with `groundctl drift {env}`. Bring the environment back through a reviewed "
                      "pull request (its plan shows what would change), or adopt the change in the code. This issue "
                      "is updated by every scheduled run that still finds drift.", ""])

    def cut_note(left_out: Sequence[Block]) -> str:
        return (f"\n> {CUT_MARK} Cut to fit GitHub's {limit:,}-character limit: left out "
                f"{', '.join(b.label for b in left_out)}. Run `groundctl drift {env} --json` for the full list.\n")

    return fit("\n".join(head) + "\n\n", blocks, tail, cut_note, limit)


def _drift_block(layer: dict) -> Block:
    name = layer.get("layer", "?")
    rows = ["<details>", f"<summary><code>{_cell(name)}</code>: {_cell(layer.get('summary', ''))}</summary>", "",
            "| resource | type | operation | changed keys |", "|---|---|---|---|"]
    for c in layer.get("changes", []):
        urn = str(c.get("urn", ""))
        rows.append(f"| `{_cell(urn.rsplit('::', 1)[-1])}` | `{_cell(c.get('type', ''))}` | {_cell(c.get('operation', ''))} | "
                    f"{', '.join(f'`{_cell(k)}`' for k in c.get('diff_keys', []))} |")
    rows += ["", "</details>", "", ""]
    return Block(f"the changes in `{name}`", "\n".join(rows))
