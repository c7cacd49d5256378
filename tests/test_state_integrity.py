"""Pulumi's integrity rules, one by one, and the verdict on every shared real state file."""

from __future__ import annotations

import hashlib
import json

import pytest

from recovery.lineage.integrity import new_magic, stack_matches, verify_integrity
from recovery.state.state_parse import parse_state
from tests.conftest import STATES

STACK = "organization/network/dev"
PREFIX = "urn:pulumi:dev::network::"
ROOT = PREFIX + "pulumi:pulumi:Stack::network-dev"
PROV = PREFIX + "pulumi:providers:aws::default"
PROV_ID = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"


def urn(type_: str, name: str) -> str:
    return f"{PREFIX}{type_}::{name}"


def res(type_: str, name: str, **extra) -> dict:
    custom = extra.pop("custom", not type_.startswith("pulumi:pulumi:"))
    r = {"urn": urn(type_, name), "type": type_, "custom": custom}
    if custom and "id" not in extra:
        r["id"] = f"{name}-id"
    r.update(extra)
    return r


def base_resources(lineage: str | None = None) -> list[dict]:
    outputs = {"groundctl_lineage": lineage} if lineage else {}
    return [
        {"urn": ROOT, "type": "pulumi:pulumi:Stack", "custom": False, "outputs": outputs},
        {"urn": PROV, "type": "pulumi:providers:aws", "custom": True, "id": PROV_ID, "parent": ROOT},
        res("aws:ec2/vpc:Vpc", "vpc", parent=ROOT, provider=f"{PROV}::{PROV_ID}"),
        res("aws:ec2/subnet:Subnet", "a", parent=ROOT, provider=f"{PROV}::{PROV_ID}",
            dependencies=[urn("aws:ec2/vpc:Vpc", "vpc")],
            propertyDependencies={"vpcId": [urn("aws:ec2/vpc:Vpc", "vpc")]},
            deletedWith=urn("aws:ec2/vpc:Vpc", "vpc")),
    ]


def build_state(resources=None, *, version=3, stack=STACK, cli="v3.140.0", magic=None, pending=None,
                export=False, snippets=None) -> bytes:
    dep = {
        "manifest": {"time": "2026-12-01T00:00:00Z", "magic": new_magic(cli) if magic is None else magic,
                     "version": cli},
        "secrets_providers": {"type": "passphrase", "state": {"salt": "v1:x"}},
        "resources": base_resources() if resources is None else resources,
    }
    if pending is not None:
        dep["pending_operations"] = pending
    if snippets is not None:
        dep["snippets"] = snippets
    if export:
        return json.dumps({"version": version, "deployment": dep}).encode()
    return json.dumps({"version": version, "checkpoint": {"stack": stack, "latest": dep}}).encode()


def codes(raw: bytes, expected_stack=None) -> list[str]:
    return [f.code for f in verify_integrity(parse_state(raw), expected_stack)]


# -- the shared real files -------------------------------------------------------------------------

INTEGRAL = ["aws-bucket.json", "aws-iam-oidc-provider.json", "aws-kms-key.json", "aws-subnet-group.json"]
CHECKPOINTS = ["checkpoint-v1.json", "checkpoint-v3.json", "checkpoint-secrets.json"]


@pytest.mark.parametrize("name", INTEGRAL)
def test_recorded_exports_are_integral(name):
    raw = (STATES / name).read_bytes()
    doc = parse_state(raw)
    # Worked out from the file: the magic is sha256 of the CLI version, the provider and the stack
    # come before everything that uses them.
    assert doc.manifest.magic == hashlib.sha256(doc.manifest.version.encode()).hexdigest()
    assert verify_integrity(doc) == ()


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_pulumi_testdata_checkpoints_fail_on_parent_order(name):
    """Pulumi's own checkpoint fixtures list children before their component parents (they predate
    the ordering rule): VerifyIntegrity refuses them with 'child's parent comes after it'."""
    raw = (STATES / name).read_bytes()
    data = json.loads(raw)
    resources = data["checkpoint"]["latest"]["resources"]
    position = {r["urn"]: i for i, r in enumerate(resources)}
    late = [i for i, r in enumerate(resources) if r.get("parent") and position[r["parent"]] > i]
    findings = verify_integrity(parse_state(raw))
    assert [f.code for f in findings] == ["parent-after-child"] * len(late)
    assert [f.index for f in findings] == late
    assert len(late) == 23
    # The manifest is empty (v3) or absent (v1): Pulumi accepts an empty magic for an empty version.
    assert "bad-magic" not in {f.code for f in findings}


# -- each rule ------------------------------------------------------------------------------------

def test_a_well_formed_state_is_integral():
    assert codes(build_state(), STACK) == []


@pytest.mark.parametrize("cli,magic,ok", [
    ("v3.140.0", None, True),
    ("v3.140.0", "0" * 64, False),
    ("v3.140.0", "", False),
    ("", "", True),
    ("", new_magic("v3.140.0"), False),
])
def test_manifest_magic(cli, magic, ok):
    assert (codes(build_state(cli=cli, magic=magic)) == []) is ok
    if not ok:
        assert codes(build_state(cli=cli, magic=magic)) == ["bad-magic"]


def test_missing_urn_and_type():
    rs = base_resources() + [{"type": "aws:s3/bucket:Bucket", "custom": True, "id": "b"},
                             {"urn": urn("aws:s3/bucket:Bucket", "b2"), "custom": True, "id": "b2"}]
    assert codes(build_state(rs)) == ["missing-urn", "missing-type"]


def test_component_with_an_id():
    rs = base_resources() + [res("my:component:Thing", "c", custom=False, id="i-123", parent=ROOT)]
    findings = verify_integrity(parse_state(build_state(rs)))
    assert [f.code for f in findings] == ["custom-id-on-component"]
    assert findings[0].urn == urn("my:component:Thing", "c") and "i-123" in findings[0].message


def test_provider_must_come_first():
    rs = base_resources()
    rs[1], rs[2] = rs[2], rs[1]  # the VPC now uses the provider before it appears
    assert codes(build_state(rs)) == ["provider-after-use"]


def test_provider_reference_must_name_a_provider_with_the_same_id():
    rs = base_resources()
    rs[2]["provider"] = f"{PROV}::another-id"
    assert codes(build_state(rs)) == ["dangling-provider"]
    rs[2]["provider"] = "not-a-reference"
    assert codes(build_state(rs)) == ["bad-provider-reference"]
    rs[2]["provider"] = f"{urn('aws:ec2/vpc:Vpc', 'vpc')}::x"  # a URN that is not a provider's
    assert codes(build_state(rs)) == ["bad-provider-reference"]


def test_pending_replacement_may_use_a_replaced_provider():
    rs = base_resources()
    rs[2]["provider"] = f"{PROV}::old-id"
    rs[2]["pendingReplacement"] = True
    assert codes(build_state(rs)) == []


def test_provider_resource_with_a_non_provider_urn_is_not_referenceable():
    rs = base_resources()
    rs[1]["urn"] = urn("aws:ec2/vpc:Vpc", "fake-provider")
    assert "provider-not-referenceable" in codes(build_state(rs))


@pytest.mark.parametrize("field,value,later_code,missing_code", [
    ("parent", urn("aws:ec2/subnet:Subnet", "a"), "parent-after-child", "dangling-parent"),
    ("dependencies", [urn("aws:ec2/subnet:Subnet", "a")], "dependency-after-use", "dangling-dependency"),
    ("propertyDependencies", {"x": [urn("aws:ec2/subnet:Subnet", "a")]}, "property-dependency-after-use",
     "dangling-property-dependency"),
    ("deletedWith", urn("aws:ec2/subnet:Subnet", "a"), "deleted-with-after-use", "dangling-deleted-with"),
    # pkg/resource/deploy/snapshot.go, VerifyIntegrity, case ResourceReplaceWith
    ("replaceWith", [urn("aws:ec2/subnet:Subnet", "a")], "replace-with-after-use", "dangling-replace-with"),
])
def test_references_must_point_backwards(field, value, later_code, missing_code):
    rs = base_resources()
    rs[2][field] = value  # the VPC (index 2) now refers to the subnet (index 3)
    assert codes(build_state(rs)) == [later_code]
    rs = base_resources()[:3]
    rs[2][field] = value  # ... and here the subnet is not in the state at all
    assert codes(build_state(rs)) == [missing_code]


def test_a_parent_cycle_is_reported():
    a, b = urn("my:c:C", "a"), urn("my:c:C", "b")
    rs = base_resources() + [{"urn": a, "type": "my:c:C", "parent": b}, {"urn": b, "type": "my:c:C", "parent": a}]
    assert codes(build_state(rs)) == ["parent-after-child"]


@pytest.mark.parametrize("deletes,ok", [
    ((False, True), True), ((True, False), True), ((True, True), True), ((True, True, False), True),
    ((False, False), False), ((False, True, False), False),
])
def test_duplicate_urns_only_when_all_but_one_are_deleted(deletes, ok):
    dup = [res("aws:s3/bucket:Bucket", "b", parent=ROOT, delete=d) for d in deletes]
    found = codes(build_state(base_resources() + dup))
    assert (found == []) is ok
    if not ok:
        assert found == ["duplicate-urn"]


def test_stack_name_must_match_for_checkpoints():
    raw = build_state(stack="organization/network/prod")
    assert codes(raw, STACK) == ["stack-mismatch"]
    assert codes(raw) == []  # nothing expected, nothing checked
    assert codes(build_state(stack=STACK), "dev") == []
    assert codes(build_state(export=True), STACK) == []  # exports do not name their stack


@pytest.mark.parametrize("actual,expected,ok", [
    ("organization/network/dev", "organization/network/dev", True),
    ("organization/network/dev", "dev", True),
    ("dev", "organization/network/dev", True),
    ("organization/cluster/dev", "organization/network/dev", False),
    ("organization/network/prod", "dev", False),
    (None, "dev", False),
])
def test_stack_matches(actual, expected, ok):
    assert stack_matches(actual, expected) is ok


def test_wrong_field_types_are_findings_not_crashes():
    rs = base_resources()
    rs[2]["parent"] = 42
    rs[3]["dependencies"] = "not-a-list"
    found = verify_integrity(parse_state(build_state(rs)))
    assert [f.code for f in found] == ["malformed-field", "malformed-field"]
    assert "'parent' as a number" in found[0].message


def test_every_finding_has_a_code_a_urn_field_and_a_sentence():
    rs = base_resources()
    rs[2]["parent"] = urn("x:y:Z", "missing")
    (finding,) = verify_integrity(parse_state(build_state(rs)))
    assert finding.code == "dangling-parent"
    assert finding.urn == urn("aws:ec2/vpc:Vpc", "vpc")
    assert finding.message.endswith(".") and "missing" in finding.message


# -- where Pulumi's rules are easy to get subtly wrong (pkg/resource/deploy/snapshot.go VerifyIntegrity) ----


@pytest.mark.parametrize("field,value", [
    ("dependencies", [""]),
    ("dependencies", ["", urn("aws:ec2/vpc:Vpc", "vpc")]),
    ("propertyDependencies", {"vpcId": [""]}),
    ("replaceWith", [""]),
])
def test_empty_strings_in_dependency_lists_are_skipped(field, value):
    # pkg/resource/state.go GetAllDependencies drops "" from dependencies, property dependencies and
    # replaceWith before VerifyIntegrity looks them up.
    rs = base_resources()
    rs[3][field] = value
    assert codes(build_state(rs)) == []


def _provider_with_id(provider_id: str | None) -> list[dict]:
    rs = base_resources()
    if provider_id is None:
        del rs[1]["id"]
    else:
        rs[1]["id"] = provider_id
    return rs


@pytest.mark.parametrize("provider_id", [None, ""])
def test_a_provider_without_an_id_is_known_by_the_unknown_id(provider_id):
    # sdk/go/common/providers/reference.go: NewReference files a provider with an empty id under UnknownID,
    # and ParseReference takes `<urn>::` literally (id ""), so the two never meet.
    rs = _provider_with_id(provider_id)
    for r in rs[2:]:
        r["provider"] = f"{PROV}::{PROV_ID}"
    assert codes(build_state(rs)) == []  # refused by groundctl before: it filed the provider under ""
    rs[2]["provider"] = f"{PROV}::"
    found = verify_integrity(parse_state(build_state(rs)))
    assert [f.code for f in found] == ["dangling-provider"]  # accepted by groundctl before
    assert found[0].urn == urn("aws:ec2/vpc:Vpc", "vpc") and "empty" in found[0].message
    rs[2]["pendingReplacement"] = True  # Pulumi skips the lookup while the resource awaits replacement
    assert codes(build_state(rs)) == []


def test_an_empty_reference_id_names_no_provider_even_when_it_has_one():
    rs = _provider_with_id("real-id")
    rs[2]["provider"], rs[3]["provider"] = f"{PROV}::real-id", f"{PROV}::"
    assert codes(build_state(rs)) == ["dangling-provider"]


@pytest.mark.parametrize("snippets,expected", [
    ([{"uuid": "a", "name": "x", "type": "t", "code": ""}, {"uuid": "b"}], []),
    ([{"uuid": "a"}, {"name": "no-uuid"}], ["missing-snippet-uuid"]),
    ([{"uuid": ""}], ["missing-snippet-uuid"]),
    ([{"uuid": "a"}, {"uuid": "b"}, {"uuid": "a"}], ["duplicate-snippet-uuid"]),
    ([{"uuid": 7}], ["malformed-field", "missing-snippet-uuid"]),
    ([None], ["missing-snippet-uuid"]),
    (["text"], ["malformed-field", "missing-snippet-uuid"]),
])
def test_snippet_uuids_are_present_and_unique(snippets, expected):
    # pkg/resource/deploy/snapshot.go VerifyIntegrity, the snippet loop at its end.
    found = verify_integrity(parse_state(build_state(snippets=snippets)))
    assert [f.code for f in found] == expected
    if expected == ["duplicate-snippet-uuid"]:
        assert found[0].index == 2 and "0 and 2" in found[0].message


def test_groundctl_s_own_rule_is_labelled_as_such():
    rs = base_resources()
    rs[2]["parent"] = urn("x:y:Z", "missing")
    found = verify_integrity(parse_state(build_state(rs, stack="organization/network/prod")), STACK)
    assert {f.code: f.rule for f in found} == {"dangling-parent": "pulumi", "stack-mismatch": "groundctl"}
    mismatch = next(f for f in found if f.code == "stack-mismatch")
    assert "groundctl's own rule" in mismatch.message and mismatch.to_dict()["rule"] == "groundctl"


@pytest.mark.parametrize("pending,expected", [
    # Pulumi decodes null as empty and never checks pending operations (pkg/resource/stack/deployment.go,
    # DeserializeOperation): groundctl's own rule.
    ([None], [("malformed-pending-operation", "groundctl")]),
    ([{"type": "creating"}], [("malformed-pending-operation", "groundctl")]),
    ([{"resource": res("aws:s3/bucket:Bucket", "b")}], [("malformed-pending-operation", "groundctl")]),
    ([{"type": "", "resource": res("aws:s3/bucket:Bucket", "b")}], [("malformed-pending-operation", "groundctl")]),
    # A wrong JSON type fails Pulumi's decoder: Pulumi's rule.
    ([7], [("malformed-pending-operation", "pulumi")]),
    ([{"type": 7, "resource": res("aws:s3/bucket:Bucket", "b")}], [("malformed-field", "pulumi")]),
    ([{"type": "creating", "resource": res("aws:s3/bucket:Bucket", "b")}], []),
])
def test_pending_operation_checks_say_whose_rule_they_are(pending, expected):
    found = verify_integrity(parse_state(build_state(pending=pending)))
    assert [(f.code, f.rule) for f in found] == expected
    assert all(("groundctl's own rule" in f.message) == (f.rule == "groundctl") for f in found)
