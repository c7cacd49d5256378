"""The backend's KMS key: found by alias, else by its tags, else created; then converged.

CreateKey is not idempotent and is never retried blindly: after a failed attempt it looks for the key
by its tags before creating again, so a lost response does not leave two keys behind. What the key
must look like (tags, policy) is decided by the caller, `bootstrap.aws.backend`.
"""

from __future__ import annotations

import json
import time

import botocore.exceptions

from bootstrap.aws.clients import error_code, is_transient, retry_transient
from bootstrap.kit.errors import CloudError, Refused

# Right after creation a bucket or key may not be visible yet to every endpoint.
_EVENTUAL = frozenset({"NoSuchBucket", "NotFoundException", "KMS.NotFoundException", "NoSuchKey",
                       "InvalidArgument", "KMS.DisabledException"})
_GONE = ("PendingDeletion", "PendingReplicaDeletion")


def eventually_visible(exc: BaseException) -> bool:
    """Whether `exc` may only mean the resource was created a moment ago (so retrying helps)."""
    return error_code(exc) in _EVENTUAL


def key_description(environment: str) -> str:
    return f"groundctl {environment}: state bucket and Pulumi secrets"


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"TagKey": k, "TagValue": v} for k, v in tags.items()]


def _key_by_alias(kms, alias: str) -> dict | None:
    def call():
        try:
            return kms.describe_key(KeyId=alias)["KeyMetadata"]
        except botocore.exceptions.ClientError as exc:
            if error_code(exc) in ("NotFoundException", "KMS.NotFoundException"):
                return None
            raise
    return retry_transient(call, what=f"look up KMS alias {alias}")


def _key_by_tags(kms, tags: dict[str, str]) -> dict | None:
    """A usable customer key carrying every tag in `tags` (the fallback after a lost CreateKey)."""
    marker = None
    while True:
        kwargs = {"Limit": 100, **({"Marker": marker} if marker else {})}
        page = retry_transient(lambda: kms.list_keys(**kwargs), what="list KMS keys")
        for k in page.get("Keys", []):
            kid = k["KeyId"]
            try:
                got = retry_transient(lambda: kms.list_resource_tags(KeyId=kid), what=f"read tags of KMS key {kid}")
            except botocore.exceptions.ClientError:
                continue  # a key we may not read is not ours
            have = {t["TagKey"]: t["TagValue"] for t in got.get("Tags", [])}
            if all(have.get(k2) == v for k2, v in tags.items()):
                meta = retry_transient(lambda: kms.describe_key(KeyId=kid)["KeyMetadata"], what=f"describe KMS key {kid}")
                if meta.get("KeyState") not in _GONE:
                    return meta
        if not page.get("Truncated"):
            return None
        marker = page["NextMarker"]


def _create_key(kms, environment: str, tags: dict[str, str], policy: dict, attempts: int = 4) -> dict:
    """CreateKey is not idempotent: on a failure, look for a key with our tags before trying again."""
    last: BaseException | None = None
    for attempt in range(attempts):
        if attempt:
            time.sleep(min(2.0, 0.1 * 2 ** attempt))
            found = _key_by_tags(kms, tags)
            if found:
                return found
        try:
            return kms.create_key(
                Description=key_description(environment), Policy=json.dumps(policy),
                KeyUsage="ENCRYPT_DECRYPT", KeySpec="SYMMETRIC_DEFAULT", Tags=_tag_list(tags),
            )["KeyMetadata"]
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
            if isinstance(exc, botocore.exceptions.ClientError) and not is_transient(exc):
                raise CloudError(
                    f"AWS refused to create the KMS key for environment '{environment}' "
                    f"({error_code(exc)}). Check that the credentials may call kms:CreateKey and "
                    "kms:TagResource, then re-run."
                ) from None
            last = exc
    raise CloudError(
        f"Could not create the KMS key for environment '{environment}' after {attempts} attempts "
        f"({type(last).__name__}: {error_code(last) if last else ''}). No duplicate key was left behind "
        "(each retry first looked for one with this environment's tags). Wait a minute and re-run."
    )


def _create_alias(kms, alias: str, key_id: str) -> None:
    try:
        kms.create_alias(AliasName=alias, TargetKeyId=key_id)
    except botocore.exceptions.ClientError as exc:
        if error_code(exc) != "AlreadyExistsException":
            raise
        # A retried call whose first attempt landed; confirm the alias is ours.
        meta = kms.describe_key(KeyId=alias)["KeyMetadata"]
        if meta["KeyId"] != key_id:
            raise Refused(f"The KMS alias {alias} appeared meanwhile pointing at another key "
                          f"({meta['KeyId']}); another run is bootstrapping this backend. Re-run.") from None


def ensure_key(kms, *, environment: str, alias: str, tags: dict[str, str], policy: dict,
               created: list[str], updated: list[str]) -> dict:
    """The key behind `alias`, created if missing, with rotation, `policy`, description and `tags`.

    Appends to `created` what it created and to `updated` the settings it changed on an existing key.
    """
    meta = _key_by_alias(kms, alias)
    if meta and meta.get("KeyState") in (*_GONE, "Disabled"):
        raise Refused(
            f"The KMS alias {alias} points to key {meta['KeyId']}, which is {meta['KeyState']}. State "
            f"encrypted with it cannot be read while it stays that way. Cancel the deletion or enable the "
            f"key (`aws kms cancel-key-deletion --key-id {meta['KeyId']}` then `aws kms enable-key`), or "
            "point backend.kms_alias at another alias, then re-run."
        )
    new_key = False
    if meta is None:
        meta = _key_by_tags(kms, tags)
        if meta is None:
            meta = _create_key(kms, environment, tags, policy)
            created.append(f"kms-key {meta['Arn']}")
            new_key = True
        key_id = meta["KeyId"]
        retry_transient(lambda: _create_alias(kms, alias, key_id), what=f"create KMS alias {alias}",
                        extra=eventually_visible)
        created.append(f"kms-alias {alias}")
    key_id = meta["KeyId"]
    # A key this call created is reported once, as created, not also as updated.
    changed = [] if new_key else updated

    rot = retry_transient(lambda: kms.get_key_rotation_status(KeyId=key_id), what="read KMS key rotation",
                          extra=eventually_visible)
    if not rot.get("KeyRotationEnabled"):
        retry_transient(lambda: kms.enable_key_rotation(KeyId=key_id), what="enable KMS key rotation",
                        extra=eventually_visible)
        changed.append("kms-key-rotation")
    got = retry_transient(lambda: kms.get_key_policy(KeyId=key_id, PolicyName="default"), what="read the KMS key policy",
                          extra=eventually_visible)
    if json.loads(got["Policy"]) != policy:
        retry_transient(lambda: kms.put_key_policy(KeyId=key_id, PolicyName="default", Policy=json.dumps(policy)),
                        what="set the KMS key policy", extra=eventually_visible)
        changed.append("kms-key-policy")
    description = key_description(environment)
    if meta.get("Description") != description:
        retry_transient(lambda: kms.update_key_description(KeyId=key_id, Description=description),
                        what="set the KMS key description")
        changed.append("kms-key-description")
    have = retry_transient(lambda: kms.list_resource_tags(KeyId=key_id), what="read KMS key tags")
    have_tags = {t["TagKey"]: t["TagValue"] for t in have.get("Tags", [])}
    if any(have_tags.get(k) != v for k, v in tags.items()):
        retry_transient(lambda: kms.tag_resource(KeyId=key_id, Tags=_tag_list(tags)), what="tag the KMS key")
        updated.append("kms-key-tags")
    return meta
