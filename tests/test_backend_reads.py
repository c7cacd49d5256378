"""The backend's settings are read side by side (issue 29 §2): every `up` checks the bucket's region and seven
settings, eight round trips that were made one after another (on AWS, a few hundred milliseconds of each up)."""

from __future__ import annotations

import threading

from bootstrap.aws.backend import ensure_backend

SETTING_READS = ("get_bucket_location", "get_bucket_versioning", "get_bucket_encryption", "get_public_access_block",
                 "get_bucket_ownership_controls", "get_bucket_policy", "get_bucket_lifecycle_configuration",
                 "get_bucket_tagging")


class Gathered:
    """The S3 client, each of whose setting reads waits until all eight have begun (BrokenBarrierError after a
    minute otherwise: reads made one after another never all begin)."""

    def __init__(self, s3):
        self._s3 = s3
        self.barrier = threading.Barrier(len(SETTING_READS), timeout=60)
        self.read: list[str] = []

    def __getattr__(self, name):
        call = getattr(self._s3, name)
        if name not in SETTING_READS:
            return call

        def gathered(*args, **kwargs):
            self.read.append(name)
            self.barrier.wait()
            return call(*args, **kwargs)
        return gathered


class Clients:
    def __init__(self, aws, s3):
        self._aws, self._s3 = aws, s3
        self.endpoint_url = aws.endpoint_url

    def client(self, service: str, region=None):
        return self._s3 if service == "s3" else self._aws.client(service, region)


def test_an_existing_buckets_settings_are_read_side_by_side_and_left_as_they_are(local_spec, aws):
    first = ensure_backend(local_spec, aws)
    assert first.created
    s3 = Gathered(aws.client("s3"))
    again = ensure_backend(local_spec, Clients(aws, s3))
    assert sorted(s3.read) == sorted(SETTING_READS) and not s3.barrier.broken
    assert again.created == () and again.updated == () and again.settings == first.settings
