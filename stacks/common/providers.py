"""The one explicit AWS provider of a layer: region, default tags, and the emulator switches.

Every AWS resource in a program takes `opts=ResourceOptions(provider=...)` with this provider, so no
resource can silently fall back to ambient credentials or another region.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from stacks.common.config import Common
from stacks.common.tags import default_tags

# The services the layers use; each is pointed at the emulator when one is configured.
EMULATED_SERVICES = ("cloudwatch", "cloudwatchlogs", "ec2", "eks", "iam", "kms", "s3", "sts")


def provider(name: str, settings: Common, region: str) -> aws.Provider:
    args: dict = dict(
        region=region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=default_tags(settings.environment, settings.layer)),
    )
    if settings.uses_emulator:
        # The same switches LocalStack's pulumi-local applies: talk to the endpoint, path-style S3,
        # no real STS/IMDS round trips, and dummy credentials so nothing real is ever used.
        endpoint = settings.aws_endpoint
        args.update(
            endpoints=[aws.ProviderEndpointArgs(**{svc: endpoint for svc in EMULATED_SERVICES})],
            s3_use_path_style=True,
            skip_credentials_validation=True,
            skip_requesting_account_id=True,
            skip_metadata_api_check=True,
            skip_region_validation=True,
            access_key="test",
            secret_key="test",
        )
    elif settings.account_id:
        # A run with credentials for another account fails before it changes anything. The credentials are the
        # run's own (the plan role previews, the apply role applies): no role is assumed here, so a preview never
        # holds more than its caller and the provider's inputs do not depend on who runs it.
        args["allowed_account_ids"] = [settings.account_id]
    return aws.Provider(name, **args)


def region_from_config() -> str:
    return pulumi.Config("aws").require("region")
