"""Stand-in for stacks/cluster: a record that reads the network stack through a StackReference,
a secret config value (enginetier:adminToken) and a secret output (kubeconfig)."""

import json

import pulumi

from record_provider import Record

cl, gc = pulumi.Config("cluster"), pulumi.Config("groundctl")
stack, endpoint = pulumi.get_stack(), gc.require("awsEndpoint")
network = pulumi.StackReference(f"organization/network/{stack}")
token = pulumi.Config("enginetier").get_secret("adminToken") or pulumi.Output.secret("no-token")

cluster = Record("cluster", f"{stack}/cluster/cluster", {
    "version": cl.require("kubernetesVersion"),
    "vpc": network.require_output("vpc_id"),
    "subnets": network.require_output("private_subnet_ids"),
}, endpoint)
name = cluster.id.apply(lambda key: key.replace("/", "-"))

pulumi.export("cluster_name", name)
pulumi.export("cluster_endpoint", name.apply(lambda n: f"https://{n}.eks.emulator.invalid"))
pulumi.export("cluster_arn", name.apply(lambda n: f"arn:aws:eks:us-east-1:123456789012:cluster/{n}"))
pulumi.export("oidc_provider_arn", name.apply(lambda n: f"arn:aws:iam::123456789012:oidc-provider/{n}"))
pulumi.export("node_role_arn", name.apply(lambda n: f"arn:aws:iam::123456789012:role/{n}-nodes"))
pulumi.export("kubeconfig", pulumi.Output.secret(pulumi.Output.all(name, token).apply(
    lambda args: json.dumps({"cluster": args[0], "token": args[1]}))))
pulumi.export("groundctl_lineage", gc.get("lineage") or "")
