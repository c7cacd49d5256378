"""How a VPC CIDR is cut into one private and one public subnet per availability zone.

Shared by the network program and by spec validation, so that a spec that validates is a spec the
program can lay out. Pure: no Pulumi, no AWS.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass

# EKS nodes take one address per pod from their subnet (VPC CNI); below a /24 a node group runs out.
MIN_SUBNET_PREFIX = 24


class SubnetLayoutError(ValueError):
    pass


@dataclass(frozen=True)
class ZoneSubnets:
    index: int
    private_cidr: str
    public_cidr: str


def subnet_layout(vpc_cidr: str, az_count: int) -> list[ZoneSubnets]:
    """Equal subnets: the first `az_count` private, the next `az_count` public, in address order."""
    vpc = ipaddress.IPv4Network(vpc_cidr, strict=True)
    if not 1 <= az_count <= 6:
        raise SubnetLayoutError(f"az_count must be 1 to 6, not {az_count}")
    new_prefix = vpc.prefixlen + math.ceil(math.log2(2 * az_count))
    if new_prefix > MIN_SUBNET_PREFIX:
        need = MIN_SUBNET_PREFIX - math.ceil(math.log2(2 * az_count))
        raise SubnetLayoutError(
            f"{vpc_cidr} is too small for {az_count} availability zone(s): {2 * az_count} subnets of "
            f"at least /{MIN_SUBNET_PREFIX} need a /{need} or larger; widen the CIDR or lower az_count"
        )
    subnets = list(vpc.subnets(new_prefix=new_prefix))
    return [
        ZoneSubnets(i, str(subnets[i]), str(subnets[az_count + i])) for i in range(az_count)
    ]
