"""How `fleet status` reaches each environment's state bucket: one `Source` per spec.

Clients are made once and shared by every environment of the same region, endpoint and credentials
(a boto3 client costs tens of milliseconds of CPU to make, and botocore clients are safe to share
across threads). A spec that names `fleet.status_role_arn` is read with that role: STS AssumeRole runs
on the environment's own reading thread (under its deadline), once per role, and a refused assume is
that environment's error, never the fleet's.
"""

from __future__ import annotations

import threading
from typing import Optional

import botocore.exceptions

from bootstrap.aws.clients import AwsClients, error_code, retry_transient
from bootstrap.aws.objectstore import ObjectStore
from bootstrap.kit.errors import BadInput, CloudError
from bootstrap.target import ENDPOINT_ENV, resolve_endpoint
from recovery.evidence.reading import Source

SESSION_NAME = "groundctl-fleet-status"


class _Roles:
    """Assumed-role clients, one per (role, region, endpoint), made on first use by whichever thread needs it."""

    def __init__(self):
        self._mutex = threading.Lock()
        self._made: dict[tuple, object] = {}
        self._busy: dict[tuple, threading.Lock] = {}

    def s3(self, base: AwsClients, role_arn: str):
        key = (role_arn, base.region, base.endpoint_url)
        with self._mutex:
            if key in self._made:
                return self._made[key]
            lock = self._busy.setdefault(key, threading.Lock())
        with lock:  # one AssumeRole per role, not one per environment that uses it
            if key not in self._made:
                self._made[key] = self._assume(base, role_arn)
            return self._made[key]

    @staticmethod
    def _assume(base: AwsClients, role_arn: str):
        sts = base.client("sts")

        def call():
            return sts.assume_role(RoleArn=role_arn, RoleSessionName=SESSION_NAME, DurationSeconds=900)

        try:
            creds = retry_transient(call, what=f"assume {role_arn}")["Credentials"]
        except botocore.exceptions.ClientError as exc:
            raise CloudError(f"Could not assume {role_arn} to read this environment's bucket: STS refused "
                             f"({error_code(exc)[:60]}). Check the role's trust policy names the identity running "
                             "`fleet status`, or fix fleet.status_role_arn in the spec.") from None
        except (KeyError, TypeError):
            raise CloudError(f"Could not assume {role_arn}: STS answered without credentials.") from None
        clients = AwsClients(base.region, base.endpoint_url, credentials={
            "aws_access_key_id": creds["AccessKeyId"], "aws_secret_access_key": creds["SecretAccessKey"],
            "aws_session_token": creds["SessionToken"]})
        return clients.client("s3")


def sources(specs, endpoint_url: Optional[str], environ) -> list[Source]:
    """One `Source` per spec; AWS clients shared by every environment of the same region and endpoint."""
    shared: dict[tuple, AwsClients] = {}
    roles = _Roles()
    out = []
    for spec in specs:
        try:
            url = resolve_endpoint(spec, endpoint_url, environ).url
        except BadInput as exc:
            out.append(Source(spec, skip=None, connect=_refuse(exc.message)))
            continue
        if url == "embedded":
            out.append(Source(spec, skip=f"it uses the embedded emulator, whose state lives only while one runs; "
                                         f"start one (`groundctl emulator start`) and pass --endpoint-url or {ENDPOINT_ENV}"))
            continue
        resolved = spec.model_copy(update={"aws": spec.aws.model_copy(update={"endpoint_url": url})})
        key = (spec.aws.region, url, None if url else spec.aws.profile)
        if key not in shared:
            shared[key] = AwsClients.for_spec(resolved, url)
        base, role = shared[key], spec.fleet.status_role_arn
        if role:
            out.append(Source(resolved, connect=_assumed(roles, base, role, spec.backend.bucket)))
        else:
            s3 = base.client("s3")
            out.append(Source(resolved, ObjectStore(s3, spec.backend.bucket), s3))
    return out


def _assumed(roles: _Roles, base: AwsClients, role: str, bucket: str):
    def connect():
        s3 = roles.s3(base, role)
        return ObjectStore(s3, bucket), s3
    return connect


def _refuse(message: str):
    def connect():
        raise BadInput(message)
    return connect
