"""network: the VPC the cluster lives in.

Private and public subnets in each availability zone (EKS load-balancer role tags), an internet
gateway, NAT (one shared, or one per zone so a zone outage cannot cut the others off), a route table
per private subnet, an S3 gateway endpoint (state and images without NAT charges), and VPC flow
logs to a CloudWatch log group encrypted with the backend layer's key.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from stacks.common import naming, policies
from stacks.common.config import common, export_lineage, stack_reference
from stacks.common.providers import provider, region_from_config
from stacks.common.subnets import subnet_layout
from stacks.common.tags import named

LAYER = "network"
settings = common(LAYER)
cfg = pulumi.Config()
region = region_from_config()
cidr = cfg.require("cidr")
az_count = cfg.require_int("azCount")
nat_mode = cfg.get("natMode") or "single"
if nat_mode not in ("single", "per-az"):
    raise ValueError(f"config network:natMode must be 'single' or 'per-az', not {nat_mode!r}")
flow_logs_days = cfg.get_int("flowLogsRetentionDays") or 30

backend = stack_reference("backend")
aws_provider = provider("aws", settings, region)
opts = pulumi.ResourceOptions(provider=aws_provider)
invoke = pulumi.InvokeOutputOptions(provider=aws_provider)
partition = aws.get_partition_output(opts=invoke).partition
account_id = aws.get_caller_identity_output(opts=invoke).account_id
zone_names = aws.get_availability_zones_output(state="available", opts=invoke).names
zones = [zone_names.apply(lambda names, i=i: names[i]) for i in range(az_count)]

vpc = aws.ec2.Vpc(
    "vpc", cidr_block=cidr, enable_dns_support=True, enable_dns_hostnames=True, tags=named("vpc"), opts=opts,
)
igw = aws.ec2.InternetGateway("igw", vpc_id=vpc.id, tags=named("igw"), opts=opts)

public_rt = aws.ec2.RouteTable("public-rt", vpc_id=vpc.id, tags=named("public-rt"), opts=opts)
aws.ec2.Route(
    naming.route("public-rt", "0.0.0.0/0"),
    route_table_id=public_rt.id, destination_cidr_block="0.0.0.0/0", gateway_id=igw.id, opts=opts,
)

public_subnets: list[aws.ec2.Subnet] = []
private_subnets: list[aws.ec2.Subnet] = []
nat_gateways: list[aws.ec2.NatGateway] = []
private_rts: list[aws.ec2.RouteTable] = []
for zone in subnet_layout(cidr, az_count):
    i = zone.index
    public_name, private_name = naming.zonal("public-subnet", i), naming.zonal("private-subnet", i)
    public = aws.ec2.Subnet(
        public_name,
        vpc_id=vpc.id,
        cidr_block=zone.public_cidr,
        availability_zone=zones[i],
        # Only load balancers live here; nothing gets a public address by default.
        map_public_ip_on_launch=False,
        tags=named(public_name, {"kubernetes.io/role/elb": "1"}),
        opts=opts,
    )
    private = aws.ec2.Subnet(
        private_name,
        vpc_id=vpc.id,
        cidr_block=zone.private_cidr,
        availability_zone=zones[i],
        map_public_ip_on_launch=False,
        tags=named(private_name, {"kubernetes.io/role/internal-elb": "1"}),
        opts=opts,
    )
    public_subnets.append(public)
    private_subnets.append(private)
    aws.ec2.RouteTableAssociation(
        naming.route_table_association(public_name), subnet_id=public.id, route_table_id=public_rt.id, opts=opts,
    )
    if nat_mode == "per-az" or i == 0:
        eip_name, nat_name = naming.zonal("nat-eip", i), naming.zonal("nat", i)
        eip = aws.ec2.Eip(eip_name, domain="vpc", tags=named(eip_name), opts=opts)
        nat_gateways.append(aws.ec2.NatGateway(
            nat_name, allocation_id=eip.allocation_id, subnet_id=public.id, tags=named(nat_name),
            opts=pulumi.ResourceOptions(provider=aws_provider, depends_on=[igw]),
        ))
    rt_name = naming.zonal("private-rt", i)
    rt = aws.ec2.RouteTable(rt_name, vpc_id=vpc.id, tags=named(rt_name), opts=opts)
    private_rts.append(rt)
    # Single mode: every zone leaves through the NAT in zone 0.
    nat = nat_gateways[i] if nat_mode == "per-az" else nat_gateways[0]
    aws.ec2.Route(
        naming.route(rt_name, "0.0.0.0/0"),
        route_table_id=rt.id, destination_cidr_block="0.0.0.0/0", nat_gateway_id=nat.id, opts=opts,
    )
    aws.ec2.RouteTableAssociation(
        naming.route_table_association(private_name), subnet_id=private.id, route_table_id=rt.id, opts=opts,
    )

aws.ec2.VpcEndpoint(
    "s3-endpoint",
    vpc_id=vpc.id,
    service_name=f"com.amazonaws.{region}.s3",
    vpc_endpoint_type="Gateway",
    route_table_ids=[rt.id for rt in private_rts],
    tags=named("s3-endpoint"),
    opts=opts,
)

log_group_name = f"/groundctl/{settings.environment}/vpc-flow-logs"
log_group = aws.cloudwatch.LogGroup(
    "flow-logs",
    name=log_group_name,
    retention_in_days=flow_logs_days,
    kms_key_id=backend.get_output("kms_key_arn"),
    tags=named("flow-logs"),
    opts=opts,
)
flow_logs_role = aws.iam.Role(
    "flow-logs-role",
    name=naming.physical(settings.environment, LAYER, "vpc-flow-logs"),
    assume_role_policy=policies.assume_role("vpc-flow-logs.amazonaws.com"),
    tags=named("flow-logs-role"),
    opts=opts,
)
log_group_arn = pulumi.Output.all(partition, account_id).apply(
    lambda pa: f"arn:{pa[0]}:logs:{region}:{pa[1]}:log-group:{log_group_name}"
)
aws.iam.RolePolicy(
    naming.child("flow-logs-role", "policy"),
    role=flow_logs_role.id,
    policy=log_group_arn.apply(policies.flow_logs_policy),
    opts=opts,
)
aws.ec2.FlowLog(
    "flow-log",
    vpc_id=vpc.id,
    traffic_type="ALL",
    log_destination_type="cloud-watch-logs",
    log_destination=log_group_arn,
    iam_role_arn=flow_logs_role.arn,
    max_aggregation_interval=60,
    tags=named("flow-log"),
    opts=pulumi.ResourceOptions(provider=aws_provider, depends_on=[log_group]),
)

pulumi.export("vpc_id", vpc.id)
pulumi.export("vpc_cidr", cidr)
pulumi.export("availability_zones", pulumi.Output.all(*zones))
pulumi.export("private_subnet_ids", pulumi.Output.all(*[s.id for s in private_subnets]))
pulumi.export("public_subnet_ids", pulumi.Output.all(*[s.id for s in public_subnets]))
export_lineage(settings)
