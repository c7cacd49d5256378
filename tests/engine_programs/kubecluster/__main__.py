"""Stand-in for stacks/cluster in the cluster tier: the cluster is the tier's loopback API server
(tests/kubeapi.py), whose kubeconfig file CLUSTER_TIER_KUBECONFIG names. One record stands for the EKS
cluster (so a destroy and a recreate change something); the kubeconfig is a secret output, as in production."""

import os
from pathlib import Path

import pulumi

from record_provider import Record

cl, gc = pulumi.Config("cluster"), pulumi.Config("groundctl")
stack, endpoint = pulumi.get_stack(), gc.require("awsEndpoint")
kubeconfig = Path(os.environ["CLUSTER_TIER_KUBECONFIG"]).read_text()
server = os.environ["CLUSTER_TIER_SERVER"]

cluster = Record("cluster", f"{stack}/cluster/cluster", {"version": cl.require("kubernetesVersion"),
                                                          "server": server}, endpoint)
name = cluster.id.apply(lambda key: key.replace("/", "-"))

pulumi.export("cluster_name", name)
pulumi.export("cluster_endpoint", cluster.body["server"])
pulumi.export("cluster_arn", name.apply(lambda n: f"arn:aws:eks:us-east-1:123456789012:cluster/{n}"))
pulumi.export("oidc_provider_arn", name.apply(lambda n: f"arn:aws:iam::123456789012:oidc-provider/{n}"))
pulumi.export("node_role_arn", name.apply(lambda n: f"arn:aws:iam::123456789012:role/{n}-nodes"))
pulumi.export("kubeconfig", pulumi.Output.secret(kubeconfig))
pulumi.export("groundctl_lineage", gc.get("lineage") or "")
