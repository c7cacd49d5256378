"""Benchmark: choosing a state version to restore, on the emulator. Prints figures; asserts nothing.

    python bench/recovery_scan.py                 # the full size: 500 versions x 1,000 resources
    python bench/recovery_scan.py --versions 50   # a quick run

1. Intact ledger: the guided flow (Assess → Candidates → Lineage/serial → Choose) on a stack whose
   newest version is a truncated write; counts full state downloads (GETs of state objects) until the
   choice is verified. Target: at most 5.
2. Ledger removed: the same flow (weaker evidence), and the worst case — evaluating every version
   (download, parse, integrity) as `groundctl state versions` does — against a bare GET + json.loads of
   every version. Target: at most 1.5x.
3. Peak memory (tracemalloc) of evaluating one 50 MB state (parse + integrity). Target: at most 4x.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import time
import tracemalloc
import uuid
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bootstrap.records import layout  # noqa: E402
from bootstrap.aws.clients import AwsClients  # noqa: E402
from bootstrap.aws.emulator import Emulator  # noqa: E402
from bootstrap.aws.objectstore import ObjectStore  # noqa: E402
from bootstrap.records import ledger as led  # noqa: E402
from recovery.choose import Flags  # noqa: E402
from recovery.guide import GuideOptions, GuideServices, run_guide  # noqa: E402
from recovery.integrity import new_magic  # noqa: E402
from recovery.inventory import Inventory  # noqa: E402
from recovery.versions import CandidateEvaluator, evaluate_bytes, list_candidates  # noqa: E402

ENV, LAYER = "bench", "network"
LINEAGE = "0b1d2c3e-4f50-4617-8293-a4b5c6d7e8f9"
PULUMI_VERSION = "v3.140.0"


class CountingStore(ObjectStore):
    """Counts GETs of state objects (.pulumi/stacks, history, backups), not of ledger records or locks."""

    def __init__(self, client, bucket):
        super().__init__(client, bucket)
        self.state_gets = 0

    def get(self, key, version_id=None):
        if key.startswith(".pulumi/"):
            self.state_gets += 1
        return super().get(key, version_id)


def checkpoint(n_resources: int, version: int, pad: int = 0) -> bytes:
    """A realistic DIY checkpoint: the root stack, an explicit AWS provider, a VPC, and subnets, route
    tables and security groups with inputs, outputs, parents, providers and dependencies."""
    stack_urn = f"urn:pulumi:{ENV}::{LAYER}::pulumi:pulumi:Stack::{LAYER}-{ENV}"
    prov_urn = f"urn:pulumi:{ENV}::{LAYER}::pulumi:providers:aws::aws"
    prov_ref = f"{prov_urn}::04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    vpc_urn = f"urn:pulumi:{ENV}::{LAYER}::aws:ec2/vpc:Vpc::vpc"
    tags = {"groundctl:env": ENV, "groundctl:layer": LAYER}
    res = [
        {"urn": stack_urn, "custom": False, "type": "pulumi:pulumi:Stack",
         "outputs": {"groundctl_lineage": LINEAGE, "vpc_id": "vpc-0a1b2c3d4e5f60718"}},
        {"urn": prov_urn, "custom": True, "id": "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "type": "pulumi:providers:aws",
         "inputs": {"region": "us-east-1", "version": "7.51.0", "defaultTags": json.dumps({"tags": tags})},
         "outputs": {"region": "us-east-1", "version": "7.51.0"}, "parent": stack_urn},
        {"urn": vpc_urn, "custom": True, "id": "vpc-0a1b2c3d4e5f60718", "type": "aws:ec2/vpc:Vpc", "parent": stack_urn,
         "provider": prov_ref, "inputs": {"cidrBlock": "10.0.0.0/16", "tags": tags | {"groundctl:name": "vpc"}},
         "outputs": {"id": "vpc-0a1b2c3d4e5f60718", "arn": "arn:aws:ec2:us-east-1:123456789012:vpc/vpc-0a1b2c3d4e5f60718",
                     "cidrBlock": "10.0.0.0/16", "enableDnsHostnames": True, "tagsAll": tags}},
    ]
    kinds = ("aws:ec2/subnet:Subnet", "aws:ec2/routeTable:RouteTable", "aws:ec2/securityGroup:SecurityGroup")
    for i in range(n_resources - len(res)):
        typ = kinds[i % 3]
        name = f"{typ.rsplit(':', 1)[-1].lower()}-{i}"
        rid = f"{('subnet', 'rtb', 'sg')[i % 3]}-{hashlib.sha1(name.encode()).hexdigest()[:17]}"
        inputs = {"vpcId": "vpc-0a1b2c3d4e5f60718", "cidrBlock": f"10.{i // 250 % 250}.{i % 250}.0/24",
                  "tags": tags | {"groundctl:name": name, "revision": str(version)}}
        if pad:
            inputs["description"] = "x" * pad
        res.append({
            "urn": f"urn:pulumi:{ENV}::{LAYER}::{typ}::{name}", "custom": True, "id": rid, "type": typ,
            "inputs": inputs, "outputs": inputs | {"id": rid, "arn": f"arn:aws:ec2:us-east-1:123456789012:{rid}",
                                                   "ownerId": "123456789012", "tagsAll": inputs["tags"]},
            "parent": stack_urn, "provider": prov_ref, "dependencies": [vpc_urn],
            "propertyDependencies": {"vpcId": [vpc_urn]},
        })
    doc = {"version": 3, "checkpoint": {"stack": f"organization/{LAYER}/{ENV}", "latest": {
        "manifest": {"time": "2026-12-02T00:00:00Z", "magic": new_magic(PULUMI_VERSION), "version": PULUMI_VERSION},
        "secrets_providers": {"type": "passphrase", "state": {"salt": "v1:bench"}},
        "resources": res, "pending_operations": []}}}
    return json.dumps(doc, indent=4).encode()


def iso(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seed(store: ObjectStore, versions: int, resources: int) -> list[str]:
    """`versions` recorded updates (state version + ledger record each), then a truncated write on top."""
    key = layout.stack_key(LAYER, ENV)
    prev = None
    vids = []
    for v in range(1, versions + 1):
        body = checkpoint(resources, v)
        vid = store.put(key, body)
        sha = hashlib.sha256(body).hexdigest()
        rec = led.LedgerRecord(LINEAGE, v, sha, vid, prev, "up", f"run-{v}", iso(datetime.now(timezone.utc)), None,
                               resources, key, None)
        store.put(layout.ledger_key(LAYER, ENV, v), rec.to_json())
        prev = sha
        vids.append(vid)
        if v % 50 == 0:
            print(f"  seeded {v}/{versions} versions", file=sys.stderr)
    store.put(key, checkpoint(resources, versions + 1)[:4096])  # the crash: a truncated current object
    return vids


class _NoInventory:
    def __call__(self, env, layer):
        return Inventory((), 0, {})


def flow_to_choice(store: CountingStore) -> tuple[float, int, dict]:
    """Run the guide as a dry run; measure time and state GETs up to the end of the Choose phase."""
    marks: dict = {}
    start = time.perf_counter()
    store.state_gets = 0

    def on_condition(c):
        if c.phase == "choose":
            marks["t"] = time.perf_counter() - start
            marks["gets"] = store.state_gets
            marks["cond"] = c

    svc = GuideServices(store=store, engine=lambda: None, inventory=_NoInventory(),
                        lock_factory=None, confirm=lambda q: False)
    run_guide(GuideOptions(ENV, LAYER, dry_run=True, flags=Flags()), svc, on_condition)
    return marks["t"], marks["gets"], marks["cond"].details


def full_scan(store: ObjectStore) -> tuple[float, int]:
    start = time.perf_counter()
    cset = list_candidates(store, LAYER, ENV)
    ev = CandidateEvaluator(store, expected_stack=f"organization/{LAYER}/{ENV}", share_by_etag=False)
    n = sum(1 for _ in ev.newest_first(cset.candidates))
    return time.perf_counter() - start, n


def bare_scan(store: ObjectStore) -> tuple[float, int]:
    start = time.perf_counter()
    n = 0
    for v in store.versions(layout.stack_key(LAYER, ENV)):
        if v.delete_marker or v.key != layout.stack_key(LAYER, ENV):
            continue
        body = store.get(v.key, v.version_id).body
        try:
            json.loads(body)
        except ValueError:
            pass
        n += 1
    return time.perf_counter() - start, n


def memory(target_mb: int) -> tuple[int, int]:
    # 1,000 resources with padded inputs reach the target size, like a state with big policies.
    per = (target_mb << 20) // 1000 // 2
    raw = checkpoint(1000, 1, pad=per)
    gc.collect()
    tracemalloc.start()
    ev, doc = evaluate_bytes(raw, f"organization/{LAYER}/{ENV}", "bench")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert ev.verdict == "integral", ev  # a benchmark of a failing parse would measure nothing
    del doc
    return len(raw), peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--versions", type=int, default=500, help="state versions (default 500)")
    ap.add_argument("--resources", type=int, default=1000, help="resources per version (default 1,000)")
    ap.add_argument("--memory-mb", type=int, default=50, help="size of the state for the memory figure (default 50)")
    args = ap.parse_args()

    emu = Emulator()
    endpoint = emu.start()
    try:
        clients = AwsClients("us-east-1", endpoint, credentials={"aws_access_key_id": "testing",
                                                                 "aws_secret_access_key": "testing"})
        s3 = clients.client("s3")
        bucket = f"bench-{uuid.uuid4().hex[:12]}"
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        store = CountingStore(s3, bucket)
        size = len(checkpoint(args.resources, 1))
        print(f"state: {args.versions} versions x {args.resources} resources, {size / 1e6:.2f} MB each")
        t0 = time.perf_counter()
        seed(store, args.versions, args.resources)
        print(f"seeded in {time.perf_counter() - t0:.1f} s")

        t, gets, details = flow_to_choice(store)
        chosen = details.get("chosen") or {}
        print(f"[1] intact ledger: choice verified in {t:.2f} s with {gets} full state downloads (target <= 5); "
              f"chosen serial {chosen.get('serial')} of {args.versions}, loses nothing: "
              f"{details.get('recovery_point', {}).get('loses_nothing')}")

        for key, _s, _m in list(store.keys(layout.ledger_prefix(LAYER, ENV))):
            store.delete(key)
        t, gets, details = flow_to_choice(store)
        print(f"[2a] ledger removed: flow to a choice in {t:.2f} s, {gets} downloads (weaker evidence; "
              f"chosen {(details.get('chosen') or {}).get('version_id')})")
        bare, n_bare = bare_scan(store)
        scan, n_scan = full_scan(store)
        print(f"[2b] ledger removed, worst case (every version evaluated): {scan:.2f} s for {n_scan} candidates; "
              f"bare GET + json.loads of {n_bare} versions: {bare:.2f} s; ratio {scan / bare:.2f}x (target <= 1.5x)")
    finally:
        emu.stop()

    raw, peak = memory(args.memory_mb)
    print(f"[3] peak memory evaluating a {raw / 1e6:.1f} MB state: {peak / 1e6:.1f} MB = {peak / raw:.2f}x its size "
          f"(target <= 4x)")


if __name__ == "__main__":
    main()
