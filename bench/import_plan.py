"""Benchmark: 5,000 tagged survivors in the emulator → inventory → classification → import plan.

Creates N cheap taggable resources (half CloudWatch log groups, half security groups) tagged for one
environment and layer, plus some of another environment that must be ignored. Setup is not timed;
what is timed is the inventory (Tagging API pages + per-service reads) and the plan building.
Prints the time of each, and the Tagging API pages read against the minimum ceil(N/100).

    python bench/import_plan.py [--count 5000] [--workers 8]
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bootstrap.aws.clients import AwsClients  # noqa: E402
from bootstrap.aws.emulator import running_emulator  # noqa: E402
from recovery.survivors.import_plan import plan_for_survivors  # noqa: E402
from recovery.survivors.inventory import PAGE_SIZE, collect  # noqa: E402
from recovery.survivors.state_vs_live import classify  # noqa: E402
from stacks.common import naming  # noqa: E402

LAYER = "network"
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def populate(endpoint: str, env: str, count: int, workers: int) -> None:
    """N tagged resources: a fifth security groups (created one by one: moto's EC2 backend is not
    thread-safe), the rest log groups (created in parallel)."""
    aws = AwsClients("us-east-1", endpoint, credentials=CREDS)
    ec2, logs = aws.client("ec2"), aws.client("logs")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    groups = count // 5

    def tags(name: str, environment: str = env) -> dict[str, str]:
        return {naming.TAG_ENV: environment, naming.TAG_LAYER: LAYER, naming.TAG_NAME: name}

    for i in range(groups):
        ec2.create_security_group(GroupName=f"{env}-survivor-{i}", Description="bench", VpcId=vpc, TagSpecifications=[{
            "ResourceType": "security-group", "Tags": [{"Key": k, "Value": v} for k, v in tags(f"survivor-{i}").items()]}])
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda i: logs.create_log_group(logGroupName=f"/{env}/survivor-{i}", tags=tags(f"survivor-{i}")),
                      range(groups, count)))
        # Noise the filters must drop: another environment.
        list(pool.map(lambda i: logs.create_log_group(logGroupName=f"/other/{env}/{i}", tags=tags(f"n{i}", env + "-x")),
                      range(200)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=8)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    env = f"bench{uuid.uuid4().hex[:6]}"
    with running_emulator() as endpoint:
        t0 = time.perf_counter()
        populate(endpoint, env, args.count, args.workers)
        setup = time.perf_counter() - t0

        aws = AwsClients("us-east-1", endpoint, credentials=CREDS)
        state = [{"urn": f"urn:pulumi:{env}::{LAYER}::pulumi:providers:aws::aws", "type": "pulumi:providers:aws",
                  "custom": True, "id": "p", "inputs": {"region": "us-east-1"}}]
        t1 = time.perf_counter()
        inv = collect(aws, env, LAYER, types={"aws:cloudwatch/logGroup:LogGroup", "aws:ec2/securityGroup:SecurityGroup"})
        t2 = time.perf_counter()
        result = classify(state, inv.items, inventoried_types=inv.types_covered)
        plan = plan_for_survivors(result.survivors, state)
        document = plan.to_pulumi_json()
        t3 = time.perf_counter()

    minimum = math.ceil(args.count / PAGE_SIZE)
    ok_count = len(document["resources"]) == args.count
    print(f"survivors created              {args.count} (+200 of another environment), setup {setup:.1f} s")
    print(f"inventory                      {t2 - t1:.2f} s, {len(inv.items)} items, calls {dict(inv.calls)}")
    print(f"classify + import plan         {t3 - t2:.3f} s, {len(document['resources'])} entries")
    print(f"inventory + plan total         {t3 - t1:.2f} s (target < 10 s)")
    print(f"tagging API pages              {inv.tagging_pages} (minimum ceil({args.count}/{PAGE_SIZE}) = {minimum}; "
          f"ratio {inv.tagging_pages / minimum:.2f}, target <= 1.10)")
    good = ok_count and inv.tagging_pages <= 1.1 * minimum and (t3 - t1) < 10
    print("result                         " + ("PASS" if good else "FAIL"))
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
