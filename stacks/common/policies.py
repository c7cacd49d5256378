"""IAM and resource policies as pure functions of plain strings.

Pure so that the bootstrap path (boto3, before the backend stack exists) can create the state bucket
and key with exactly the policies the backend program declares; an import then shows no change.
"""

from __future__ import annotations

import json


def assume_role(service: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    })


def tls_only_bucket_policy(bucket_arn: str) -> str:
    """Deny every request to the bucket and its objects that does not use TLS."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [bucket_arn, f"{bucket_arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }],
    })


def state_key_policy(partition: str, account_id: str, region: str) -> str:
    """The account administers the key; CloudWatch Logs may use it for this account's log groups
    (the network flow logs and the EKS control-plane logs are encrypted with it)."""
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountAdministers",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:{partition}:iam::{account_id}:root"},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchLogsEncrypts",
                "Effect": "Allow",
                "Principal": {"Service": f"logs.{region}.amazonaws.com"},
                "Action": ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                "Resource": "*",
                "Condition": {"ArnLike": {
                    "kms:EncryptionContext:aws:logs:arn": f"arn:{partition}:logs:{region}:{account_id}:log-group:*",
                }},
            },
        ],
    })


def flow_logs_policy(log_group_arn: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [{
            "Effect": "Allow",
            "Action": [
                "logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogGroups", "logs:DescribeLogStreams",
            ],
            "Resource": [log_group_arn, f"{log_group_arn}:*"],
        }],
    })


def replication_policy(source_arn: str, replica_arn: str, source_key_arn: str, replica_key_arn: str) -> str:
    return json.dumps({
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["s3:GetReplicationConfiguration", "s3:ListBucket"],
                "Resource": [source_arn],
            },
            {
                "Effect": "Allow",
                "Action": [
                    "s3:GetObjectVersionForReplication", "s3:GetObjectVersionAcl", "s3:GetObjectVersionTagging",
                ],
                "Resource": [f"{source_arn}/*"],
            },
            {
                "Effect": "Allow",
                "Action": ["s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags"],
                "Resource": [f"{replica_arn}/*"],
            },
            {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [source_key_arn]},
            {"Effect": "Allow", "Action": ["kms:Encrypt"], "Resource": [replica_key_arn]},
        ],
    })
