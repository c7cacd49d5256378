"""The network program under the mock runtime: graph per AZ count and NAT mode, posture, wiring,
the backend reference, tags and contract."""

from __future__ import annotations

import ipaddress
import json

import pytest

from bootstrap.kit.errors import BadInput
from stacks.common import naming
from stacks.common.subnets import subnet_layout
from tests.stackutil import (
    UPSTREAM, assert_contract, assert_tagged, counts, named, of_type, run, spec, stack_references,
    untaggable_names,
)

_RUNS: dict = {}


def network(az_count: int, nat: str):
    key = (az_count, nat)
    if key not in _RUNS:
        _RUNS[key] = run("network", spec("dev", **{"network.az_count": az_count, "network.nat": nat}))
    return _RUNS[key]


@pytest.mark.parametrize("az_count", [1, 2, 3])
@pytest.mark.parametrize("nat", ["single", "per-az"])
def test_graph(az_count, nat):
    nats = az_count if nat == "per-az" else 1
    assert counts(network(az_count, nat)) == {
        "pulumi:providers:aws": 1,
        "pulumi:pulumi:StackReference": 1,
        "aws:ec2/vpc:Vpc": 1,
        "aws:ec2/internetGateway:InternetGateway": 1,
        "aws:ec2/subnet:Subnet": 2 * az_count,
        "aws:ec2/routeTable:RouteTable": az_count + 1,
        "aws:ec2/route:Route": az_count + 1,
        "aws:ec2/routeTableAssociation:RouteTableAssociation": 2 * az_count,
        "aws:ec2/eip:Eip": nats,
        "aws:ec2/natGateway:NatGateway": nats,
        "aws:ec2/vpcEndpoint:VpcEndpoint": 1,
        "aws:cloudwatch/logGroup:LogGroup": 1,
        "aws:iam/role:Role": 1,
        "aws:iam/rolePolicy:RolePolicy": 1,
        "aws:ec2/flowLog:FlowLog": 1,
    }


@pytest.mark.parametrize("nat", ["single", "per-az"])
def test_private_routes_leave_through_the_right_nat(nat):
    program_run = network(3, nat)
    for i in range(3):
        route = named(program_run, naming.route(naming.zonal("private-rt", i), "0.0.0.0/0")).inputs
        assert route["routeTableId"] == f"(id of {naming.zonal('private-rt', i)})"
        assert route["natGatewayId"] == f"(id of nat-{i if nat == 'per-az' else 0})"
        assoc = named(program_run, naming.route_table_association(naming.zonal("private-subnet", i))).inputs
        assert assoc == {"subnetId": f"(id of private-subnet-{i})", "routeTableId": f"(id of private-rt-{i})"}
        assoc = named(program_run, naming.route_table_association(naming.zonal("public-subnet", i))).inputs
        assert assoc == {"subnetId": f"(id of public-subnet-{i})", "routeTableId": "(id of public-rt)"}
    for nat_gw in of_type(program_run, "aws:ec2/natGateway:NatGateway"):
        i = nat_gw.name.rsplit("-", 1)[1]
        assert nat_gw.inputs["subnetId"] == f"(id of public-subnet-{i})"  # NAT lives in a public subnet
        assert nat_gw.inputs["allocationId"] == "(known after apply)"  # the EIP's allocation id
    public_route = named(program_run, naming.route("public-rt", "0.0.0.0/0")).inputs
    assert public_route["gatewayId"] == "(id of igw)"


def test_subnets_follow_the_layout_with_eks_role_tags():
    program_run = network(3, "single")
    vpc = named(program_run, "vpc").inputs
    assert vpc["cidrBlock"] == "10.20.0.0/16"
    assert vpc["enableDnsHostnames"] is True and vpc["enableDnsSupport"] is True
    zones = set()
    for zone in subnet_layout("10.20.0.0/16", 3):
        private = named(program_run, naming.zonal("private-subnet", zone.index)).inputs
        public = named(program_run, naming.zonal("public-subnet", zone.index)).inputs
        assert private["cidrBlock"] == zone.private_cidr and public["cidrBlock"] == zone.public_cidr
        assert private["tags"]["kubernetes.io/role/internal-elb"] == "1"
        assert "kubernetes.io/role/elb" not in private["tags"]
        assert public["tags"]["kubernetes.io/role/elb"] == "1"
        assert private["mapPublicIpOnLaunch"] is False and public["mapPublicIpOnLaunch"] is False
        assert private["availabilityZone"] == public["availabilityZone"]
        zones.add(private["availabilityZone"])
        for cidr in (private["cidrBlock"], public["cidrBlock"]):
            assert ipaddress.ip_network(cidr).subnet_of(ipaddress.ip_network("10.20.0.0/16"))
    assert zones == {"eu-west-1a", "eu-west-1b", "eu-west-1c"}


def test_s3_gateway_endpoint_serves_private_route_tables():
    endpoint = named(network(2, "per-az"), "s3-endpoint").inputs
    assert endpoint["vpcEndpointType"] == "Gateway"
    assert endpoint["serviceName"] == "com.amazonaws.eu-west-1.s3"
    assert endpoint["routeTableIds"] == ["(id of private-rt-0)", "(id of private-rt-1)"]


def test_flow_logs_to_an_encrypted_log_group_from_the_backend_layer():
    program_run = network(2, "single")
    assert stack_references(program_run) == {"organization/backend/dev"}
    group = named(program_run, "flow-logs").inputs
    assert group["kmsKeyId"] == UPSTREAM["backend"]["kms_key_arn"]  # the upstream output is used
    assert group["retentionInDays"] == 30
    flow = named(program_run, "flow-log").inputs
    assert flow["trafficType"] == "ALL" and flow["vpcId"] == "(id of vpc)"
    assert flow["logDestinationType"] == "cloud-watch-logs"
    assert flow["logDestination"] == f"arn:aws:logs:eu-west-1:111111111111:log-group:{group['name']}"
    role = named(program_run, "flow-logs-role").inputs
    assert json.loads(role["assumeRolePolicy"])["Statement"][0]["Principal"] == {
        "Service": "vpc-flow-logs.amazonaws.com"}
    policy = json.loads(named(program_run, naming.child("flow-logs-role", "policy")).inputs["policy"])
    assert flow["logDestination"] in policy["Statement"][0]["Resource"]


@pytest.mark.parametrize("nat", ["single", "per-az"])
def test_tags_and_names(nat):
    program_run = network(2, nat)
    assert_tagged(program_run, "dev", "network")
    expected = {naming.route("public-rt", "0.0.0.0/0"), naming.child("flow-logs-role", "policy")}
    for i in range(2):
        expected |= {
            naming.route(naming.zonal("private-rt", i), "0.0.0.0/0"),
            naming.route_table_association(naming.zonal("private-subnet", i)),
            naming.route_table_association(naming.zonal("public-subnet", i)),
        }
    assert untaggable_names(program_run) == expected


def test_output_contract():
    program_run = network(2, "single")
    assert_contract(program_run, "network")
    assert program_run.outputs["vpc_id"] == "(id of vpc)"
    assert program_run.outputs["vpc_cidr"] == "10.20.0.0/16"
    assert program_run.outputs["availability_zones"] == ["eu-west-1a", "eu-west-1b"]
    assert program_run.outputs["private_subnet_ids"] == ["(id of private-subnet-0)", "(id of private-subnet-1)"]
    assert program_run.outputs["public_subnet_ids"] == ["(id of public-subnet-0)", "(id of public-subnet-1)"]


def test_nothing_is_protected_and_prod_uses_nat_per_az():
    program_run = run("network", spec("prod"))
    assert not any(r.protect for r in program_run.resources)
    assert counts(program_run)["aws:ec2/natGateway:NatGateway"] == 3


def test_bad_config_is_bad_input():
    from bootstrap.planning.mockrun import run_program
    from bootstrap.spec.stack_config import ConfigValue, layer_config

    config = layer_config(spec("dev"), "network")
    config["network:natMode"] = ConfigValue("sometimes")
    with pytest.raises(BadInput, match="natMode"):
        run_program("network", "dev", config, UPSTREAM)


def test_provider_assumes_no_role_and_pins_the_account():
    """The provider runs with the caller's credentials (the plan role previews, the apply role applies): a
    preview can never reach the apply role, and its inputs do not change with who runs it."""
    provider, = of_type(network(2, "single"), "pulumi:providers:aws")
    assert "assumeRoles" not in provider.inputs and "assumeRole" not in provider.inputs
    assert json.loads(provider.inputs["allowedAccountIds"]) == ["111111111111"]
