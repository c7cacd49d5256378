"""Posture rules of the network layer: subnets, NAT, flow logs, the S3 endpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from bootstrap.planning.posture.model import Context, Outcome, Rule, mock_ref, ok, said

if TYPE_CHECKING:
    from bootstrap.planning.mockrun import DeclaredResource

SUBNET = "aws:ec2/subnet:Subnet"
NAT = "aws:ec2/natGateway:NatGateway"
VPC = "aws:ec2/vpc:Vpc"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"
VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"


def _subnets(ctx: Context, output: str, prefix: str) -> list["DeclaredResource"]:
    """The subnets the layer exports under `output` (its contract), else those named `<prefix>-N`."""
    ids = ctx.runs["network"].outputs.get(output) or []
    subnets = ctx.of_type("network", SUBNET)
    by_id = [s for s in subnets if mock_ref(s.name) in ids]
    return by_id or [s for s in subnets if s.name.startswith(prefix)]


def _private_no_public_ip(ctx: Context) -> Iterable[Outcome]:
    private = _subnets(ctx, "private_subnet_ids", "private-subnet")
    if private and len(private) != ctx.spec.network.az_count:
        yield "fail", None, f"{len(private)} private subnets for {ctx.spec.network.az_count} availability zones"
    for s in private:
        yield ok(s.inputs.get("mapPublicIpOnLaunch") in (False, None), s.name, "no public IPs on launch",
                 "maps public IPs on launch")


def _role_tags(ctx: Context) -> Iterable[Outcome]:
    for output, prefix, tag in (("private_subnet_ids", "private-subnet", "kubernetes.io/role/internal-elb"),
                                ("public_subnet_ids", "public-subnet", "kubernetes.io/role/elb")):
        for s in _subnets(ctx, output, prefix):
            value = (s.inputs.get("tags") or {}).get(tag)
            yield ok(value == "1", s.name, f"{tag}=1", f"missing tag {tag}=1")


def _nat_count(ctx: Context) -> Iterable[Outcome]:
    net = ctx.spec.network
    want = 1 if net.nat == "single" else net.az_count
    nats = ctx.of_type("network", NAT)
    if nats:
        yield ok(len(nats) == want, None, f"{len(nats)} NAT gateway(s) for NAT mode {net.nat}",
                 f"{len(nats)} NAT gateway(s), but NAT mode {net.nat} with {net.az_count} AZs needs {want}")


def _flow_logs(ctx: Context) -> Iterable[Outcome]:
    vpcs = {mock_ref(v.name) for v in ctx.of_type("network", VPC)}
    for log in ctx.of_type("network", FLOW_LOG):
        problems = []
        if log.inputs.get("vpcId") not in vpcs:
            problems.append("not attached to the layer's VPC")
        if log.inputs.get("trafficType") != "ALL":
            problems.append(f"traffic type {said(log.inputs.get('trafficType'))}, not ALL")
        yield ok(not problems, log.name, "captures ALL traffic of the VPC", "; ".join(problems))


def _s3_endpoint(ctx: Context) -> Iterable[Outcome]:
    service = f"com.amazonaws.{ctx.spec.aws.region}.s3"
    for ep in ctx.of_type("network", VPC_ENDPOINT):
        if ep.inputs.get("serviceName") != service:
            continue
        gateway = ep.inputs.get("vpcEndpointType", "Gateway") == "Gateway"
        routed = bool(ep.inputs.get("routeTableIds"))
        yield ok(gateway and routed, ep.name, f"{service} gateway endpoint on the route tables",
                 "not a Gateway endpoint" if not gateway else "attached to no route table")


RULES: tuple[Rule, ...] = (
    Rule("network-private-subnets-no-public-ip", "network", (SUBNET,),
         "nodes in private subnets are not reachable from the internet", _private_no_public_ip),
    Rule("network-subnet-role-tags", "network", (SUBNET,),
         "EKS places internal and internet-facing load balancers by these tags", _role_tags),
    Rule("network-nat-count", "network", (NAT,),
         "NAT mode single uses one gateway, per-az one per zone so a zone outage stays contained", _nat_count),
    Rule("network-flow-logs", "network", (FLOW_LOG,),
         "all VPC traffic is recorded for investigation", _flow_logs),
    Rule("network-s3-gateway-endpoint", "network", (VPC_ENDPOINT,),
         "S3 traffic (state, images) stays on the AWS network", _s3_endpoint),
)
