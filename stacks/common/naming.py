"""Logical names of resources, shared by the layer programs and by recovery.

Recovery finds a tagged resource's logical name in its `groundctl:name` tag. Resources that cannot
carry tags (routes, associations, policy attachments, a bucket's settings) are found through their
tagged parent and named by these functions, so an import reproduces the original URNs. Programs
must name such children only through these functions.
"""

from __future__ import annotations

TAG_ENV = "groundctl:env"
TAG_LAYER = "groundctl:layer"
TAG_NAME = "groundctl:name"

BUCKET_SETTINGS = (
    "versioning", "encryption", "public-access-block", "ownership", "policy", "lifecycle", "replication",
)


def zonal(base: str, index: int) -> str:
    """One of a per-availability-zone set: `private-subnet-0`, `nat-1`."""
    return f"{base}-{index}"


def child(parent: str, part: str) -> str:
    """A resource that exists only as part of its parent: `cluster-role-AmazonEKSClusterPolicy`."""
    return f"{parent}-{part}"


def route(route_table: str, destination_cidr: str) -> str:
    dest = "default" if destination_cidr == "0.0.0.0/0" else destination_cidr.replace(".", "-").replace("/", "-")
    return child(route_table, f"route-{dest}")


def route_table_association(subnet: str) -> str:
    return child(subnet, "rta")


def policy_attachment(role: str, policy_arn: str) -> str:
    return child(role, policy_arn.rsplit("/", 1)[-1])


def bucket_setting(bucket: str, setting: str) -> str:
    if setting not in BUCKET_SETTINGS:
        raise ValueError(f"unknown bucket setting {setting!r}")
    return child(bucket, setting)


def physical(environment: str, layer: str, logical: str) -> str:
    """A physical name for resources whose AWS name must be chosen (cluster, roles, log groups)."""
    return f"{environment}-{logical}"
