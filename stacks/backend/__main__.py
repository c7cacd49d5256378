"""backend: the state bucket and the KMS key that is Pulumi's secrets provider.

groundctl first creates the bucket and key with boto3 (chicken-and-egg: this stack's own state lives
in that bucket), then imports them here; from then on this program is their only writer.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from stacks.common import naming, policies
from stacks.common.config import common, export_lineage
from stacks.common.providers import provider, region_from_config
from stacks.common.tags import named

LAYER = "backend"
settings = common(LAYER)
cfg = pulumi.Config()
region = region_from_config()
bucket_name = cfg.require("bucketName")
kms_alias = cfg.require("kmsAlias")
retention_days = cfg.get_int("noncurrentVersionRetentionDays") or 90
replica_region = cfg.get("replicaRegion") or None

primary = provider("aws", settings, region)
on_primary = pulumi.InvokeOutputOptions(provider=primary)
partition = aws.get_partition_output(opts=on_primary).partition
account_id = aws.get_caller_identity_output(opts=on_primary).account_id

# State survives the program: production refuses to delete the bucket or the key.
protected = settings.production


def bucket_arn(name: str) -> pulumi.Output[str]:
    # Built from the known name (not the resource's computed arn) so the policy is known at plan time.
    return partition.apply(lambda p: f"arn:{p}:s3:::{name}")


def encryption_key(logical: str, prov: aws.Provider, description: str) -> aws.kms.Key:
    key_region = region if prov is primary else replica_region
    return aws.kms.Key(
        logical,
        description=description,
        enable_key_rotation=True,
        deletion_window_in_days=30,
        policy=pulumi.Output.all(partition, account_id).apply(
            lambda pa: policies.state_key_policy(pa[0], pa[1], key_region)
        ),
        tags=named(logical),
        opts=pulumi.ResourceOptions(provider=prov, protect=protected),
    )


def secured_bucket(logical: str, name: str, key: aws.kms.Key, prov: aws.Provider) -> tuple[aws.s3.Bucket, list]:
    """A bucket with versioning, SSE-KMS + bucket key, no public access, owner-enforced objects,
    a TLS-only policy and noncurrent-version expiry. Returns the bucket and its settings."""
    opts = pulumi.ResourceOptions(provider=prov)
    bucket = aws.s3.Bucket(
        logical,
        bucket=name,
        force_destroy=False,
        tags=named(logical),
        opts=pulumi.ResourceOptions(provider=prov, protect=protected),
    )
    child = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[bucket]))
    versioning = aws.s3.BucketVersioning(
        naming.bucket_setting(logical, "versioning"),
        bucket=bucket.id,
        versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
        opts=child,
    )
    encryption = aws.s3.BucketServerSideEncryptionConfiguration(
        naming.bucket_setting(logical, "encryption"),
        bucket=bucket.id,
        rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
            apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                sse_algorithm="aws:kms", kms_master_key_id=key.arn,
            ),
            bucket_key_enabled=True,
        )],
        opts=child,
    )
    public_block = aws.s3.BucketPublicAccessBlock(
        naming.bucket_setting(logical, "public-access-block"),
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=child,
    )
    ownership = aws.s3.BucketOwnershipControls(
        naming.bucket_setting(logical, "ownership"),
        bucket=bucket.id,
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        opts=child,
    )
    settings_list = [versioning, encryption, public_block, ownership]
    # A plain-HTTP endpoint is an emulator: it cannot carry TLS and evaluates policy statements
    # without their conditions, so the TLS-only Deny would lock Pulumi out of its own state bucket.
    # Same decision as the boto3 bootstrap path (bootstrap/aws/backend.py), so there is one writer.
    if not (settings.aws_endpoint or "").startswith("http://"):
        settings_list.append(aws.s3.BucketPolicy(
            naming.bucket_setting(logical, "policy"),
            bucket=bucket.id,
            policy=bucket_arn(name).apply(policies.tls_only_bucket_policy),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[public_block])),
        ))
    lifecycle = aws.s3.BucketLifecycleConfiguration(
        naming.bucket_setting(logical, "lifecycle"),
        bucket=bucket.id,
        rules=[aws.s3.BucketLifecycleConfigurationRuleArgs(
            id="expire-noncurrent-versions",
            status="Enabled",
            filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
            noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                noncurrent_days=retention_days,
            ),
            abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                days_after_initiation=7,
            ),
        )],
        opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[versioning])),
    )
    return bucket, [*settings_list, lifecycle]


state_key = encryption_key("state-key", primary, f"groundctl {settings.environment}: state bucket and Pulumi secrets")
aws.kms.Alias(
    naming.child("state-key", "alias"),
    name=kms_alias,
    target_key_id=state_key.key_id,
    opts=pulumi.ResourceOptions(provider=primary),
)
state_bucket, state_settings = secured_bucket("state-bucket", bucket_name, state_key, primary)

if replica_region:
    # A copy of every state version in a second region, for the loss of a region or of the bucket.
    replica_provider = provider("aws-replica", settings, replica_region)
    replica_key = encryption_key("replica-key", replica_provider, f"groundctl {settings.environment}: state replica")
    replica_name = f"{bucket_name[:55]}-replica"
    replica_bucket, replica_settings = secured_bucket("replica-bucket", replica_name, replica_key, replica_provider)
    replication_role = aws.iam.Role(
        "replication-role",
        name=naming.physical(settings.environment, LAYER, "state-replication"),
        assume_role_policy=policies.assume_role("s3.amazonaws.com"),
        tags=named("replication-role"),
        opts=pulumi.ResourceOptions(provider=primary),
    )
    aws.iam.RolePolicy(
        naming.child("replication-role", "policy"),
        role=replication_role.id,
        policy=pulumi.Output.all(
            bucket_arn(bucket_name), bucket_arn(replica_name), state_key.arn, replica_key.arn
        ).apply(lambda a: policies.replication_policy(*a)),
        opts=pulumi.ResourceOptions(provider=primary),
    )
    aws.s3.BucketReplicationConfig(
        naming.bucket_setting("state-bucket", "replication"),
        bucket=state_bucket.id,
        role=replication_role.arn,
        rules=[aws.s3.BucketReplicationConfigRuleArgs(
            id="replicate-everything",
            status="Enabled",
            filter=aws.s3.BucketReplicationConfigRuleFilterArgs(prefix=""),
            delete_marker_replication=aws.s3.BucketReplicationConfigRuleDeleteMarkerReplicationArgs(status="Enabled"),
            source_selection_criteria=aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaArgs(
                sse_kms_encrypted_objects=aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaSseKmsEncryptedObjectsArgs(
                    status="Enabled",
                ),
            ),
            destination=aws.s3.BucketReplicationConfigRuleDestinationArgs(
                bucket=bucket_arn(replica_name),
                storage_class="STANDARD",
                encryption_configuration=aws.s3.BucketReplicationConfigRuleDestinationEncryptionConfigurationArgs(
                    replica_kms_key_id=replica_key.arn,
                ),
            ),
        )],
        # Replication needs versioning on both sides first.
        opts=pulumi.ResourceOptions(provider=primary, depends_on=[state_settings[0], replica_settings[0]]),
    )

pulumi.export("bucket_name", state_bucket.bucket)
pulumi.export("bucket_arn", state_bucket.arn)
pulumi.export("kms_key_arn", state_key.arn)
pulumi.export("kms_alias", kms_alias)
endpoint_query = f"&awssdk=v2&endpoint={settings.aws_endpoint}" if settings.uses_emulator else ""
pulumi.export("secrets_provider", f"awskms://{kms_alias}?region={region}{endpoint_query}")
export_lineage(settings)
