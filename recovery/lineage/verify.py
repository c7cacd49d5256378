"""Is a stack's current state integral, of the stack's lineage, and the head of an intact ledger?

One verdict as plain data, used by `groundctl state verify` and by the drills' preflight: `verified`
(all of it holds), `problems` (something does not), or `unverified` (nothing is wrong with the state
itself, but the stack has no ledger, so its lineage and serial are unknown: a rollback, a fork or a
state of another life of this stack cannot be told from the right one).
"""

from __future__ import annotations

import hashlib

from bootstrap.records import layout, ledger as led
from recovery.lineage.integrity import foreign_stacks, verify_integrity
from recovery.state.state_bytes import NotAState
from recovery.state.state_parse import parse_state


def verify_report(store, project: str, stack: str) -> dict:
    """Integrity, lineage and chain of the current state, as plain data with problems and warnings."""
    problems: list[dict] = []
    warnings: list[str] = []
    report: dict = {"project": project, "stack": stack, "current": None}

    def problem(code: str, message: str, **extra) -> None:
        problems.append({"code": code, "message": message, **extra})

    ledger = led.read_ledger(store, project, stack)
    chain = led.verify_chain(ledger.records)
    head = ledger.head
    report["ledger"] = {"records": len(ledger.records), "lineage": chain.lineage,
                        "head_serial": head.serial if head else None, "chain_ok": chain.ok}
    for f in (*ledger.problems, *chain.findings):
        problem(f"ledger-{f.code}", f.sentence)

    obj = led.current_state(store, project, stack)
    if obj is None and ledger.missing and not any(True for _ in store.versions(layout.stack_key(project, stack))):
        problem("never-deployed", f"{project} has never been deployed in {stack}: the bucket holds no state of "
                f"organization/{project}/{stack} (no version of it) and no ledger record, so there is nothing to "
                f"verify or recover; `groundctl up {stack} --layers {project}` creates it")
    elif obj is None:
        problem("state-missing", "the stack has no current state object (deleted or never written); run "
                f"`groundctl recover {stack} {project} --dry-run` to see what can be restored")
    else:
        sha = hashlib.sha256(obj.body).hexdigest()
        cur = {"key": obj.key, "version_id": obj.version_id, "sha256": sha, "size": len(obj.body)}
        report["current"] = cur
        try:
            doc = parse_state(obj.body, f"s3://{obj.key}")
        except NotAState as exc:
            problem("state-unreadable", exc.reason)
            doc = None
        if doc is not None:
            findings = verify_integrity(doc, f"organization/{project}/{stack}")
            foreign = foreign_stacks(doc, f"organization/{project}/{stack}")
            if foreign:
                problem("foreign-stack", f"the state's resources have URNs of another stack ({', '.join(foreign[:3])}"
                        f"; this is {stack}::{project}): it is another stack's state, copied or imported here; "
                        f"`groundctl recover {stack} {project} --dry-run` shows the versions of this stack's own",
                        stacks=list(foreign))
            cur.update(resources=len(doc.resources), lineage=doc.lineage,
                       pending_operations=[p.type for p in doc.pending_operations])
            for f in findings:
                problem(f"integrity-{f.code}", f.message)
            if doc.pending_operations:
                named = ", ".join(f"{p.type} {p.urn.rsplit('::', 1)[-1]}" for p in doc.pending_operations)
                problem("pending-operations", f"{len(doc.pending_operations)} operations were pending when this state "
                        f"was written ({named}): an update was interrupted; `groundctl recover` imports what it "
                        "created", operations=[p.to_dict() for p in doc.pending_operations])
            if chain.lineage and doc.lineage and doc.lineage != chain.lineage:
                problem("lineage-mismatch", f"the state has lineage {doc.lineage} over the ledger's {chain.lineage}")
            elif chain.lineage and not doc.lineage:
                warnings.append("the state names no lineage (its program exports no groundctl_lineage output)")
        if head is not None:
            recorded = [r for r in ledger.records if r.sha256 == sha]
            cur["serial"] = recorded[-1].serial if recorded else None
            if head.sha256 == sha:
                if head.version_id and obj.version_id and head.version_id != obj.version_id:
                    warnings.append(f"the current object holds serial {head.serial}'s state, stored again as "
                                    "another version")
            elif recorded:
                problem("rollback", f"the current state is serial {recorded[-1].serial} over newer serial "
                        f"{head.serial}: something outside groundctl rolled it back")
            else:
                problem("unrecorded", f"the current state is not in the ledger (head serial {head.serial}): it was "
                        "written by an interrupted run or outside groundctl")
    report["problems"] = problems
    report["warnings"] = warnings
    unknown = ledger.missing and obj is not None and not problems
    report["verdict"] = "problems" if problems else ("unverified" if unknown else "verified")
    report["ok"] = report["verdict"] == "verified"
    if unknown:
        report["unverified_reason"] = (
            f"{project}/{stack} has no ledger (nothing under .groundctl/ledger/{project}/{stack}/), so its lineage "
            "and serial are unknown: a rollback, a fork or another life of this stack cannot be told from the "
            "right state. groundctl's own `up`, `destroy` and `recover` write the ledger; a stack changed only "
            "outside groundctl has none, and one groundctl changed has lost its records (check the bucket's "
            f"versions of that prefix). `groundctl recover {stack} {project} --dry-run` shows the stored copies "
            "ordered by time (weaker evidence)")
    return report
