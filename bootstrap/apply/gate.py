"""Gate decisions: may this plan be applied, may these layers be destroyed? Pure functions over plain data.

The rules, in the order they are applied to a plan:
1. A skipped layer or a plan without changes passes (nothing would change).
2. Deleting or replacing a protected resource is never approved, whatever the flags.
3. Anything that deletes or replaces (a destructive change) needs `--allow-destroy`, also interactively:
   the flag is the operator's written intent, a keystroke at a prompt is not enough.
4. Otherwise `--yes` approves; without it the operator is asked (and without a terminal the answer is no).
Other risky changes (any change in the backend layer, a change to a protected resource) are listed
first in the question and in the plan files, but do not need `--allow-destroy`: the first `up` of an
environment adopts the backend by import, and that must be approvable with `--yes`.

When an approved plan is given (`--plan-dir`), the fresh preview must have the approved fingerprint: a
stale plan is never applied. That check adds to the gate, it does not replace the approval. The apply is then
held by Pulumi to the saved plan the reviewed preview wrote (its values, not only which fields change), so a
layer with changes needs one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Mapping, Optional

from bootstrap.kit.errors import BadInput, Refused
from bootstrap.planning.plan import DESTRUCTIVE_OPS, NO_CHANGE_OPS, Plan
from bootstrap.planning.render import saved_plan_name

Outcome = Literal["approved", "ask", "refused", "skip"]


@dataclass(frozen=True)
class GateDecision:
    outcome: Outcome
    reason: str
    flag: str | None = None  # the flag that would change a refusal, when there is one

    def refusal(self, layer: str) -> Refused:
        return Refused(f"The {layer} layer was not applied: {self.reason}. Nothing in {layer} was changed.")


def protected_deletions(plan: Plan) -> list[str]:
    return [c.urn for c in plan.changes if c.protected and c.operation in DESTRUCTIVE_OPS]


def destructive_changes(plan: Plan) -> list[str]:
    return [c.urn for c in plan.changes if c.operation in DESTRUCTIVE_OPS]


def _names(urns: list[str], limit: int = 5) -> str:
    shown = [u.rsplit("::", 1)[-1] for u in urns[:limit]]
    more = f" and {len(urns) - limit} more" if len(urns) > limit else ""
    return ", ".join(shown) + more


def decide_apply(plan: Plan, *, yes: bool, allow_destroy: bool) -> GateDecision:
    """What the gate says about applying `plan`; "ask" means the operator must confirm."""
    if plan.skipped_reason:
        return GateDecision("skip", plan.skipped_reason)
    if not plan.has_changes:
        return GateDecision("approved", "no changes")
    protected = protected_deletions(plan)
    if protected:
        return GateDecision(
            "refused",
            f"it would delete or replace protected resources ({_names(protected)}); protected resources "
            "are never deleted by groundctl — remove the protection in the layer's program first if the "
            "loss is really intended",
        )
    destructive = destructive_changes(plan)
    if destructive and not allow_destroy:
        return GateDecision(
            "refused",
            f"it would delete or replace {len(destructive)} resource(s) ({_names(destructive)}); review "
            "the plan and pass --allow-destroy to approve destructive changes",
            flag="--allow-destroy",
        )
    if yes:
        return GateDecision("approved", "approved by --yes")
    return GateDecision("ask", question(plan))


def after_confirm(decision: GateDecision, answered_yes: bool) -> GateDecision:
    """The decision once the operator has been asked (no terminal counts as no)."""
    return _answered(decision, answered_yes, "pass --yes to approve plans without destructive changes")


def _answered(decision: GateDecision, answered_yes: bool, yes_hint: str) -> GateDecision:
    if decision.outcome != "ask":
        return decision
    if answered_yes:
        return GateDecision("approved", "approved interactively")
    return GateDecision(
        "refused",
        "the operator did not approve it (without a terminal the answer is always no); re-run and "
        f"answer yes, or {yes_hint}",
        flag="--yes",
    )


def decide_setup(layer: str, environment: str, what: str, *, yes: bool, plan_dir: str | None) -> GateDecision:
    """May the writes a layer's preview needs first (`what`: creating its stack, adopting the backend) be
    done? Asked before them, like a plan: an unattended run without --yes stops here, having written nothing.
    With an approved plan they are refused: they come before any preview, so no plan reviewed them."""
    if plan_dir is not None:
        return GateDecision(
            "refused",
            f"before it can be previewed it needs to {what}, which no plan in {plan_dir} can have reviewed (the "
            f"layer had no stack to preview when it was planned); deploy it without --plan-dir (`groundctl up "
            f"{environment} --layers {layer}`, whose gates show this and its plan), then plan and review the rest",
        )
    if yes:
        return GateDecision("approved", f"approved by --yes: {what}")
    return GateDecision("ask", f"Before {layer} of {environment} can be previewed, groundctl must {what}. "
                               "Go ahead? (its plan is shown and asked for before anything is applied)")


def question(plan: Plan) -> str:
    counts = ", ".join(f"{n} {op}" for op, n in plan.counts.items() if op not in NO_CHANGE_OPS)
    risky = plan.risky
    note = f" ({len(risky)} risky: {risky[0][1]})" if risky else ""
    return f"Apply {plan.layer} to {plan.environment}: {counts}{note}?"


# -- destroy ------------------------------------------------------------------------------------------


def destroy_layers(requested: list[str], *, include_backend: bool, explicit: bool) -> list[str]:
    """The layers `destroy` acts on, in reverse order; the backend only with --include-backend."""
    if "backend" in requested and not include_backend:
        if explicit:
            raise Refused(
                "The backend layer holds every other layer's state and is never destroyed unless you "
                "pass --include-backend as well. Nothing was destroyed."
            )
        requested = [name for name in requested if name != "backend"]
    return list(reversed(requested))


def check_destroy_allowed(environment: str, production: bool, *, i_mean_production: bool) -> None:
    if production and not i_mean_production:
        raise Refused(
            f"'{environment}' is a production environment. Destroying it needs --i-mean-production as "
            "well; nothing was destroyed."
        )


def decide_destroy(environment: str, layers: list[str], *, yes: bool) -> GateDecision:
    if not layers:
        return GateDecision("approved", "no layers to destroy")
    if yes:
        return GateDecision("approved", "approved by --yes")
    return GateDecision("ask", f"Destroy {', '.join(layers)} of {environment}? Every resource in them is deleted.")


def after_destroy_confirm(decision: GateDecision, answered_yes: bool) -> GateDecision:
    return _answered(decision, answered_yes, "pass --yes")


# -- approved plans (--plan-dir) ------------------------------------------------------------------------


@dataclass(frozen=True)
class ApprovedPlan:
    layer: str
    environment: str
    fingerprint: str
    source: str
    not_deployed: bool = False  # the layer had no stack when it was planned: nothing was previewed
    saved_plan: Optional[tuple[str, str]] = None  # (file name, sha256) of the Pulumi plan the preview saved
    saved_plan_text: Optional[str] = None  # that file's text, once read and checked against its digest


def approved_from_documents(documents: Mapping[str, object], environment: str) -> dict[str, ApprovedPlan]:
    """The approved plan per layer from parsed plan JSON files (file name → content).

    Accepts one `Plan.to_dict()` per file, a list of them, or a combined document holding them under
    "plans" or "layers". The fingerprint is recomputed from the changes, so a hand-edited file whose
    changes and fingerprint disagree is refused rather than trusted.
    """
    found: dict[str, ApprovedPlan] = {}
    for source, doc in sorted(documents.items()):
        for item in _plan_dicts(doc):
            try:
                plan = Plan.from_dict(item)
            except (KeyError, TypeError, ValueError) as exc:
                what = f"its field '{exc.args[0]}' is missing" if isinstance(exc, KeyError) else "a field is malformed"
                raise BadInput(f"{source} is not a plan file written by `groundctl plan` ({what}). Re-create it with "
                               f"`groundctl plan {environment} --out DIR`.") from None
            stated = item.get("fingerprint")
            if stated and stated != plan.fingerprint:
                raise BadInput(
                    f"{source}: the {plan.layer} plan's fingerprint does not match its changes, so the file "
                    "was edited after `groundctl plan` wrote it. Re-create it with `groundctl plan`."
                )
            if plan.environment != environment:
                continue
            saved = _saved_plan_ref(item.get("saved_plan"), source, plan)
            previous = found.get(plan.layer)
            if previous and (previous.fingerprint, previous.saved_plan) != (plan.fingerprint, saved):
                raise BadInput(
                    f"{previous.source} and {source} hold different plans for {plan.layer}; keep only the "
                    "plan that was reviewed."
                )
            found[plan.layer] = ApprovedPlan(plan.layer, plan.environment, plan.fingerprint, source,
                                             plan.not_deployed, saved)
    return found


def _saved_plan_ref(ref: object, source: str, plan: Plan) -> Optional[tuple[str, str]]:
    if ref is None:
        return None
    name = saved_plan_name(plan.environment, plan.layer)
    if not (isinstance(ref, dict) and ref.get("file") == name and isinstance(ref.get("sha256"), str)
            and re.fullmatch(r"[0-9a-f]{64}", ref["sha256"])):
        raise BadInput(f"{source}: the {plan.layer} plan's 'saved_plan' is not {{\"file\": \"{name}\", \"sha256\": "
                       f"<64 hex digits>}}, so the file was edited after `groundctl plan` wrote it. Re-create it with "
                       f"`groundctl plan {plan.environment} --out DIR`.")
    return name, ref["sha256"]


def _plan_dicts(doc: object) -> list[dict]:
    # Other JSON in the directory (an offline plan, a note) is not a live plan and is left alone.
    def is_plan(d: object) -> bool:
        return isinstance(d, dict) and {"layer", "environment", "changes"} <= set(d)

    if isinstance(doc, list):
        return [d for d in doc if is_plan(d)]
    if not isinstance(doc, dict):
        return []
    for key in ("plans", "layers"):
        if isinstance(doc.get(key), list):
            return [d for d in doc[key] if is_plan(d)]
    return [doc] if is_plan(doc) else []


def check_fresh(approved: Mapping[str, ApprovedPlan], fresh: Plan, plan_dir: str) -> GateDecision | None:
    """None when the fresh preview is what was approved; otherwise the refusal."""
    entry = approved.get(fresh.layer)
    if entry is None:
        if fresh.skipped_reason or not fresh.has_changes:
            return None  # nothing would be applied, so there is nothing that needed approving
        return GateDecision(
            "refused",
            f"{plan_dir} holds no approved plan for the {fresh.layer} layer of {fresh.environment}, but a "
            f"fresh preview has changes; run `groundctl plan {fresh.environment} --out {plan_dir}`, review "
            "it, and re-run",
        )
    if entry.not_deployed and fresh.has_changes:
        return GateDecision(
            "refused",
            f"the plan in {entry.source} could not preview the {fresh.layer} layer: it was not deployed when "
            f"`groundctl plan` ran, so its {_summary(fresh)} were never reviewed; deploy it without --plan-dir "
            f"(`groundctl up {fresh.environment} --layers {fresh.layer}`, whose gate shows the plan), then plan "
            "and review the rest",
        )
    if entry.fingerprint != fresh.fingerprint:
        return GateDecision(
            "refused",
            f"the plan in {entry.source} is stale: it was approved with fingerprint "
            f"{entry.fingerprint[:12]}, a fresh preview has {fresh.fingerprint[:12]} ({_summary(fresh)}); "
            f"something changed since it was reviewed. Run `groundctl plan {fresh.environment}` again and "
            "review the new plan",
        )
    if fresh.has_changes and entry.saved_plan is None:
        return GateDecision(
            "refused",
            f"the plan in {entry.source} carries no Pulumi saved plan of the {fresh.layer} layer (it was written by an "
            "older groundctl), and without one the apply cannot be held to the values that were reviewed; run "
            f"`groundctl plan {fresh.environment}` again and review the new plan",
        )
    return None


def _summary(plan: Plan) -> str:
    counts = {op: n for op, n in plan.counts.items() if op not in NO_CHANGE_OPS}
    return ", ".join(f"{n} {op}" for op, n in counts.items()) or "no changes"
