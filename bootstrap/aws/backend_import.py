"""The import document that hands the bootstrap's bucket and key to the `backend` stack.

`ensure_backend` creates the KMS key, its alias, the bucket and the bucket's settings with boto3; the
backend program declares the same resources. Without an import the first `up` would plan creates: a
second key, an alias that already exists (`AlreadyExistsException`), a bucket that is taken. So the
first `up` of a backend stack that holds no resources first imports what the report says exists, under
the program's own types and logical names, each through the program's explicit `aws` provider.

Pure: the report in, a `pulumi import --file` document out. The import IDs are the ones the AWS
provider documents for each type (the key's id, the alias name, the bucket name for the bucket and for
each of its settings).
"""

from __future__ import annotations

from stacks.common import naming

from bootstrap.aws.backend import BUCKET_NAME, KEY_NAME

PROVIDER_TYPE = "pulumi:providers:aws"
PROVIDER_NAME = "aws"  # the primary provider of stacks/backend/__main__.py

KEY_TYPE = "aws:kms/key:Key"
ALIAS_TYPE = "aws:kms/alias:Alias"
BUCKET_TYPE = "aws:s3/bucket:Bucket"
# Report setting → (the program's type for it, the BUCKET_SETTINGS name it is declared under).
SETTING_TYPES = {
    "versioning": ("aws:s3/bucketVersioning:BucketVersioning", "versioning"),
    "encryption": ("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
                   "encryption"),
    "public_access_block": ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "public-access-block"),
    "ownership": ("aws:s3/bucketOwnershipControls:BucketOwnershipControls", "ownership"),
    "policy": ("aws:s3/bucketPolicy:BucketPolicy", "policy"),
    "lifecycle": ("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", "lifecycle"),
}


def provider_urn(environment: str) -> str:
    return f"urn:pulumi:{environment}::backend::{PROVIDER_TYPE}::{PROVIDER_NAME}"


def key_id(key_arn: str) -> str:
    """`arn:aws:kms:<region>:<account>:key/<id>` → `<id>` (a bare id passes through)."""
    return key_arn.rsplit("key/", 1)[-1]


def backend_import_document(environment: str, report) -> dict:
    """The `pulumi import --file` document adopting everything `report` (a BackendReport) says exists.

    A setting the report says was not applied (the TLS-only policy on a plain-HTTP emulator endpoint) is
    left out, as the program leaves it out on the same condition.
    """
    settings = dict(report.settings or {})
    entries = [
        {"type": KEY_TYPE, "name": KEY_NAME, "id": key_id(report.kms_key_arn)},
        {"type": ALIAS_TYPE, "name": naming.child(KEY_NAME, "alias"), "id": report.kms_alias},
        {"type": BUCKET_TYPE, "name": BUCKET_NAME, "id": report.bucket},
    ]
    for setting, (rtype, part) in SETTING_TYPES.items():
        if setting not in settings:
            continue
        if setting == "policy" and not (settings["policy"] or {}).get("tls_only"):
            continue
        entries.append({"type": rtype, "name": naming.bucket_setting(BUCKET_NAME, part), "id": report.bucket})
    for entry in entries:
        entry["provider"] = PROVIDER_NAME
    return {"nameTable": {PROVIDER_NAME: provider_urn(environment)}, "resources": entries}
