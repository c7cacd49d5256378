"""The object store against the emulator: conditional writes, versions, copies."""

from __future__ import annotations


from bootstrap.aws.objectstore import ObjectStore


def test_put_if_absent_only_first_wins(aws, bucket):
    store = ObjectStore(aws.client("s3"), bucket)
    assert store.put_if_absent("a.json", b"one") is True
    assert store.put_if_absent("a.json", b"two") is False
    assert store.get("a.json").body == b"one"


def test_put_if_absent_is_true_when_our_own_bytes_are_there(aws, bucket):
    # A retried conditional write whose first attempt landed must still count as ours.
    store = ObjectStore(aws.client("s3"), bucket)
    store.put_if_absent("b.json", b"same")
    assert store.put_if_absent("b.json", b"same") is True


def test_versions_and_copy_version(aws, bucket):
    store = ObjectStore(aws.client("s3"), bucket)
    v1 = store.put("k.json", b"v1")
    store.put("k.json", b"v2")
    store.delete("k.json")
    assert store.get("k.json") is None
    versions = list(store.versions("k.json"))
    assert sum(v.delete_marker for v in versions) == 1
    assert {store.get("k.json", v.version_id).body for v in versions if not v.delete_marker} == {b"v1", b"v2"}
    new = store.copy_version("k.json", v1, "k.json")
    assert new and new != v1
    assert store.get("k.json").body == b"v1"


def test_versions_paginate(aws, bucket):
    store = ObjectStore(aws.client("s3"), bucket)
    for i in range(25):
        store.put("p.json", str(i).encode())
    for i in range(7):
        store.put(f"p.json.{i}", b"x")
    assert len(list(store.versions("p.json", page_size=4))) == 32
    assert len(list(store.keys("p.json", page_size=3))) == 8
