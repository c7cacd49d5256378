"""Benchmark: recovery on the emulator. Prints every figure beside its target with PASS or MISS, exit 1 on a MISS.

    python bench/recovery_scan.py           # 500 versions x 1,000 resources; growth 50/150/500/2,000
    python bench/recovery_scan.py --quick   # 30 versions; growth 10/30/60/180; a 10 MB state (< 1 minute)

The emulator (moto server) runs in a child process, as `groundctl emulator start` does, so the figures
are groundctl's client side: its CPU time, memory and threads are not mixed with the server's. The
emulator's own costs stay in the wall times; [1] also shows how long the emulator takes for the version
listings alone. (moto itself copies every stored body of the bucket for each ListObjectVersions page;
groundctl's emulator lists metadata only, see bootstrap/aws/emulator.py, so a listing costs what the
bucket's keys cost, not what its bytes do.)

1. Intact ledger: the guided flow (Assess, Candidates, Lineage/serial, Choose) as a dry run on a stack
   whose newest version is a truncated write; wall time and full state downloads until the choice is
   verified. Targets: <= 3 s and <= 5 downloads.
2. Every version evaluated (download, parse, integrity: what `groundctl state versions` does) against a
   bare scan (the same listing, then GET + json.loads of every version). Target: <= 1.5x.
3. Growth: the intact-ledger flow at four sizes (smaller states, 100 resources, so that 2,000 versions
   fit the emulator's memory), the median of three runs each: wall time, groundctl's own CPU time, state GETs, ledger GETs, peak memory
   (tracemalloc, a second run); then every version evaluated and the bare scan, as in [2]. Targets:
   groundctl's time grows no faster than linearly (each step at most 1.25x the linear ratio, for the
   shared machine's noise); state GETs the same at every size. Both the wall time and the client's CPU
   time are judged: the wall time holds the emulator's work too. [3a] the verified choice at the largest
   size within 1 s (the newest end read first: a page of the stack's newest versions, the ledger's index in one
   GET, the ledger and its digests listed from a window start; S3 calls counted by operation); [3b] every
   version evaluated grows linearly and stays within 1.5x the bare scan at the two largest sizes.
4. Start-up (bench/startup.py): `--help`, the slowest `<cmd> --help`, `spec check`. Targets 0.3/0.3/0.6 s.
5. Peak memory (tracemalloc) of downloading and evaluating one 50 MB state from the emulator through
   the evaluator, over its size. Target: <= 4x.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bootstrap.records import layout  # noqa: E402
from bootstrap.aws.clients import AwsClients  # noqa: E402
from bootstrap.aws.objectstore import ObjectStore  # noqa: E402
from bootstrap.records import ledger as led  # noqa: E402
from bootstrap.records import ledger_index  # noqa: E402
from recovery.choice.choose import Flags  # noqa: E402
from recovery.choice.evaluator import SCAN_PREFETCH, CandidateEvaluator  # noqa: E402
from recovery.guide.flow import run_guide  # noqa: E402
from recovery.guide.model import GuideOptions, GuideServices  # noqa: E402
from recovery.lineage.integrity import new_magic  # noqa: E402
from recovery.survivors.inventory import Inventory  # noqa: E402
from recovery.choice.versions import list_candidates  # noqa: E402

ENV, LAYER = "bench", "network"
LINEAGE = "0b1d2c3e-4f50-4617-8293-a4b5c6d7e8f9"
PULUMI_VERSION = "v3.140.0"
CHOICE_SECONDS, CHOICE_DOWNLOADS, SCAN_RATIO, GROWTH_SLACK, MEMORY_RATIO = 3.0, 5, 1.5, 1.25, 4.0
CHOICE_AT_SCALE_SECONDS = 1.0  # the verified choice at the largest growth size (2,000 versions by default)


class CountingClient:
    """The S3 client, counting calls by operation and the time spent in version listings."""

    def __init__(self, client):
        self._client = client
        self.calls: Counter = Counter()
        self.listing_seconds = 0.0
        self._lock = threading.Lock()

    def __getattr__(self, name):
        method = getattr(self._client, name)
        if not callable(method) or name.startswith("_") or name in ("meta", "exceptions"):
            return method

        def counted(*args, **kwargs):
            started = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                with self._lock:
                    self.calls[name] += 1
                    if name == "list_object_versions":
                        self.listing_seconds += time.perf_counter() - started
        return counted


class CountingStore(ObjectStore):
    """Counts GETs of state objects (.pulumi/) and of ledger records and their index, and every S3 call by
    operation (the client's), with the time spent in version listings."""

    def __init__(self, client, bucket):
        super().__init__(CountingClient(client), bucket)
        self.state_gets = self.ledger_gets = 0

    @property
    def listing_seconds(self) -> float:
        return self.client.listing_seconds

    def calls(self) -> str:
        return ", ".join(f"{n} {op}" for op, n in sorted(self.client.calls.items()))

    def reset(self) -> None:
        self.state_gets = self.ledger_gets = 0
        self.client.calls.clear()
        self.client.listing_seconds = 0.0

    def get(self, key, version_id=None):
        if key.startswith(".pulumi/"):
            self.state_gets += 1
        elif key.startswith(".groundctl/ledger"):  # the records and their index
            self.ledger_gets += 1
        return super().get(key, version_id)

    def get_at_most(self, key, limit):
        if key.startswith(".groundctl/ledger"):
            self.ledger_gets += 1
        return super().get_at_most(key, limit)


_EMULATOR = """
import sys
from bootstrap.aws.emulator import Emulator

emu = Emulator()
print(emu.start(), flush=True)
sys.stdin.read()
emu.stop()
"""


class ChildEmulator:
    """The emulator in its own process; stopped by closing its stdin."""

    def __enter__(self) -> str:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.proc = subprocess.Popen([sys.executable, "-c", _EMULATOR], cwd=root, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        return self.proc.stdout.readline().strip()

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def new_store(endpoint: str) -> CountingStore:
    clients = AwsClients("us-east-1", endpoint, credentials={"aws_access_key_id": "testing",
                                                             "aws_secret_access_key": "testing"})
    s3 = clients.client("s3")
    bucket = f"bench-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    return CountingStore(s3, bucket)


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


def seed(store: ObjectStore, versions: int, resources: int) -> None:
    """`versions` recorded updates (state version + ledger record each), then a truncated write on top.

    State versions are written in order by one thread (their order is the history); each ledger record
    is written by a small pool once its state's version id is known, while the next state is built."""
    key = layout.stack_key(LAYER, ENV)
    prev = None
    with ThreadPoolExecutor(1) as states, ThreadPoolExecutor(4) as records:
        pending = []
        for v in range(1, versions + 1):
            body = checkpoint(resources, v)
            sha = hashlib.sha256(body).hexdigest()
            put = states.submit(store.put, key, body)

            def record(put=put, v=v, sha=sha, prev=prev) -> bytes:
                rec = led.LedgerRecord(LINEAGE, v, sha, put.result(), prev, "up", f"run-{v}",
                                       iso(datetime.now(timezone.utc)), None, resources, key, None).to_json()
                ledger_index.claim_digest(store, LAYER, ENV, v, rec)  # as append_record does: digest, record
                store.put(layout.ledger_key(LAYER, ENV, v), rec)
                return rec

            pending.append(records.submit(record))
            prev = sha
        bodies = {v: f.result() for v, f in enumerate(pending, start=1)}
        # The index as the writers leave it (they rewrite it at each record; its older versions are not listed).
        store.put(layout.ledger_index_key(LAYER, ENV), ledger_index.encode(bodies), content_type="application/gzip")
        states.submit(store.put, key, checkpoint(resources, versions + 1)[:4096]).result()  # the crash: a truncated write


class _NoInventory:
    def __call__(self, env, layer):
        return Inventory((), 0, {})


def flow_to_choice(store: CountingStore, trace_memory: bool = False) -> dict:
    """Run the guide as a dry run; time, GETs and listing time up to the end of the Choose phase."""
    marks: dict = {}
    gc.collect()
    if trace_memory:
        tracemalloc.start()
    store.reset()
    start, cpu = time.perf_counter(), time.process_time()

    def on_condition(c):
        if c.phase == "choose":
            marks.update(seconds=time.perf_counter() - start, cpu=time.process_time() - cpu, state_gets=store.state_gets,
                         ledger_gets=store.ledger_gets, listing=store.listing_seconds, details=c.details,
                         reason=c.reason, calls=store.calls())
        elif c.phase == "lineage":
            marks["read"] = c.details.get("read", "")
            if trace_memory:
                marks["peak"] = tracemalloc.get_traced_memory()[1]

    svc = GuideServices(store=store, engine=lambda: None, inventory=_NoInventory(),
                        lock_factory=None, confirm=lambda q: False)
    t = run_guide(GuideOptions(ENV, LAYER, dry_run=True, flags=Flags()), svc, on_condition)
    if trace_memory:
        tracemalloc.stop()
    if "seconds" not in marks:  # a phase before Choose failed: say which, a figure would be meaningless
        stop = next(c for c in t.conditions if c.status in ("failed", "refused"))
        raise SystemExit(f"the recovery flow stopped in {stop.phase}: {stop.reason}: {stop.message}")
    return marks


def listing_floor(store: ObjectStore) -> float:
    """Seconds the emulator takes for the whole version listings of the candidates and the ledger, one by one: what
    the flow read before it read the newest end first (and still reads when the choice needs the whole history)."""
    start = time.perf_counter()
    for prefix in (layout.stack_key(LAYER, ENV), layout.history_prefix(LAYER, ENV), layout.backups_prefix(LAYER, ENV),
                   layout.ledger_prefix(LAYER, ENV)):
        list(store.versions(prefix))
    return time.perf_counter() - start


def full_scan(store: ObjectStore, prefetch: int = SCAN_PREFETCH) -> tuple[float, int, int]:
    """What `groundctl state versions` does: list, then evaluate every candidate."""
    gc.collect()
    start = time.perf_counter()
    cset = list_candidates(store, LAYER, ENV)
    ev = CandidateEvaluator(store, expected_stack=f"organization/{LAYER}/{ENV}", share_by_etag=False)
    n = sum(1 for _ in ev.newest_first(cset.candidates, prefetch=prefetch))
    return time.perf_counter() - start, n, ev.downloads


def bare_scan(store: ObjectStore) -> tuple[float, int]:
    """The same listing, then GET + json.loads of every candidate, one after the other."""
    gc.collect()
    start = time.perf_counter()
    n = 0
    for c in list_candidates(store, LAYER, ENV).candidates:
        obj = store.get(c.key, c.version_id)
        try:
            json.loads(obj.body)
        except ValueError:
            pass
        n += 1
    return time.perf_counter() - start, n


def memory(endpoint: str, target_mb: int) -> tuple[int, int]:
    """Peak traced memory of downloading and evaluating one state of `target_mb` through the evaluator."""
    store = new_store(endpoint)
    # 1,000 resources with padded inputs reach the size, like a state with big policies.
    per = (target_mb << 20) // 1000 // 2
    raw = checkpoint(1000, 1, pad=per)
    size = len(raw)
    store.put(layout.stack_key(LAYER, ENV), raw)
    del raw
    (cand,) = list_candidates(store, LAYER, ENV).candidates
    gc.collect()
    tracemalloc.start()
    ev = CandidateEvaluator(store, expected_stack=f"organization/{LAYER}/{ENV}")
    (judged,) = list(ev.newest_first([cand], prefetch=SCAN_PREFETCH))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert judged.verdict == "integral", judged  # a benchmark of a failing parse would measure nothing
    return size, peak


def growth(sizes: list[int], resources: int) -> list[dict]:
    rows = []
    for n in sizes:
        with ChildEmulator() as endpoint:
            store = new_store(endpoint)
            seed(store, n, resources)
            # The median of three runs: at small sizes one run is a fraction of a second, and a shared
            # machine's hiccup would otherwise decide the growth verdict.
            timed = sorted((flow_to_choice(store) for _ in range(3)), key=lambda m: m["seconds"])[1]
            traced = flow_to_choice(store, trace_memory=True)
            bare, _n = bare_scan(store)
            scan, _n, _d = full_scan(store)
            rows.append({"versions": n, "seconds": timed["seconds"], "cpu": timed["cpu"], "listing": timed["listing"],
                         "calls": timed["calls"],
                         "state_gets": timed["state_gets"], "ledger_gets": timed["ledger_gets"],
                         "peak": traced["peak"], "reason": timed["reason"], "read": timed["read"],
                         "scan": scan, "bare": bare})
            print(f"  growth: {n} versions done in {timed['seconds']:.2f} s", file=sys.stderr)
    return rows


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, under a minute")
    ap.add_argument("--versions", type=int, help="state versions for [1] and [2] (default 500, quick 30)")
    ap.add_argument("--resources", type=int, default=1000, help="resources per version for [1] and [2] (default 1,000)")
    ap.add_argument("--growth", help="comma-separated version counts for [3] (default 50,150,500,2000; quick 10,30,60,180)")
    ap.add_argument("--growth-resources", type=int, default=100, help="resources per version for [3] (default 100)")
    ap.add_argument("--memory-mb", type=int, help="size of the state for [5] (default 50, quick 10)")
    ap.add_argument("--skip-startup", action="store_true", help="leave out [4] (run bench/startup.py on its own)")
    args = ap.parse_args()
    versions = args.versions or (30 if args.quick else 500)
    sizes = [int(x) for x in (args.growth or ("10,30,60,180" if args.quick else "50,150,500,2000")).split(",")]
    memory_mb = args.memory_mb or (10 if args.quick else 50)
    began = time.perf_counter()
    lines: list[tuple[str, bool]] = []
    info: list[str] = []

    with ChildEmulator() as endpoint:
        store = new_store(endpoint)
        size = len(checkpoint(args.resources, 1))
        t0 = time.perf_counter()
        seed(store, versions, args.resources)
        info.append(f"state: {versions} versions x {args.resources} resources, {size / 1e6:.2f} MB each, seeded in "
                    f"{time.perf_counter() - t0:.1f} s")

        floor = listing_floor(store)
        m = flow_to_choice(store)
        chosen = m["details"].get("chosen") or {}
        ok = m["seconds"] <= CHOICE_SECONDS and m["state_gets"] <= CHOICE_DOWNLOADS
        lines.append((f"[1] intact ledger, {versions} versions: verified choice in {m['seconds']:.2f} s (target <= "
                      f"{CHOICE_SECONDS:.0f} s) with {m['state_gets']} state downloads (target <= {CHOICE_DOWNLOADS}); "
                      f"{m['ledger_gets']} ledger GETs, {m['cpu']:.2f} s client CPU; S3 calls: {m['calls']}; the four "
                      f"whole version listings take {floor:.2f} s on the emulator when run alone; chose serial {chosen.get('serial')}, loses nothing: "
                      f"{m['details'].get('recovery_point', {}).get('loses_nothing')}", ok))

        for key, _s, _m in list(store.keys(layout.ledger_prefix(LAYER, ENV))):
            store.delete(key)
        m = flow_to_choice(store)
        info.append(f"ledger removed (weaker evidence): flow to a choice in {m['seconds']:.2f} s, "
                    f"{m['state_gets']} state downloads, listing {m['listing']:.2f} s")
        bare, n_bare = bare_scan(store)
        scan, n_scan, downloads = full_scan(store)
        serial, _n, _d = full_scan(store, prefetch=0)
        info.append(f"every version evaluated one after the other (no downloads ahead): {serial:.2f} s, "
                    f"{serial / bare:.2f}x the bare scan")
        ratio = scan / bare
        lines.append((f"[2] every version evaluated: {scan:.2f} s for {n_scan} candidates ({downloads} downloads); "
                      f"bare scan (same listing, GET + json.loads) {bare:.2f} s for {n_bare}; ratio {ratio:.2f}x "
                      f"(target <= {SCAN_RATIO}x)", ratio <= SCAN_RATIO))

        raw_size, peak = memory(endpoint, memory_mb)

    rows = growth(sizes, args.growth_resources)
    table = [f"    {'versions':>8} {'wall s':>8} {'client cpu s':>12} {'listing s':>9} {'state GETs':>10} "
             f"{'ledger GETs':>11} {'peak MB':>8} {'scan s':>7} {'bare s':>7} {'ratio':>6}"]
    for r in rows:
        table.append(f"    {r['versions']:>8} {r['seconds']:>8.2f} {r['cpu']:>12.2f} {r['listing']:>9.2f} "
                     f"{r['state_gets']:>10} {r['ledger_gets']:>11} {r['peak'] / 1e6:>8.1f} {r['scan']:>7.2f} "
                     f"{r['bare']:>7.2f} {r['scan'] / r['bare']:>5.2f}x")
    table.append(f"    ledger read at {rows[-1]['versions']}: {rows[-1]['read'] or '(no ledger)'}")
    table.append(f"    S3 calls to the verified choice at {rows[-1]['versions']}: {rows[-1]['calls']}")

    def worst_step(field: str) -> tuple[float, int, int]:
        return max(((b[field] / a[field]) / (b["versions"] / a["versions"]), a["versions"], b["versions"])
                   for a, b in zip(rows, rows[1:]))

    cpu_step, wall_step, scan_step = worst_step("cpu"), worst_step("seconds"), worst_step("scan")
    flat = len({r["state_gets"] for r in rows}) == 1
    lines.append((f"[3] growth ({args.growth_resources} resources per version): wall time grows {wall_step[0]:.2f}x "
                  f"linear at worst ({wall_step[1]} -> {wall_step[2]}), groundctl's own time (client CPU) "
                  f"{cpu_step[0]:.2f}x ({cpu_step[1]} -> {cpu_step[2]}; target <= {GROWTH_SLACK}x for both); state GETs "
                  f"{'flat' if flat else 'not flat'} at {sorted({r['state_gets'] for r in rows})} (target: flat)\n"
                  + "\n".join(table), cpu_step[0] <= GROWTH_SLACK and wall_step[0] <= GROWTH_SLACK and flat))
    top = rows[-1]
    lines.append((f"[3a] verified choice at {top['versions']} versions: {top['seconds']:.2f} s (target <= "
                  f"{CHOICE_AT_SCALE_SECONDS:.0f} s) with {top['ledger_gets']} ledger GETs and {top['calls']}",
                  top["seconds"] <= CHOICE_AT_SCALE_SECONDS))
    judged = rows[-2:]  # 500 and 2,000 by default
    lines.append((f"[3b] every version evaluated: grows {scan_step[0]:.2f}x linear at worst ({scan_step[1]} -> "
                  f"{scan_step[2]}; target <= {GROWTH_SLACK}x); over the bare download-and-parse "
                  + ", ".join(f"{r['scan'] / r['bare']:.2f}x at {r['versions']}" for r in judged)
                  + f" (target <= {SCAN_RATIO}x)",
                  scan_step[0] <= GROWTH_SLACK and all(r["scan"] / r["bare"] <= SCAN_RATIO for r in judged)))

    if not args.skip_startup:
        import startup

        runs = 3 if args.quick else 7
        paths = startup.command_paths()
        if args.quick:
            paths = [p for p in paths if p in (["recover"], ["state", "versions"], ["spec", "check"])]
        root, _ = startup.median_of(["--help"], runs)
        per = [(" ".join(p), startup.median_of([*p, "--help"], runs)[0]) for p in paths]
        name, slowest = max(per, key=lambda x: x[1])
        check, _ = startup.median_of(["spec", "check", "local"], runs)
        ok = root <= startup.HELP_TARGET and slowest <= startup.HELP_TARGET and check <= startup.SPEC_CHECK_TARGET
        lines.append((f"[4] start-up, median of {runs}: --help {root:.2f} s, slowest <cmd> --help ({name}) "
                      f"{slowest:.2f} s, spec check local {check:.2f} s (targets {startup.HELP_TARGET}/"
                      f"{startup.HELP_TARGET}/{startup.SPEC_CHECK_TARGET} s)", ok))

    lines.append((f"[5] peak memory downloading and evaluating a {raw_size / 1e6:.1f} MB state: {peak / 1e6:.1f} MB "
                  f"= {peak / raw_size:.2f}x its size (target <= {MEMORY_RATIO:.0f}x)", peak / raw_size <= MEMORY_RATIO))

    load = os.getloadavg()
    print(f"recovery bench, {'quick' if args.quick else 'full'} run in {time.perf_counter() - began:.0f} s; load "
          f"average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs (a shared machine)")
    for line in info:
        print("    " + line)
    for text, ok in lines:
        first, *rest = text.split("\n")
        print(f"{verdict(ok)} {first}")
        for r in rest:
            print(r)
    return 0 if all(ok for _t, ok in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
