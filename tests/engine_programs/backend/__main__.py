"""Stand-in for stacks/backend in the cluster tier's drill: the output contract from the layer's config.

The real backend layer imports the bucket and KMS key groundctl bootstrapped, which needs Pulumi's AWS
provider plugin (not available here); the drill's preflight only needs the layer verified and its outputs."""

import pulumi

be, gc = pulumi.Config("backend"), pulumi.Config("groundctl")
bucket, alias = be.require("bucketName"), be.require("kmsAlias")

pulumi.export("bucket_name", bucket)
pulumi.export("bucket_arn", f"arn:aws:s3:::{bucket}")
pulumi.export("kms_key_arn", "arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000")
pulumi.export("kms_alias", alias)
pulumi.export("secrets_provider", f"awskms://{alias}")
pulumi.export("groundctl_lineage", gc.get("lineage") or "")
