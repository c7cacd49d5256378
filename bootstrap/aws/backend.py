"""The state backend bootstrap: the bucket and KMS key every layer's state lives in.

Chicken-and-egg: Pulumi needs the bucket before it can store the `backend` stack that declares the
bucket. So groundctl creates the key and bucket here with boto3, converging every setting the
backend program declares, and the `backend` stack adopts them by import afterwards.

What is wanted is data (the pure functions below); this module reads what is there, compares, and
writes only the differences. Idempotent calls go through `retry_transient`. The KMS key, whose
CreateKey is not idempotent, is found or made in `bootstrap.aws.backend_key`.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import botocore.exceptions

from bootstrap.aws.clients import AwsClients, error_code, retry_transient
from bootstrap.aws.backend_key import ensure_key, eventually_visible
from bootstrap.aws.emulator import EMULATOR_ACCOUNT_ID
from bootstrap.kit.errors import Refused
from stacks.common import policies
from stacks.common.naming import TAG_ENV, TAG_LAYER, TAG_NAME

# Logical names of the two resources in the backend program; their `groundctl:name` tags.
BUCKET_NAME = "state-bucket"
KEY_NAME = "state-key"
# These mirror stacks/backend/__main__.py (tests/test_backend_bootstrap.py checks they still do).
LIFECYCLE_RULE_ID = "expire-noncurrent-versions"
ABORT_MULTIPART_DAYS = 7
POLICY_SID = "DenyInsecureTransport"


@dataclass(frozen=True)
class BackendReport:
    bucket: str
    kms_key_arn: str
    kms_alias: str
    created: tuple[str, ...]            # what this call created (empty on a second run)
    settings: dict = field(default_factory=dict)
    updated: tuple[str, ...] = ()       # settings this call changed to converge

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated)


# -- pure: what the backend must look like ---------------------------------------------------------

def backend_tags(environment: str, logical_name: str) -> dict[str, str]:
    return {TAG_ENV: environment, TAG_LAYER: "backend", TAG_NAME: logical_name}


def partition_of(region: str) -> str:
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def tls_only_policy(bucket: str, region: str = "us-east-1") -> dict:
    # The very document the backend program declares, so that its import shows no change.
    return json.loads(policies.tls_only_bucket_policy(f"arn:{partition_of(region)}:s3:::{bucket}"))


def key_policy(account: str, region: str) -> dict:
    return json.loads(policies.state_key_policy(partition_of(region), account, region))


def lifecycle_rules(noncurrent_days: int) -> list[dict]:
    return [{
        "ID": LIFECYCLE_RULE_ID,
        "Status": "Enabled",
        "Filter": {"Prefix": ""},
        "NoncurrentVersionExpiration": {"NoncurrentDays": noncurrent_days},
        "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": ABORT_MULTIPART_DAYS},
    }]


def tls_policy_decision(endpoint_url: str | None) -> tuple[bool, str]:
    """Whether to put the TLS-only policy, and why. Pure.

    A plain-http endpoint is an emulator: it cannot carry TLS, and moto evaluates bucket-policy
    statements without their conditions, so a Deny on `aws:SecureTransport` would deny every request
    (groundctl's and Pulumi's own included). Real S3 endpoints are https and always get the policy.
    """
    if endpoint_url and endpoint_url.startswith("http://"):
        return False, (f"not applied: the endpoint {endpoint_url} is plain HTTP (an emulator), where a "
                       "TLS-only policy would deny every request")
    return True, "applied: requests without TLS are denied"


def _policy_has_tls_only(policy: dict | None, bucket: str, region: str) -> bool:
    if not policy:
        return False
    want = tls_only_policy(bucket, region)["Statement"][0]
    for st in policy.get("Statement", []):
        res = st.get("Resource")
        res = sorted(res) if isinstance(res, list) else [res]
        if (st.get("Effect") == "Deny" and st.get("Condition") == want["Condition"]
                and st.get("Action") in ("s3:*", ["s3:*"]) and res == sorted(want["Resource"])):
            return True
    return False


def _lifecycle_ok(rules: list[dict], days: int) -> bool:
    for r in rules:
        if (r.get("ID") == LIFECYCLE_RULE_ID and r.get("Status") == "Enabled"
                and r.get("NoncurrentVersionExpiration", {}).get("NoncurrentDays") == days
                and r.get("AbortIncompleteMultipartUpload", {}).get("DaysAfterInitiation") == ABORT_MULTIPART_DAYS):
            return True
    return False


# -- the account check -----------------------------------------------------------------------------

def check_account(spec, clients: AwsClients) -> str:
    """The caller's account; Refused when it is not the spec's."""
    account = getattr(clients, "caller_account", None)
    if account is None:
        sts = clients.client("sts")
        ident = retry_transient(lambda: sts.get_caller_identity(),
                                what="identify the AWS caller (sts:GetCallerIdentity)")
        account = ident["Account"]
        if hasattr(clients, "caller_account"):
            clients.caller_account = account  # the same credentials answer the same: one call per client set
    expected = spec.aws.account_id
    if clients.endpoint_url and expected != EMULATOR_ACCOUNT_ID and account == EMULATOR_ACCOUNT_ID:
        note = (f" The endpoint {clients.endpoint_url} is an emulator, whose account is always "
                f"{EMULATOR_ACCOUNT_ID}; set aws.account_id to \"{EMULATOR_ACCOUNT_ID}\" in the spec for it.")
    else:
        note = ""
    if account != expected:
        raise Refused(
            f"The AWS credentials in use belong to account {account}, but environment '{spec.name}' "
            f"is in account {expected}. Nothing was changed. Switch to credentials (profile or role) for "
            f"account {expected}, or correct aws.account_id in the spec if it is wrong.{note}"
        )
    return account


# -- the bucket ------------------------------------------------------------------------------------

def _bucket_exists(s3, bucket: str, account: str) -> bool:
    def call():
        try:
            s3.head_bucket(Bucket=bucket)
            return True
        except botocore.exceptions.ClientError as exc:
            code = error_code(exc)
            if code in ("404", "NoSuchBucket", "NotFound"):
                return False
            if code in ("403", "AccessDenied", "Forbidden"):
                raise Refused(
                    f"The bucket name '{bucket}' exists but account {account} may not use it: it belongs to "
                    "another account, or these credentials lack s3:ListBucket. Choose another "
                    "backend.bucket in the spec (bucket names are global), or fix the permissions."
                ) from None
            raise
    return retry_transient(call, what=f"look for bucket {bucket}")


def _create_bucket(s3, bucket: str, region: str) -> None:
    kwargs = {"Bucket": bucket, "ObjectOwnership": "BucketOwnerEnforced"}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}

    def call():
        try:
            s3.create_bucket(**kwargs)
        except botocore.exceptions.ClientError as exc:
            code = error_code(exc)
            if code == "BucketAlreadyOwnedByYou":
                return  # our earlier attempt landed
            if code == "BucketAlreadyExists":
                raise Refused(
                    f"The bucket name '{bucket}' is taken by another AWS account. Bucket names are global; "
                    "choose another backend.bucket in the spec and re-run."
                ) from None
            raise
    retry_transient(call, what=f"create bucket {bucket}")


def _read(s3_call, missing: tuple[str, ...], what: str):
    def call():
        try:
            return s3_call()
        except botocore.exceptions.ClientError as exc:
            if error_code(exc) in missing:
                return None
            raise
    return retry_transient(call, what=what, extra=lambda e: error_code(e) == "NoSuchBucket")


def _read_settings(s3, b: str, *, location: bool) -> dict:
    """What the bucket's settings are now (None for one not set), its region too when `location`: independent
    reads, made side by side (each is a round trip, a dozen per `up` one after another)."""
    reads = {
        "versioning": (lambda: s3.get_bucket_versioning(Bucket=b), ()),
        "encryption": (lambda: s3.get_bucket_encryption(Bucket=b), ("ServerSideEncryptionConfigurationNotFoundError",)),
        "public access block": (lambda: s3.get_public_access_block(Bucket=b),
                                ("NoSuchPublicAccessBlockConfiguration",)),
        "ownership controls": (lambda: s3.get_bucket_ownership_controls(Bucket=b), ("OwnershipControlsNotFoundError",)),
        "policy": (lambda: s3.get_bucket_policy(Bucket=b), ("NoSuchBucketPolicy",)),
        "lifecycle": (lambda: s3.get_bucket_lifecycle_configuration(Bucket=b), ("NoSuchLifecycleConfiguration",)),
        "tags": (lambda: s3.get_bucket_tagging(Bucket=b), ("NoSuchTagSet",)),
    }
    if location:
        reads["region"] = (lambda: s3.get_bucket_location(Bucket=b), ())
    with ThreadPoolExecutor(max_workers=len(reads), thread_name_prefix="backend-read") as pool:
        futures = {name: pool.submit(_read, call, missing, f"read the {name} of {b}")
                   for name, (call, missing) in reads.items()}
        return {name: future.result() for name, future in futures.items()}


def _ensure_bucket_settings(s3, spec, key_arn: str, updated: list[str], fresh: bool,
                            tls_policy: tuple[bool, str], now: dict | None = None) -> dict:
    """Converge every setting; `now` is what `_read_settings` read (read here when not given)."""
    b = spec.backend.bucket
    days = spec.backend.noncurrent_version_retention_days
    changes: list[str] = []
    now = now if now is not None else _read_settings(s3, b, location=False)

    def put(name: str, fn) -> None:
        # Right after creation the bucket may not be visible yet.
        retry_transient(fn, what=f"set {name} on bucket {b}", extra=eventually_visible)
        changes.append(name)

    ver = now["versioning"] or {}
    if ver.get("Status") != "Enabled":
        put("versioning", lambda: s3.put_bucket_versioning(
            Bucket=b, VersioningConfiguration={"Status": "Enabled"}))

    enc = now["encryption"]
    rules = (enc or {}).get("ServerSideEncryptionConfiguration", {}).get("Rules", [])
    want_rule = {"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn},
                 "BucketKeyEnabled": True}
    if not any(r.get("ApplyServerSideEncryptionByDefault") == want_rule["ApplyServerSideEncryptionByDefault"]
               and r.get("BucketKeyEnabled") for r in rules):
        put("encryption", lambda: s3.put_bucket_encryption(
            Bucket=b, ServerSideEncryptionConfiguration={"Rules": [want_rule]}))

    pab_want = {k: True for k in ("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy", "RestrictPublicBuckets")}
    pab = now["public access block"]
    if (pab or {}).get("PublicAccessBlockConfiguration") != pab_want:
        put("public-access-block", lambda: s3.put_public_access_block(
            Bucket=b, PublicAccessBlockConfiguration=pab_want))

    own = now["ownership controls"]
    own_rules = (own or {}).get("OwnershipControls", {}).get("Rules", [])
    if [r.get("ObjectOwnership") for r in own_rules] != ["BucketOwnerEnforced"]:
        put("ownership", lambda: s3.put_bucket_ownership_controls(
            Bucket=b, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]}))

    pol = now["policy"]
    current_policy = json.loads(pol["Policy"]) if pol else None
    if tls_policy[0] and not _policy_has_tls_only(current_policy, b, spec.aws.region):
        merged = current_policy or {"Version": "2012-10-17", "Statement": []}
        merged["Statement"] = [s for s in merged.get("Statement", []) if s.get("Sid") != POLICY_SID]
        merged["Statement"].append(tls_only_policy(b, spec.aws.region)["Statement"][0])
        put("policy", lambda: s3.put_bucket_policy(Bucket=b, Policy=json.dumps(merged)))

    lc = now["lifecycle"]
    lc_rules = (lc or {}).get("Rules", [])
    if not _lifecycle_ok(lc_rules, days):
        others = [r for r in lc_rules if r.get("ID") != LIFECYCLE_RULE_ID]
        put("lifecycle", lambda: s3.put_bucket_lifecycle_configuration(
            Bucket=b, LifecycleConfiguration={"Rules": others + lifecycle_rules(days)}))

    tags = backend_tags(spec.name, BUCKET_NAME)
    tg = now["tags"]
    have = {t["Key"]: t["Value"] for t in (tg or {}).get("TagSet", [])}
    if any(have.get(k) != v for k, v in tags.items()):
        merged_tags = {**have, **tags}  # keep tags others put there
        put("tags", lambda: s3.put_bucket_tagging(
            Bucket=b, Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in sorted(merged_tags.items())]}))

    if not fresh:
        updated.extend(f"bucket-{c}" for c in changes)
    return {
        "versioning": "Enabled",
        "encryption": {"algorithm": "aws:kms", "kms_key_arn": key_arn, "bucket_key_enabled": True},
        "public_access_block": pab_want,
        "ownership": "BucketOwnerEnforced",
        "policy": {"tls_only": tls_policy[0], "sid": POLICY_SID, "note": tls_policy[1]},
        "lifecycle": {"rule_id": LIFECYCLE_RULE_ID, "noncurrent_days": days},
        "bucket_tags": tags,
    }


def ensure_backend(spec, clients: AwsClients, *, tls_policy: bool | None = None) -> BackendReport:
    """Create what is missing and converge every setting; a second run creates and changes nothing.

    `tls_policy` None decides from the endpoint (see `tls_policy_decision`); True/False force it.
    """
    decision = tls_policy_decision(clients.endpoint_url)
    if tls_policy is not None and tls_policy != decision[0]:
        decision = (tls_policy, "applied (forced)" if tls_policy else "not applied (turned off by the caller)")
    account = check_account(spec, clients)
    created: list[str] = []
    updated: list[str] = []
    kms, s3, bucket = clients.client("kms"), clients.client("s3"), spec.backend.bucket
    # The key is made or converged while the bucket is read (its existence and settings: reads only); nothing
    # of the bucket is written before the key is settled, and the key's failure is the one reported first.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="backend-key") as pool:
        key_made = pool.submit(ensure_key, kms, environment=spec.name, alias=spec.backend.kms_alias,
                               tags=backend_tags(spec.name, KEY_NAME), policy=key_policy(account, spec.aws.region),
                               created=created, updated=updated)
        try:
            fresh = not _bucket_exists(s3, bucket, account)
            now = None if fresh else _read_settings(s3, bucket, location=True)
        except Exception:
            key_made.result()
            raise
        key = key_made.result()
    if fresh:
        _create_bucket(s3, bucket, spec.aws.region)
        created.append(f"bucket {bucket}")
    else:
        region = (now["region"] or {}).get("LocationConstraint") or "us-east-1"
        if region != spec.aws.region:
            raise Refused(
                f"The bucket '{bucket}' exists in {region}, but environment '{spec.name}' is in "
                f"{spec.aws.region}. Use a bucket in {spec.aws.region} (change backend.bucket) or correct "
                "aws.region in the spec."
            )
    settings = _ensure_bucket_settings(s3, spec, key["Arn"], updated, fresh, decision, now)
    settings["kms_key"] = {"arn": key["Arn"], "alias": spec.backend.kms_alias, "rotation": True,
                           "tags": backend_tags(spec.name, KEY_NAME)}
    return BackendReport(bucket=bucket, kms_key_arn=key["Arn"], kms_alias=spec.backend.kms_alias,
                         created=tuple(created), settings=settings, updated=tuple(updated))
