"""The phases that bring the state to match what is live: Reconcile (the chosen state against the
inventory, and the import plan for the survivors), Import (the survivors) and Pending creates (dropped
from the state once it is known what each made)."""

from __future__ import annotations

from bootstrap.engine.pending import other_pending_operations, refuse_other_pending
from recovery.guide.model import Condition, Stop
from recovery.guide.run import Run
from recovery.state.state_bytes import decompress, load_json


def _state_json(run: Run) -> dict:
    c = run.chosen_candidate
    obj = run.s.store.get(c.key, c.version_id)
    doc = load_json(decompress(obj.body, c.key)[0], c.key) if obj is not None else {}
    dep = doc.get("deployment") or (doc.get("checkpoint") or {}).get("latest") or {}
    return dep if isinstance(dep, dict) else {}


def reconcile(run: Run) -> Condition:
    from recovery.survivors.import_plan import plan_for_survivors
    from recovery.survivors.state_vs_live import classify

    dep = _state_json(run)
    resources = [r for r in dep.get("resources") or [] if isinstance(r, dict)]
    pending = [p for p in dep.get("pending_operations") or [] if isinstance(p, dict)]
    run.other_pending = tuple(other_pending_operations(dep))
    inv = run.s.inventory(run.o.environment, run.o.layer)
    cls = classify(resources, inv.items, pending, inv.types_covered or None)
    plan = plan_for_survivors(cls.survivors, resources)
    run.import_plan = plan.to_pulumi_json()
    run.classification = cls
    run.covered = frozenset(inv.types_covered or {i.type for i in inv.items})
    entries = {(e["type"], e.get("id")) for e in run.import_plan.get("resources", [])}
    run.planned_urns = frozenset(
        [r["urn"] for r in resources if isinstance(r.get("urn"), str) and r.get("delete") is not True]
        + [p.urn for p in cls.pending_creates if p.live and (p.type, p.live.import_id) in entries])
    details = {"counts": cls.counts(), "tagging_pages": inv.tagging_pages,
               "import_plan": run.import_plan,
               "in_state_not_live": [r.urn for r in cls.in_state_not_live],
               "pending_creates": [{"urn": p.urn, "live": p.live is not None,
                                    "import_id": p.live.import_id if p.live else None} for p in cls.pending_creates],
               "unnamed": [i.arn or i.import_id for i in cls.unnamed], "warnings": list(inv.warnings)}
    n = len(run.import_plan.get("resources", []))
    msg = (f"{len(cls.in_state_and_live)} resources are in state and live; {len(cls.survivors)} live ones are "
           f"missing from state and go into the import plan ({n} entries); {len(cls.in_state_not_live)} in "
           f"state are not live; {len(cls.pending_creates)} pending creates.")
    nxt = "import the survivors" if n else "verify with a refresh preview"
    if cls.in_state_not_live:
        # The verification is a preview: it refreshes in memory only (a DIY preview never saves a
        # snapshot), so these stay in the state whatever it shows.
        nxt += ("; review the resources in state that are not live: they stay in the state (the verification "
                "is a preview, which writes no state) and its plan shows each one the program still declares "
                f"as a create; `groundctl up {run.o.environment} --layers {run.o.layer}` makes them again")
    return Condition("reconcile", "achieved", "SurvivorsFound" if n else "StateMatchesLive", msg, nxt,
                     details=details)


def import_(run: Run) -> Condition:
    o, s = run.o, run.s
    entries = run.import_plan.get("resources", []) if run.import_plan else []
    if not entries:
        return Condition("import", "skipped", "NothingToImport", "No live resource is missing from state.",
                         "verify", details={})
    if run.other_pending:  # `pulumi import` is an update: it would drop them too
        return _other_pending_refusal(run, "import")
    if not (o.yes or s.confirm(f"Import {len(entries)} live resources into {o.project}/{o.environment}?")):
        raise Stop("declined")
    with s.lock_factory(s.store, o.environment, o.run_id):
        result = s.engine().import_resources(o.layer, run.import_plan)
        rec = s.append_record(s.store, o.project, o.environment, operation="import", run_id=o.run_id,
                              lineage=run.evidence.lineage, clock=s.clock)
    return Condition("import", "achieved", "Imported",
                     f"Imported {result.counts.get('import', len(entries))} resources; ledger serial "
                     f"{getattr(rec, 'serial', '-')}.", "verify", details={"counts": dict(result.counts)})


def pending(run: Run) -> Condition:
    from recovery.survivors.pending_creates import resolve_pending

    o, s = run.o, run.s
    creates = run.classification.pending_creates if run.classification else ()
    if run.other_pending:
        return _other_pending_refusal(run, "pending")
    if not creates:
        return Condition("pending", "skipped", "NoPendingCreates", "The state holds no pending create.",
                         "verify", details={})
    if o.dry_run:
        tracked = run.planned_urns
    else:
        deployment = s.engine().export_state(o.layer).get("deployment") or {}
        # Only URNs are read from the export (it holds plaintext secrets): nothing of it is kept.
        tracked = frozenset(r.get("urn") for r in deployment.get("resources") or []
                            if isinstance(r, dict) and r.get("delete") is not True)
    res = resolve_pending(creates, run.covered, tracked, clear_unchecked=o.clear_unchecked_creates)
    details = res.to_dict()
    if res.refused:
        flags = {d.flag for d in res.refused}
        lifted = flags == {res.refused[0].flag} and None not in flags
        return Condition("pending", "refused", "PendingCreateUnchecked" if lifted else "PendingCreateNotAdopted",
                         f"{len(res.refused)} of {len(creates)} pending creates cannot be dropped safely: "
                         + " ".join(f"{d.urn}: {d.reason}." for d in res.refused),
                         f"check each one by hand; re-run with {res.refused[0].flag} once you know they made "
                         "nothing" if lifted else "import the live ones by hand as the message says, then re-run",
                         details=details)
    if o.dry_run:
        return Condition("pending", "skipped", "DryRun", f"Would drop {len(creates)} pending creates from the "
                         f"state ({res.summary()}).", "re-run without --dry-run", attempted=False,
                         details=details)
    if not (o.yes or s.confirm(f"Drop {len(creates)} pending creates from {o.project}/{o.environment}'s state "
                               f"({res.summary()})?")):
        raise Stop("declined")
    with s.lock_factory(s.store, o.environment, o.run_id):
        s.engine().clear_pending_creates(o.layer, res.to_drop)
        rec = s.append_record(s.store, o.project, o.environment, operation="clear-pending-creates",
                              run_id=o.run_id, lineage=run.evidence.lineage, clock=s.clock)
    run.never_made = res.never_made
    details["ledger_serial"] = getattr(rec, "serial", None)
    return Condition("pending", "achieved", "PendingCreatesResolved",
                     f"Dropped {len(creates)} pending creates from state ({res.summary()}); ledger serial "
                     f"{getattr(rec, 'serial', '-')}.", "verify", details=details)


def _other_pending_refusal(run: Run, phase: str) -> Condition:
    o = run.o
    refusal = refuse_other_pending(o.environment, o.layer, run.other_pending)
    return Condition(phase, "refused", "OtherPendingOperations", refusal.message,
                     f"check each of those resources in the cloud, refresh them (`pulumi refresh --stack "
                     f"{o.environment} --target <urn>` in stacks/{o.layer}), then re-run `groundctl recover "
                     f"{o.environment} {o.layer}`",
                     details={"operations": [{"type": t, "urn": u} for t, u in run.other_pending]})
