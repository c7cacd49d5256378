"""Reading state: both shapes, every schema version, three encodings, and clear refusals."""

from __future__ import annotations

import gzip
import hashlib
import json

import pytest
import zstandard

from bootstrap.kit.errors import BadInput
from recovery.state.state_bytes import NotAState
from recovery.state.state_parse import parse_state, read_state_file
from tests.conftest import STATES
from tests.test_state_integrity import ROOT, base_resources, build_state, urn

EXPECTED = {
    # name: (kind, version, resources, secrets provider, stack)
    "aws-bucket.json": ("export", 3, 3, "passphrase", None),
    "aws-kms-key.json": ("export", 3, 3, "passphrase", None),
    "aws-iam-oidc-provider.json": ("export", 3, 3, "passphrase", None),
    "aws-subnet-group.json": ("export", 3, 6, "passphrase", None),
    "checkpoint-v3.json": ("checkpoint", 3, 30, "b64", None),
    "checkpoint-secrets.json": ("checkpoint", 3, 30, "b64", None),
    # Pulumi's own 2017 testdata names its stack in `target`, a key CheckpointV1 does not have: Pulumi
    # reads no stack name from it, and neither does groundctl.
    "checkpoint-v1.json": ("checkpoint", 1, 30, None, None),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_shared_file_loads(name):
    raw = (STATES / name).read_bytes()
    doc = read_state_file(STATES / name)
    kind, version, count, secrets, stack = EXPECTED[name]
    assert (doc.kind, doc.version, len(doc.resources), doc.secrets_provider, doc.stack) == (
        kind, version, count, secrets, stack)
    assert doc.sha256 == hashlib.sha256(raw).hexdigest() and doc.size == len(raw)
    assert doc.compression == "none" and doc.pending_operations == ()
    assert all(r.urn and r.type for r in doc.resources)


def test_checkpoint_v1_has_no_manifest_and_keeps_its_types():
    doc = read_state_file(STATES / "checkpoint-v1.json")
    assert doc.manifest is None
    assert doc.counts_by_type()["aws:iam/rolePolicyAttachment:RolePolicyAttachment"] == 5
    assert len(doc.counts_by_type()) == 14


def test_resource_fields_are_read():
    doc = read_state_file(STATES / "aws-subnet-group.json")
    subnet = next(r for r in doc.resources if r.type == "aws:ec2/subnet:Subnet")
    assert subnet.custom and subnet.id.startswith("subnet-") and subnet.name == "mysubnet"
    assert subnet.provider.split("::")[-1] == doc.resources[1].id
    assert subnet.dependencies == (doc.resources[2].urn,)
    assert dict(subnet.property_dependencies)["vpcId"] == (doc.resources[2].urn,)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("codec,compress", [("gzip", gzip.compress),
                                            ("zstd", lambda b: zstandard.ZstdCompressor().compress(b))])
def test_compressed_copies_read_the_same(name, codec, compress):
    raw = (STATES / name).read_bytes()
    blob = compress(raw)
    plain, packed = parse_state(raw), parse_state(blob)
    assert packed.compression == codec
    assert packed.resources == plain.resources and packed.stack == plain.stack
    # The hash is of the stored bytes, as S3 holds them (what the ledger records).
    assert packed.sha256 == hashlib.sha256(blob).hexdigest() != plain.sha256


def test_export_and_checkpoint_of_one_deployment_agree():
    cp, ex = parse_state(build_state()), parse_state(build_state(export=True))
    assert (cp.kind, ex.kind) == ("checkpoint", "export")
    assert cp.resources == ex.resources and cp.manifest == ex.manifest
    assert cp.stack == "organization/network/dev" and ex.stack is None


@pytest.mark.parametrize("version", [2, 3, 4])
def test_schema_versions(version):
    assert parse_state(build_state(version=version)).version == version


def test_lineage_comes_from_the_root_stack_output():
    lineage = "6f1c9a3e-2b7d-4f7e-9d59-0d3f1f0b7a11"
    assert parse_state(build_state(base_resources(lineage))).lineage == lineage
    assert parse_state(build_state()).lineage is None


def test_pending_operations_are_listed_with_their_meaning():
    pending = [{"resource": {"urn": urn("aws:ec2/natGateway:NatGateway", "nat"), "type": "aws:ec2/natGateway:NatGateway",
                             "custom": True, "parent": ROOT}, "type": t}
               for t in ("creating", "updating", "deleting", "reading", "importing")]
    doc = parse_state(build_state(pending=pending))
    assert [p.type for p in doc.pending_operations] == ["creating", "updating", "deleting", "reading", "importing"]
    meanings = {p.type: p.meaning for p in doc.pending_operations}
    assert "import" in meanings["creating"] and "may or may not" in meanings["deleting"]
    assert doc.pending_operations[0].urn.endswith("::nat")


def test_old_shapes_load():
    # No deployment yet; a checkpoint written before Pulumi versioned them; an empty manifest.
    empty = parse_state(json.dumps({"version": 3, "checkpoint": {"stack": "dev", "latest": None}}).encode())
    assert empty.resources == () and empty.manifest is None
    legacy = parse_state(json.dumps({"stack": "dev", "latest": {"resources": []}}).encode())
    assert (legacy.kind, legacy.version, legacy.stack) == ("checkpoint", 0, "dev")
    bare = parse_state(json.dumps({"version": 3, "checkpoint": {"stack": "dev", "latest": {
        "manifest": {}, "resources": None}}}).encode())
    assert bare.manifest.magic == "" and bare.resources == ()


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_checkpoint_version_names_its_stack_in_stack(version):
    # sdk/go/common/apitype/core.go: CheckpointV1, V2 and V3 all carry `Stack ... json:"stack"`.
    raw = json.dumps({"version": version, "checkpoint": {"stack": "organization/network/dev", "latest": None}})
    assert parse_state(raw.encode()).stack == "organization/network/dev"
    ignored = json.dumps({"version": version, "checkpoint": {"target": "dev", "latest": None}})
    assert parse_state(ignored.encode()).stack is None  # Pulumi has no `target` field


@pytest.mark.parametrize("raw,why", [
    (b"", "not valid JSON"),
    (b"\x00\x01garbage", "not valid JSON"),
    (b"[1, 2]", "top level is a list"),
    (b'{"version": 3}', "neither a 'checkpoint' nor a 'deployment'"),
    (b'{"version": 9, "checkpoint": {}}', "schema version 9"),
    (b'{"version": true, "checkpoint": {}}', "'version' is a boolean"),
    (b'{"version": 3, "checkpoint": []}', "'checkpoint' is a list"),
    (b'{"version": 3, "deployment": {"resources": 7}}', "'resources' is a number"),
    (b'{"version": 3, "deployment": {"resources": [NaN]}}', "not valid JSON"),
    (b"\x1f\x8bnot really gzip", "does not decompress"),
    (b"\x28\xb5\x2f\xfdnot really zstd", "does not decompress"),
    (b"[" * 100000, "nested too deeply"),
])
def test_not_a_state(raw, why):
    with pytest.raises(NotAState) as info:
        parse_state(raw, "x.json")
    assert why in info.value.message and info.value.exit_code == 2
    assert info.value.message.startswith("x.json is not a readable Pulumi state")


def test_unreadable_json_gives_the_position():
    raw = build_state()[:-40]
    with pytest.raises(NotAState) as info:
        parse_state(raw, "cut.json")
    assert f"character {len(raw)}" in info.value.message or "line 1, column" in info.value.message


def test_decompression_bombs_are_refused():
    bomb = gzip.compress(b" " * (2 << 20))
    with pytest.raises(NotAState, match="more than"):
        from recovery.state.state_bytes import decompress

        decompress(bomb, "bomb.json.gz", limit=1 << 20)


def test_missing_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        read_state_file(tmp_path / "nope.json")
    with pytest.raises(BadInput, match="it is a folder, not a regular file"):
        read_state_file(tmp_path)


def test_load_json_keeps_everything_for_callers_that_need_inputs():
    # StateDoc drops resource inputs to save memory; the raw loader used by import planning must not.
    from recovery.state.state_bytes import load_json

    rs = base_resources()
    rs[2]["inputs"] = {"cidrBlock": "10.0.0.0/16"}
    raw = build_state(rs)
    assert load_json(raw, "x.json")["checkpoint"]["latest"]["resources"][2]["inputs"] == {"cidrBlock": "10.0.0.0/16"}
    assert parse_state(raw).resources[2].urn == rs[2]["urn"]
