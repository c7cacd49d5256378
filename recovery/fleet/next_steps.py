"""What to do about a finding: the first command to run and the runbook that says what follows. Pure.

One entry per rule of `recovery.fleet.findings.RULES`; docs/fleet.md's rules table shows both, and a test
holds it to this one. A template's blanks: `<env>` the environment, `<bucket>` its state bucket, `<drill>`
the drill of the finding's kind as this environment runs it, `<object>` the unreadable record's S3 URL,
`<layer>` the finding's layer.
Each is filled shell-quoted: a record's key comes from the bucket, and a command an operator pastes must
run what it shows and nothing else.
"""

from __future__ import annotations

import shlex

FINDINGS_RUNBOOK = "runbooks/fleet-findings.md"

# rule: (command template, runbook)
NEXT_STEPS: dict[str, tuple[str, str]] = {
    "unreadable": ("groundctl status <env>", f"{FINDINGS_RUNBOOK}#unreadable"),
    "bucket-missing": ("aws s3api head-bucket --bucket <bucket>",
                       "runbooks/rebuild-lost-state-bucket.md#0-is-the-bucket-really-gone"),
    "drift": ("groundctl drift <env>", f"{FINDINGS_RUNBOOK}#drift"),
    "drift-check-failed": ("groundctl drift <env>", f"{FINDINGS_RUNBOOK}#drift-check-failed"),
    "drill-failed": ("groundctl drill history <env>", f"{FINDINGS_RUNBOOK}#drill-failed"),
    "lock-stale": ("groundctl lock break <env>", "runbooks/break-stale-lock.md"),
    "protection-fails": ("groundctl drift <env> --layers backend", f"{FINDINGS_RUNBOOK}#protection-fails"),
    "rehearsal-failed": ("groundctl state rehearse <env>", "runbooks/rehearsal-failed.md"),
    "rehearsal-overdue": ("groundctl state rehearse <env> --record", f"{FINDINGS_RUNBOOK}#rehearsal-overdue"),
    "rpo-exceeded": ("groundctl state versions <env> <layer>", f"{FINDINGS_RUNBOOK}#rpo-exceeded"),
    "drift-stale": ("groundctl drift <env> --record", f"{FINDINGS_RUNBOOK}#drift-stale"),
    "drift-never": ("groundctl drift <env> --record", f"{FINDINGS_RUNBOOK}#drift-never"),
    "drill-overdue": ("groundctl drill <drill> --dry-run", f"{FINDINGS_RUNBOOK}#drill-overdue"),
    "drill-never": ("groundctl drill <drill> --dry-run", f"{FINDINGS_RUNBOOK}#drill-never"),
    "drill-unverified": ("groundctl drill history <env>", f"{FINDINGS_RUNBOOK}#drill-unverified"),
    "rto-slower": ("groundctl drill history <env>", f"{FINDINGS_RUNBOOK}#rto-slower"),
    "record-unreadable": ("aws s3 cp <object> -", f"{FINDINGS_RUNBOOK}#record-unreadable"),
    "protection-unknown": ("groundctl drift <env> --layers backend", f"{FINDINGS_RUNBOOK}#protection-unknown"),
    "protection-at-risk": ("groundctl plan <env> --layers backend", f"{FINDINGS_RUNBOOK}#protection-at-risk"),
    "lock-unknown": ("groundctl lock break <env> --force", "runbooks/break-stale-lock.md#2-decide-is-the-holder-alive"),
    "lock-held": ("groundctl lock status <env>", "runbooks/break-stale-lock.md#1-look"),
    "skipped": ("groundctl status <env>", "runbooks/create-environment.md#a-local-environment-on-the-emulator"),
}


def _drill(finding: dict, environment: str, production: bool) -> str:
    """The drill of the finding's kind, with what this environment needs to run it."""
    if finding.get("kind") == "state-loss":
        return f"state-loss {environment} --layer {finding['layer']}"
    return f"rebuild-cluster {environment}" + (" --i-mean-production" if production else "")


def next_step(finding: dict, *, environment: str, production: bool, bucket: str) -> dict:
    """{command, runbook} for one finding of one environment."""
    template, runbook = NEXT_STEPS[finding["rule"]]
    q = shlex.quote
    blanks = {"<env>": q(environment), "<bucket>": q(bucket),
              "<object>": q(f"s3://{bucket}/{finding.get('key') or ''}"), "<layer>": q(finding.get("layer") or "")}
    if "<drill>" in template:
        blanks["<drill>"] = " ".join(q(w) for w in _drill(finding, environment, production).split())
    command = " ".join(blanks.get(word, word) for word in template.split())
    return {"command": command, "runbook": runbook}
