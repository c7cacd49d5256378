"""The emulator's ListObjectVersions answers as before, without copying stored bodies (bootstrap/aws/emulator.py).

These talk to the session's emulator over HTTP; the registry check looks inside it, as it runs in this
process."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture
def s3(aws):
    return aws.client("s3")


def _write_history(s3, bucket) -> dict[str, list[tuple[str, str, bytes | None]]]:
    """Three keys with several versions each and one delete marker; (version id, etag, body) newest first."""
    written: dict[str, list[tuple[str, str, bytes | None]]] = {}
    for round_ in range(3):
        for key in ("a/state.json", "a/state.json.bak", "b/other.json"):
            body = f"{key} round {round_} ".encode() * (200 * (round_ + 1))
            resp = s3.put_object(Bucket=bucket, Key=key, Body=body)
            written.setdefault(key, []).insert(0, (resp["VersionId"], resp["ETag"], body))
    marker = s3.delete_object(Bucket=bucket, Key="a/state.json.bak")
    written["a/state.json.bak"].insert(0, (marker["VersionId"], "", None))
    return written


def _list_all(s3, bucket, prefix: str, page: int) -> list[tuple[str, str, bool, str, int | None]]:
    out, kwargs = [], {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page}
    while True:
        resp = s3.list_object_versions(**kwargs)
        for v in resp.get("Versions", []):
            out.append((v["Key"], v["VersionId"], v["IsLatest"], v["ETag"], v["Size"]))
        for m in resp.get("DeleteMarkers", []):
            out.append((m["Key"], m["VersionId"], m["IsLatest"], "", None))
        if not resp.get("IsTruncated"):
            return out
        kwargs.update(KeyMarker=resp["NextKeyMarker"], VersionIdMarker=resp["NextVersionIdMarker"])


@pytest.mark.parametrize("page", [1, 2, 1000])
def test_every_version_is_listed_once_with_its_latest_flag_etag_and_size(s3, bucket, page):
    written = _write_history(s3, bucket)
    expected = sorted((key, vid, i == 0, etag, len(body) if body is not None else None)
                      for key, versions in written.items() for i, (vid, etag, body) in enumerate(versions))
    assert sorted(_list_all(s3, bucket, "", page)) == expected
    only_a = sorted(v for v in expected if v[0].startswith("a/"))
    assert sorted(_list_all(s3, bucket, "a/", page)) == only_a


def test_stored_bodies_survive_listings_and_garbage_collection(s3, bucket):
    # moto closes a key's body when the key object is collected; a listing's copies share the stored bodies.
    written = _write_history(s3, bucket)
    for _ in range(5):
        _list_all(s3, bucket, "", 2)
    gc.collect()
    for key, versions in written.items():
        for vid, _etag, body in versions:
            if body is not None:
                assert s3.get_object(Bucket=bucket, Key=key, VersionId=vid)["Body"].read() == body


def test_listings_leave_nothing_behind_in_the_emulator(s3, bucket):
    from moto.s3.models import FakeKey

    _write_history(s3, bucket)
    gc.collect()
    before = len(FakeKey.instances_tracked)
    for _ in range(10):
        _list_all(s3, bucket, "", 1000)
    gc.collect()
    assert len(FakeKey.instances_tracked) == before


def test_a_listing_copies_only_the_versions_under_its_prefix(s3, bucket, monkeypatch):
    # moto copies and sorts every key of the bucket for each page; the emulator copies only the prefix's, so a
    # listing costs what its prefix holds, not what the bucket does (a 2,000-version ledger beside the states).
    import moto.s3.models as s3_models

    written = _write_history(s3, bucket)
    copied = []
    deepcopy = s3_models.copy.deepcopy

    def counting(value, memo=None):
        out = deepcopy(value, memo)
        copied.extend(v.name for v in out if isinstance(v, (s3_models.FakeKey, s3_models.FakeDeleteMarker)))
        return out

    monkeypatch.setattr(s3_models.copy, "deepcopy", counting)
    assert sorted(v[0] for v in _list_all(s3, bucket, "b/", 1000)) == ["b/other.json"] * len(written["b/other.json"])
    assert sorted(copied) == ["b/other.json"] * len(written["b/other.json"])
