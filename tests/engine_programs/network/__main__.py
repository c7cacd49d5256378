"""Stand-in for stacks/network: one record per VPC and subnet, the network layer's output contract."""

import pulumi

from record_provider import Record

net, gc = pulumi.Config("network"), pulumi.Config("groundctl")
stack, endpoint = pulumi.get_stack(), gc.require("awsEndpoint")
zones = [f"us-east-1{chr(ord('a') + i)}" for i in range(int(net.require("azCount")))]

vpc = Record("vpc", f"{stack}/network/vpc", {"cidr": net.require("cidr")}, endpoint)
private, public = [], []
for i, zone in enumerate(zones):
    for tier, bucket in (("private", private), ("public", public)):
        rec = Record(f"{tier}-{i}", f"{stack}/network/{tier}-{i}", {"vpc": vpc.id, "zone": zone}, endpoint)
        bucket.append(rec.id)

pulumi.export("vpc_id", vpc.id)
pulumi.export("vpc_cidr", vpc.body["cidr"])
pulumi.export("availability_zones", zones)
pulumi.export("private_subnet_ids", private)
pulumi.export("public_subnet_ids", public)
pulumi.export("groundctl_lineage", gc.get("lineage") or "")
