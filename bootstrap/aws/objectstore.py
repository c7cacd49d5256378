"""Moving bytes in and out of the state bucket. It never decides anything.

Lineage, serials, locks and restores are decided above this module; it only reads, writes (with a
condition when asked), lists versions and copies versions. Every idempotent call goes through the
retry policy in `bootstrap.aws.clients`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Iterator, Optional
from urllib.parse import urlparse

import botocore.exceptions

from bootstrap.aws.clients import error_code, retry_transient
from bootstrap.kit.errors import CloudError


@dataclass(frozen=True)
class StoredObject:
    key: str
    body: bytes
    version_id: Optional[str]
    etag: str
    last_modified: Optional[datetime] = None
    server_time: Optional[datetime] = None  # the Date of the response: the bucket's clock, not ours


@dataclass(frozen=True)
class ObjectVersion:
    key: str
    version_id: str
    last_modified: datetime
    size: int
    etag: str
    is_latest: bool
    delete_marker: bool = False


def _server_time(resp: dict) -> Optional[datetime]:
    date = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
    try:
        when = parsedate_to_datetime(date) if date else None
    except (TypeError, ValueError):
        return None
    # A Date without a zone (two Date headers joined by a proxy, "-0000") is no clock to measure an age by.
    return when if when is not None and when.tzinfo is not None else None


def _s3_shaped(resp: dict, field: str, what: str) -> dict:
    # S3 always sends these (an ETag with every object, IsTruncated with every listing). A 200 without
    # them is an endpoint that is not S3; reading it as "nothing there" would report a live environment
    # as never applied, or an empty lock as a held one.
    if field not in resp:
        raise CloudError(
            f"Could not {what}: the endpoint answered 200 but not as S3 does (no {field} in the response). It is "
            "not S3 or the emulator, or a proxy in between rewrote the answer. Check --endpoint-url (or "
            "AWS_ENDPOINT_URL) and the network path, then re-run."
        )
    return resp


def _on_aws(client) -> bool:
    """Whether `client` talks to S3 itself, whose conditional writes are atomic: of two racing If-None-Match writes
    one is refused (412, or 409 ConditionalRequestConflict while the other is in flight)."""
    host = urlparse(str(getattr(getattr(client, "meta", None), "endpoint_url", "") or "")).hostname or ""
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


# The mark of an answer from groundctl's emulator (bootstrap/aws/emulator.py), which runs its writes one at a time.
ATOMIC_WRITES_HEADER = "x-groundctl-emulator"
ATOMIC_WRITES_VALUE = "atomic-conditional-writes"


class ObjectStore:
    """One bucket, addressed by key. `client` is a boto3 S3 client."""

    def __init__(self, client, bucket: str):
        self.client = client
        self.bucket = bucket
        self._atomic = _on_aws(client)

    @property
    def atomic_conditional_writes(self) -> bool:
        """Whether a conditional write that succeeded is known to be the only one: the endpoint is S3, or a
        conditional write's answer came from groundctl's emulator, which runs its writes one at a time. Where it
        is not known (another emulator), the lock and the ledger let racing writes land before reading back."""
        return self._atomic

    def get(self, key: str, version_id: Optional[str] = None) -> Optional[StoredObject]:
        """The object (or one version of it); None when absent or deleted."""
        return self._get(key, version_id, None)

    def get_at_most(self, key: str, limit: int) -> Optional[StoredObject]:
        """The object's first `limit` + 1 bytes at most: a body longer than `limit` is over a reader's bound."""
        return self._get(key, None, limit + 1)

    def _get(self, key: str, version_id: Optional[str], limit: Optional[int]) -> Optional[StoredObject]:
        kwargs = {"Bucket": self.bucket, "Key": key}
        if version_id:
            kwargs["VersionId"] = version_id

        def call():
            try:
                resp = self.client.get_object(**kwargs)
            except botocore.exceptions.ClientError as exc:
                if error_code(exc) in ("NoSuchKey", "404", "NoSuchVersion", "MethodNotAllowed"):
                    return None
                raise
            _s3_shaped(resp, "ETag", f"read s3://{self.bucket}/{key}")
            body = resp["Body"].read(limit) if limit is not None else resp["Body"].read()
            if limit is not None:
                resp["Body"].close()
            return StoredObject(key, body, resp.get("VersionId"), resp.get("ETag", ""),
                                resp.get("LastModified"), _server_time(resp))

        return retry_transient(call, what=f"read s3://{self.bucket}/{key}")

    def put(self, key: str, body: bytes, content_type: str = "application/json") -> str | None:
        """Unconditional write (a new version in a versioned bucket); returns the version id."""
        what = f"write s3://{self.bucket}/{key}"
        resp = retry_transient(
            lambda: self.client.put_object(Bucket=self.bucket, Key=key, Body=body, ContentType=content_type),
            what=what,
        )
        return _s3_shaped(resp, "ETag", what).get("VersionId")

    def put_if_absent(self, key: str, body: bytes) -> bool:
        """Create `key` only if it does not exist (If-None-Match: *). True when this call created it."""
        return self._conditional_put(key, body, f"create s3://{self.bucket}/{key}",
                                     refused=("PreconditionFailed", "412"), IfNoneMatch="*")

    def put_if_match(self, key: str, body: bytes, etag: str) -> bool:
        """Replace `key` only if it still has `etag` (If-Match). True when this call replaced it."""
        return self._conditional_put(key, body, f"update s3://{self.bucket}/{key}",
                                     refused=("PreconditionFailed", "412", "NoSuchKey", "404"), IfMatch=etag)

    def _conditional_put(self, key: str, body: bytes, what: str, *, refused: tuple[str, ...],
                         **condition: str) -> bool:
        """One conditional put, retried; True when this call's bytes are now the object.

        A retried conditional put can be refused because the first attempt did land with its
        response lost; so a refusal is checked by reading the object back: if it holds exactly our
        bytes, the write was ours. ConditionalRequestConflict means a concurrent conditional write
        is in flight; retrying settles who won.
        """
        def call():
            try:
                resp = _s3_shaped(self.client.put_object(Bucket=self.bucket, Key=key, Body=body,
                                                         ContentType="application/json", **condition), "ETag", what)
                headers = resp.get("ResponseMetadata", {}).get("HTTPHeaders", {})
                self._atomic = self._atomic or headers.get(ATOMIC_WRITES_HEADER) == ATOMIC_WRITES_VALUE
                return True
            except botocore.exceptions.ClientError as exc:
                if error_code(exc) in refused:
                    return False
                raise

        if retry_transient(call, what=what, extra=lambda e: error_code(e) == "ConditionalRequestConflict"):
            return True
        existing = self.get(key)
        return existing is not None and existing.body == body

    def delete(self, key: str, version_id: Optional[str] = None) -> None:
        """Delete the current object (in a versioned bucket: add a delete marker). Never a version
        of state: callers pass `version_id` only for groundctl's own lock objects."""
        kwargs = {"Bucket": self.bucket, "Key": key}
        if version_id:
            kwargs["VersionId"] = version_id
        retry_transient(lambda: self.client.delete_object(**kwargs), what=f"delete s3://{self.bucket}/{key}")

    def delete_if_match(self, key: str, etag: str) -> bool:
        """Delete `key` only while it still has `etag`. True when this call deleted it; False when
        it is gone or no longer that object."""
        def call():
            try:
                self.client.delete_object(Bucket=self.bucket, Key=key, IfMatch=etag)
                return True
            except botocore.exceptions.ClientError as exc:
                if error_code(exc) in ("PreconditionFailed", "412", "NoSuchKey", "404"):
                    return False
                raise
        return retry_transient(call, what=f"delete s3://{self.bucket}/{key}")

    def keys(self, prefix: str, page_size: int = 1000, start_after: Optional[str] = None,
             ) -> Iterator[tuple[str, int, datetime]]:
        """(key, size, last modified) of every current object under `prefix` (after `start_after`), in key
        order; pages are fetched as the caller iterates, so stopping early saves the later ones."""
        token = None
        while True:
            kwargs = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": page_size}
            if start_after and not token:
                kwargs["StartAfter"] = start_after
            if token:
                kwargs["ContinuationToken"] = token
            what = f"list s3://{self.bucket}/{prefix}"
            resp = _s3_shaped(retry_transient(lambda: self.client.list_objects_v2(**kwargs), what=what),
                              "IsTruncated", what)
            for item in resp.get("Contents", []):
                yield item["Key"], item["Size"], item["LastModified"]
            if not resp.get("IsTruncated"):
                return
            token = resp["NextContinuationToken"]

    def versions(self, prefix: str, page_size: int = 1000) -> Iterator[ObjectVersion]:
        """Every version and delete marker of every key under `prefix`, all pages, newest first per key."""
        marker: Optional[tuple[str, Optional[str]]] = None
        while True:
            page, marker = self.versions_page(prefix, page_size, marker)
            yield from page
            if marker is None:
                return

    def versions_page(self, prefix: str, max_keys: int = 1000, marker: Optional[tuple[str, Optional[str]]] = None,
                      ) -> tuple[list[ObjectVersion], Optional[tuple[str, Optional[str]]]]:
        """One ListObjectVersions page: (its versions, then its delete markers; the (key, version id) marker of
        the next page, None after the last). A marker of (key, None) starts after every version of that key."""
        kwargs = {"Bucket": self.bucket, "Prefix": prefix, "MaxKeys": max_keys}
        if marker:
            kwargs["KeyMarker"] = marker[0]
            if marker[1]:
                kwargs["VersionIdMarker"] = marker[1]
        what = f"list versions under s3://{self.bucket}/{prefix}"
        resp = _s3_shaped(retry_transient(lambda: self.client.list_object_versions(**kwargs), what=what),
                          "IsTruncated", what)
        page = [ObjectVersion(v["Key"], v["VersionId"], v["LastModified"], v.get("Size", 0), v.get("ETag", ""),
                              v.get("IsLatest", False)) for v in resp.get("Versions", [])]
        page += [ObjectVersion(m["Key"], m["VersionId"], m["LastModified"], 0, "", m.get("IsLatest", False), True)
                 for m in resp.get("DeleteMarkers", [])]
        if not resp.get("IsTruncated"):
            return page, None
        return page, (resp.get("NextKeyMarker"), resp.get("NextVersionIdMarker"))

    def copy_version(self, src_key: str, version_id: str, dst_key: str) -> Optional[str]:
        """Server-side copy of one version to `dst_key` as its new current version; returns the new version id."""
        resp = retry_transient(
            lambda: self.client.copy_object(
                Bucket=self.bucket, Key=dst_key,
                CopySource={"Bucket": self.bucket, "Key": src_key, "VersionId": version_id},
            ),
            what=f"copy s3://{self.bucket}/{src_key}?versionId={version_id}",
        )
        return resp.get("VersionId")
