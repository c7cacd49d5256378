"""Operation sets against Pulumi's own: which step ops are changes, and which need --allow-destroy.

Pulumi's HasChanges (pkg/engine/update.go) counts every op except same, read, discard (OpReadDiscard)
and read-replacement; the step kinds and what their Apply does are in pkg/resource/deploy/step.go.
"""

from __future__ import annotations

import pytest

from bootstrap.apply.gate import decide_apply
from bootstrap.planning.plan import Plan, ResourceChange

# Every StepOp of pkg/resource/deploy/step.go that appears in a preview: (is a change, destroys something live).
PULUMI_OPS = {
    "same": (False, False),
    "create": (True, False),
    "update": (True, False),
    "delete": (True, True),
    "replace": (True, True),
    "create-replacement": (True, True),
    "delete-replaced": (True, True),
    "read": (False, False),
    "read-replacement": (False, False),
    "refresh": (True, False),
    "discard": (False, False),
    "discard-replaced": (True, False),
    "remove-pending-replace": (True, False),
    "import": (True, False),
    "import-replacement": (True, True),
}


def one(op: str) -> Plan:
    rtype = "aws:ec2/subnet:Subnet"
    return Plan("network", "dev", (ResourceChange(f"urn:pulumi:dev::network::{rtype}::a", rtype, op),))


@pytest.mark.parametrize("op", sorted(PULUMI_OPS))
def test_each_pulumi_op_is_a_change_exactly_when_pulumi_says_so(op):
    changes, _ = PULUMI_OPS[op]
    assert one(op).has_changes is changes


@pytest.mark.parametrize("op", sorted(PULUMI_OPS))
def test_only_ops_that_remove_something_live_need_allow_destroy(op):
    changes, destroys = PULUMI_OPS[op]
    decision = decide_apply(one(op), yes=True, allow_destroy=False)
    if destroys:
        assert decision.outcome == "refused" and decision.flag == "--allow-destroy"
    else:
        assert decision.outcome == "approved"
        assert decision.reason == ("approved by --yes" if changes else "no changes")
    assert decide_apply(one(op), yes=True, allow_destroy=True).outcome == "approved"


def test_a_discard_is_not_counted_in_the_summary_or_the_fingerprint():
    plan = Plan("network", "dev", one("discard").changes + one("read-replacement").changes)
    assert plan.fingerprint == Plan("network", "dev", ()).fingerprint
    assert not plan.risky
