"""The tagging rule, across every layer: recovery finds survivors by their groundctl tags."""

from __future__ import annotations

from typing import Iterable

from bootstrap.planning.posture.model import Context, Outcome, Rule, ok, said
from stacks.common.naming import TAG_ENV, TAG_LAYER, TAG_NAME


def _tags(ctx: Context) -> Iterable[Outcome]:
    from bootstrap.planning.mockrun import effective_tags, is_taggable  # pulumi_aws introspection, cached

    for layer, run in ctx.runs.items():
        for r in run.resources:
            if not (r.custom and r.type.startswith("aws:") and is_taggable(r.type)):
                continue
            tags = effective_tags(run, r)
            want = {TAG_ENV: ctx.spec.name, TAG_LAYER: layer, TAG_NAME: r.name}
            wrong = [f"{k}={said(tags.get(k))}" for k, v in want.items() if tags.get(k) != v]
            yield ok(not wrong, f"{layer}/{r.name}", "groundctl tags present", f"wrong or missing: {', '.join(wrong)}")


RULES: tuple[Rule, ...] = (
    Rule("aws-groundctl-tags", "all", ("aws:*",),
         "recovery finds and imports survivors by their groundctl tags", _tags),
)
