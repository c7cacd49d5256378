"""A Pulumi dynamic-provider resource whose real object is a JSON document in an S3 bucket.

Used only by the engine tier's programs (tests/engine_programs/<layer>): it needs no provider plugin,
only the Pulumi CLI and its Python host, and refresh reads the object back, so a change made to it
outside Pulumi is drift the real engine reports. The dynamic provider is pickled by reference, so the
engine tier puts this folder on PYTHONPATH for the program and for the provider process alike.

Faults for the tests come from ENGINE_TIER_FAULTS (JSON: record name -> "fail", "sleep:<seconds>",
"write-then-sleep:<seconds>" or "allocate-then-sleep:<seconds>"), read when a record is created, so a test
can fail or stall one create of a real update, before its object is written or after (a create that made its
resource but never answered). "allocate-then-sleep" writes the object under a key of its own,
`<key>.<random>`, as AWS gives each create of an EIP or NAT gateway a new ID: a second create of the same
record makes a second object instead of overwriting the first.
Four more act elsewhere: "read-fail" makes a refresh's read of the record fail (as an AccessDenied would),
"read-sleep:<seconds>" stalls it,
"update-sleep:<seconds>" stalls its update before the object is rewritten, and "delete-sleep:<seconds>" its
delete before the object is removed.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider, UpdateResult

FAULTS_ENV = "ENGINE_TIER_FAULTS"
BUCKET_ENV = "ENGINE_TIER_RECORDS_BUCKET"


def _s3(props: dict):
    import boto3

    return boto3.client("s3", endpoint_url=props["endpoint"], region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _fault(name: str, written: bool) -> None:
    action = _action(name)
    if action == "fail" and not written:
        raise RuntimeError(f"injected failure creating record {name}")
    if action.startswith(("write-then-sleep:", "allocate-then-sleep:") if written else "sleep:"):
        time.sleep(float(action.split(":", 1)[1]))


def _action(name: str) -> str:
    return json.loads(os.environ.get(FAULTS_ENV) or "{}").get(name) or ""


def _put(props: dict) -> None:
    _s3(props).put_object(Bucket=props["bucket"], Key=props["key"],
                          Body=json.dumps(props["body"], sort_keys=True).encode())


class RecordProvider(ResourceProvider):
    def create(self, props):
        _fault(props["name"], written=False)
        if _action(props["name"]).startswith("allocate-then-sleep:"):
            props = {**props, "key": f"{props['key']}.{uuid.uuid4().hex[:12]}"}
        _put(props)
        _fault(props["name"], written=True)
        return CreateResult(id_=props["key"], outs=props)

    def read(self, id_, props):
        if _action(props.get("name", "")) == "read-fail":
            raise RuntimeError(f"injected failure reading record {props.get('name')}: AccessDenied")
        if _action(props.get("name", "")).startswith("read-sleep:"):
            time.sleep(float(_action(props["name"]).split(":", 1)[1]))
        s3 = _s3(props)
        try:
            body = json.loads(s3.get_object(Bucket=props["bucket"], Key=id_)["Body"].read())
        except s3.exceptions.NoSuchKey:
            return ReadResult(id_="", outs={})  # an empty id tells the engine the resource is gone
        return ReadResult(id_=id_, outs={**props, "key": id_, "body": body})

    def diff(self, id_, olds, news):
        replaces = [k for k in ("bucket", "key") if olds.get(k) != news.get(k)]
        changed = replaces + [k for k in ("body", "endpoint") if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, id_, olds, news):
        action = _action(news.get("name", ""))
        if action.startswith("update-sleep:"):
            time.sleep(float(action.split(":", 1)[1]))
        _put(news)
        return UpdateResult(outs=news)

    def delete(self, id_, props):
        action = _action(props.get("name", ""))
        if action.startswith("delete-sleep:"):
            time.sleep(float(action.split(":", 1)[1]))
        _s3(props).delete_object(Bucket=props["bucket"], Key=id_)


class Record(Resource):
    """One JSON object at s3://<bucket>/<key>; `body` is what the object holds."""

    body: pulumi.Output[dict]

    def __init__(self, name: str, key: str, body: dict, endpoint: str, opts=None):
        props = {"name": name, "bucket": os.environ[BUCKET_ENV], "key": key, "endpoint": endpoint,
                 "body": body}
        super().__init__(RecordProvider(), name, props, opts)
