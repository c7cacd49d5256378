"""Benchmark: `groundctl fleet status` over a large fleet on the emulator.

    python bench/fleet_status.py                      # 1,000 and 10,000 environments (seeding 10,000 takes minutes)
    python bench/fleet_status.py --sizes 1000         # one size
    python bench/fleet_status.py --quick              # 50 environments: a smoke run

Seeds every environment's state bucket in the emulator as the scheduled jobs of this version leave it, in bulk
(16 writers) and with only the records the rules read in steady state: one fresh drift record, one drill of each
kind, a ledger head, a rehearsal, and the summary the drift check refreshes (`recovery.evidence.summaries.refresh`,
the real one); one environment in twenty has something to act on (drift, a failed drill, or a held lock). Then it
runs the real command in-process — `groundctl fleet status --environments DIR --json --html DIR` — timed from
argument parsing to the written page, counting every S3 call by operation and by environment (from the bucket it
names). The emulator runs in a process of its own (`groundctl emulator start`), as S3 is another machine's work.

Prints per size: wall time, ms per environment, S3 calls per environment by operation (all, and in steady state:
the environments with nothing to act on and no run holding their lock), page bytes per environment, and the growth of this process's peak memory per
environment; then each target with PASS/MISS, and exits 1 on any MISS:
- at most 3 S3 calls per environment in steady state;
- at most 15 ms per environment of wall time, at every size;
- linear: ms per environment at the largest size within 1.5x of the smallest (when they differ tenfold);
- the page at most 1 KiB per environment;
- memory flat: the peak's growth per environment at the largest size within 1.5x of the smallest.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bootstrap.aws.clients import AwsClients  # noqa: E402
from tests.fleetseed import dump, spec_data  # noqa: E402

MAX_CALLS = 3
MAX_MS = 15.0
MAX_PAGE = 1024
GROWTH = 1.5
REPO = Path(__file__).resolve().parent.parent
CREDS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _endpoint(emu: subprocess.Popen) -> str:
    """The URL `groundctl emulator start --json` prints, once it answers."""
    text = ""
    while True:
        line = emu.stdout.readline()
        if not line:
            raise RuntimeError("`groundctl emulator start` ended without printing its endpoint")
        text += line
        try:
            url = json.loads(text)["endpoint_url"]
            break
        except ValueError:
            continue
    AwsClients("us-east-1", url, credentials=CREDS).client("s3").list_buckets()
    return url


def seed_one(s3, name: str, bucket: str, trouble: str, now: float) -> None:
    """One environment as this version's scheduled jobs leave it (about a dozen requests)."""
    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.records import layout
    from bootstrap.records.drift import drift_record, save_drift_record
    from bootstrap.records.ledger import LedgerRecord
    from bootstrap.records.lock_object import LockInfo
    from recovery.drills.report import record_name, report_json
    from recovery.evidence.summaries import refresh
    from tests.fleetseed import drill_report

    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    store = ObjectStore(s3, bucket)
    rec = LedgerRecord(str(uuid.UUID(int=7)), 1, "0" * 64, None, None, "up", "run-1", "2025-11-24T00:00:00.000Z",
                       None, 3, layout.stack_key("network", name))
    store.put(layout.ledger_key("network", name, 1), rec.to_json())
    for kind in ("rebuild-cluster", "state-loss"):
        report = drill_report(name, kind, 0, rto_minutes=30, recovery=600, t0=now - 86400,
                              fail=trouble == "drill" and kind == "rebuild-cluster")
        store.put(layout.drill_key(name, record_name(report)), report_json(report).encode())
    _rehearsal(store, name, now - 3600)
    rows = [{"layer": "network", "state": "drift" if trouble == "drift" else "clean", "summary": "", "counts": {},
             "changes": []}]
    save_drift_record(store, drift_record(name, rows, clock=lambda: now - 600))
    if trouble == "lock":
        info = LockInfo(name, "ci", "runner-7", 4242, "run-x", "2025-11-24T00:00:00.000Z",
                        "2025-11-24T00:00:00.000Z", 300, None, None)
        store.put(layout.lock_key(name), info.body())
    assert refresh(store, s3, name, replication=False)  # what the drift check does after its record


def _rehearsal(store, name: str, at: float) -> None:
    """A proving rehearsal's record, written as its job writes it (the drift check's refresh lists it)."""
    from datetime import datetime, timezone

    from bootstrap.records import layout
    from recovery.evidence.rehearsal_judge import Attempt, Decrypt, LayerResult, Preview
    from recovery.evidence.rehearsal_record import record_name, rehearsal_record
    from recovery.rehearsal.scope import version_of

    version = version_of(layout.stack_key("network", name), "v1", "current",
                         datetime.fromtimestamp(at, timezone.utc), serial=1)
    result = LayerResult("network", Attempt(version, 0, Decrypt("ok", "passphrase", secrets=1), Preview("no-change"),
                                            {"restore": 0.2, "decrypt": 0.5, "preview": 4.0}),
                         rpo_seconds=0, newer={"versions": 0, "oldest": None})
    record = rehearsal_record(name, [result], started=at, finished=at + 30, groundctl_version="0.1.0",
                              pulumi_version="v3.259.0",
                              rehearsal_id=datetime.fromtimestamp(at, timezone.utc).strftime("%Y%m%dT%H%M%SZ-000001"))
    store.put(layout.rehearsal_key(name, record_name(record)), json.dumps(record).encode())


def seed_fleet(endpoint: str, n: int, folder: Path, tag: str, start: int = 0) -> dict[str, str]:
    """Environments `start` to `n - 1` and their specs in `folder`; {bucket: environment}."""
    s3 = AwsClients("us-east-1", endpoint, credentials=CREDS).client("s3")
    now = time.time()
    troubles = ("drift", "drill", "lock")

    def one(i: int) -> tuple[str, str]:
        name, bucket = f"env-{i:05d}", f"b{tag}-{i:05d}"
        seed_one(s3, name, bucket, troubles[(i // 20) % 3] if i % 20 == 7 else "", now)
        (folder / f"{name}.yaml").write_text(dump(spec_data(name, bucket, endpoint)))
        return bucket, name

    done = {}
    with ThreadPoolExecutor(max_workers=16) as pool:
        for k, (bucket, name) in enumerate(pool.map(one, range(start, n)), start + 1):
            done[bucket] = name
            if k % 1000 == 0:
                print(f"  seeded {k}", flush=True)
    return done


def run_status(folder: Path, html: Path, workers: int, buckets: dict[str, str]) -> tuple[float, Counter, Counter, dict]:
    """The real command, in-process; (seconds, S3 calls by operation, calls by environment, its JSON). Calls are
    counted as botocore builds each request's parameters, so an environment is known by the bucket it names."""
    from groundctl import main

    calls: Counter = Counter()
    per_env: Counter = Counter()
    original = AwsClients.client

    def counted(params, model, **_):
        calls.update([model.name])
        per_env.update([buckets.get(params.get("Bucket"), "?")])

    def counting(self, service, region=None):
        client = original(self, service, region)
        if not getattr(client, "_bench_counted", False):
            client.meta.events.register(f"before-parameter-build.{service}", counted)
            client._bench_counted = True
        return client

    AwsClients.client = counting
    argv = sys.argv
    sys.argv = ["groundctl", "fleet", "status", "--environments", str(folder), "--json", "--html", str(html),
                "--workers", str(workers)]
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            main()
    except SystemExit as done:
        if done.code:
            raise RuntimeError(f"fleet status exited {done.code}: {err.getvalue()[-2000:]}")
    finally:
        elapsed = time.perf_counter() - start
        sys.argv = argv
        AwsClients.client = original
    return elapsed, calls, per_env, json.loads(out.getvalue())


def _folder(base: Path, all_specs: Path, n: int) -> Path:
    folder = base / f"environments-{n}"
    folder.mkdir()
    for i in range(n):
        (folder / f"env-{i:05d}.yaml").symlink_to(all_specs / f"env-{i:05d}.yaml")
    return folder


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="50 environments only (a smoke run)")
    ap.add_argument("--sizes", default="1000,10000", help="fleet sizes to time (default 1000,10000)")
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    sizes = [50] if args.quick else sorted(int(x) for x in args.sizes.split(","))
    emu = subprocess.Popen([sys.executable, "-m", "groundctl", "emulator", "start", "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    results = []
    try:
        endpoint = _endpoint(emu)
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            all_specs = base / "all"
            all_specs.mkdir()
            buckets: dict[str, str] = {}
            tag = uuid.uuid4().hex[:6]
            for n in sizes:
                # Each size is timed on a fleet of that size (the emulator holds n buckets, not the largest size's),
                # seeded just before; what the seeding left in this process is moved out of the collector's sight.
                t = time.perf_counter()
                buckets.update(seed_fleet(endpoint, n, all_specs, tag, start=len(buckets)))
                print(f"seeded {n} environments in {time.perf_counter() - t:.1f} s")
                if len(results) == 0:
                    run_status(_folder(base, all_specs, 1), base / "warm", args.workers, buckets)  # imports, once
                gc.collect()
                gc.freeze()
                load, peak0, cpu0, emu0 = os.getloadavg()[0], _peak_kib(), time.process_time(), _cpu_of(emu.pid)
                elapsed, calls, per_env, report = run_status(_folder(base, all_specs, n), base / f"html-{n}",
                                                             args.workers, buckets)
                cpu, emu_cpu = time.process_time() - cpu0, _cpu_of(emu.pid) - emu0
                rows = report["environments"]
                # Steady state: nothing to act on, and no run holding the lock (its GET is the one call more).
                quiet = [r["environment"] for r in rows if r["level"] in ("info", "ok")
                         and not (r.get("lock") or {}).get("held")]
                results.append({
                    "n": n, "seconds": elapsed, "load": load, "cpu_ms": cpu / n * 1000, "emu_ms": emu_cpu / n * 1000, "errors": sum(1 for r in rows if r.get("error")),
                    "calls": sum(calls.values()) / len(rows),
                    "quiet_calls": sum(per_env[e] for e in quiet) / max(1, len(quiet)), "quiet": len(quiet),
                    "page": (base / f"html-{n}" / "fleet-status.html").stat().st_size / n,
                    "memory": (_peak_kib() - peak0) / n, "peak_mib": _peak_kib() / 1024,
                    "by_call": {k: v / len(rows) for k, v in sorted(calls.items())}})
    finally:
        emu.terminate()
        emu.wait(timeout=30)
    print(f"\n{'envs':>6} {'wall s':>8} {'ms/env':>7} {'CPU ms/env':>10} {'emulator':>8} {'calls/env':>9} "
          f"{'steady':>7} {'page B/env':>10} {'mem KiB/env':>11} {'peak MiB':>8} {'load':>5} {'errors':>6}")
    for r in results:
        print(f"{r['n']:>6} {r['seconds']:>8.2f} {r['seconds'] / r['n'] * 1000:>7.1f} {r['cpu_ms']:>10.1f} "
              f"{r['emu_ms']:>8.1f} {r['calls']:>9.2f} {r['quiet_calls']:>7.2f} {r['page']:>10.0f} "
              f"{r['memory']:>11.1f} {r['peak_mib']:>8.0f} {r['load']:>5.1f} {r['errors']:>6}")
    for r in results:
        print(f"  {r['n']} environments ({r['quiet']} in steady state), S3 calls per environment: "
              + ", ".join(f"{k} {v:.3g}" for k, v in r["by_call"].items()))
    first, last = results[0], results[-1]
    verdicts = [
        (f"at most {MAX_CALLS} S3 calls per environment in steady state",
         all(r["quiet_calls"] <= MAX_CALLS for r in results)),
        (f"at most {MAX_MS:g} ms per environment", all(r["seconds"] / r["n"] * 1000 <= MAX_MS for r in results)),
        (f"page at most {MAX_PAGE} bytes per environment", all(r["page"] <= MAX_PAGE for r in results))]
    if last["n"] >= 10 * first["n"]:
        growth = (last["seconds"] / last["n"]) / (first["seconds"] / first["n"])
        verdicts.append((f"linear from {first['n']} to {last['n']} (ms/env ratio {growth:.2f} <= {GROWTH})",
                         growth <= GROWTH))
        mem = last["memory"] / max(first["memory"], 1.0)
        verdicts.append((f"memory flat per environment (growth per env ratio {mem:.2f} <= {GROWTH})", mem <= GROWTH))
    ok = all(r["errors"] == 0 for r in results)
    for what, good in verdicts:
        print(f"target: {what} — {'PASS' if good else 'MISS'}")
        ok = ok and good
    print("PASS" if ok else "MISS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
