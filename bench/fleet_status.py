"""Benchmark: `groundctl fleet status` over a large fleet on the emulator.

    python bench/fleet_status.py                 # 50, 200 and 1,000 environments, each 30 drift + 10 drill records
    python bench/fleet_status.py --sizes 200     # just the target size
    python bench/fleet_status.py --quick         # 20 environments: a smoke run

Seeds every environment's state bucket in the emulator with the records scheduled runs leave (drift records, drill reports, ledger heads, a few locks, bucket
settings), writes one spec per environment, then runs the real command in-process —
`groundctl fleet status --environments DIR --json --html DIR` — and times it from argument parsing to
the written HTML. S3 calls are counted on the clients the command creates.
The emulator runs as an operator runs it, `groundctl emulator start` in a process of its own (as S3 is
another machine's work, not the reading process's); moto serves each request in ~3 ms of CPU, which
is most of what is measured here.
Targets: under 10 s wall at 200 environments, at most 6 S3 calls per environment, the page under 500 KiB,
and growth linear to 1,000 (ms per environment at 1,000 within 1.5x of that at 200). Prints a table per size,
each target with PASS/MISS, and exits 1 on any MISS. The process's imports are paid by a one-environment warm-up.
"""

from __future__ import annotations

import argparse
import io
import json
import os
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
from tests.fleetseed import Seed, dump, seed_environment, spec_data  # noqa: E402

TARGET_SECONDS = 10.0
MAX_CALLS = 6
# 2.5 KiB per environment at 200: every finding shows since when and its command, every row its next step and
# runbook (288 KiB here before they did: this fleet's records are all a year old, so each environment has four
# or five findings, 863 in all).
MAX_HTML_BYTES = 200 * 2560
REPO = Path(__file__).resolve().parent.parent


def _cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
    clients = AwsClients("us-east-1", url, credentials={"aws_access_key_id": "testing",
                                                        "aws_secret_access_key": "testing"})
    clients.client("s3").list_buckets()
    return url


def seed_fleet(endpoint: str, n: int, drift: int, drills: int, folder: Path) -> None:
    clients = AwsClients("us-east-1", endpoint, credentials={"aws_access_key_id": "testing",
                                                             "aws_secret_access_key": "testing"})
    s3 = clients.client("s3")

    def one(i: int) -> None:
        name, bucket = f"env-{i:03d}", f"bench-{i:03d}-{uuid.uuid4().hex[:8]}"
        seed = Seed(drift_records=drift, drill_records=drills, drifted_last=i % 7 == 0, last_drill_fails=i % 11 == 0,
                    slower_each_drill=30.0 if i % 5 == 0 else 0.0, lock_holder="ci" if i % 13 == 0 else None,
                    replication_rtc=(True if i % 2 else None), noncurrent_days=30)
        seed_environment(s3, name, bucket, seed)
        # Half the specs ask for the replica their bucket has (its replication is then read too).
        (folder / f"{name}.yaml").write_text(dump(spec_data(name, bucket, endpoint, replica="us-west-2" if i % 2 else None)))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(n)))


def run_status(folder: Path, html: Path, workers: int) -> tuple[float, Counter, dict]:
    """The real command, in-process; (seconds, S3 calls by operation, its JSON)."""
    from groundctl import main

    calls: Counter = Counter()
    original = AwsClients.client

    def counting(self, service, region=None):
        client = original(self, service, region)
        if not getattr(client, "_bench_counted", False):
            client.meta.events.register(f"before-call.{service}", lambda model, **_: calls.update([model.name]))
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
            raise RuntimeError(f"fleet status exited {done.code}: {err.getvalue()}")
    finally:
        elapsed = time.perf_counter() - start
        sys.argv = argv
        AwsClients.client = original
    return elapsed, calls, json.loads(out.getvalue())


def _folder(base: Path, all_specs: Path, n: int) -> Path:
    """A folder with the specs of the first `n` environments."""
    folder = base / f"environments-{n}"
    folder.mkdir()
    for i in range(n):
        (folder / f"env-{i:03d}.yaml").symlink_to(all_specs / f"env-{i:03d}.yaml")
    return folder


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 environments only (a smoke run)")
    ap.add_argument("--sizes", default="50,200,1000", help="fleet sizes to time (default 50,200,1000)")
    ap.add_argument("--drift", type=int, default=30)
    ap.add_argument("--drills", type=int, default=10)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    sizes = [20] if args.quick else sorted(int(x) for x in args.sizes.split(","))
    emu = subprocess.Popen([sys.executable, "-m", "groundctl", "emulator", "start", "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    results = []
    try:
        endpoint = _endpoint(emu)
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            all_specs = base / "all"
            all_specs.mkdir()
            t = time.perf_counter()
            seed_fleet(endpoint, max(sizes), args.drift, args.drills, all_specs)
            print(f"seeded {max(sizes)} environments ({args.drift} drift + {args.drills} drill records each) "
                  f"in {time.perf_counter() - t:.1f} s")
            run_status(_folder(base, all_specs, 1), base / "warm", args.workers)  # imports, paid once per process
            for n in sizes:
                cpu0, emu0, load = time.process_time(), _cpu_of(emu.pid), os.getloadavg()[0]
                elapsed, calls, report = run_status(_folder(base, all_specs, n), base / f"html-{n}", args.workers)
                cpu, emu_cpu = time.process_time() - cpu0, _cpu_of(emu.pid) - emu0
                rows = report["environments"]
                results.append({"n": n, "seconds": elapsed, "calls": sum(calls.values()) / len(rows), "cpu": cpu,
                                "emu_cpu": emu_cpu, "load": load, "errors": sum(1 for r in rows if r.get("error")),
                                "html_kib": (base / f"html-{n}" / "fleet-status.html").stat().st_size / 1024,
                                "by_call": {k: v / len(rows) for k, v in sorted(calls.items())}})
    finally:
        emu.terminate()
        emu.wait(timeout=30)
    print(f"\n{'envs':>6} {'wall s':>8} {'ms/env':>8} {'S3 calls/env':>13} {'CPU s':>7} {'emulator CPU s':>15} "
          f"{'load':>6} {'HTML KiB':>9} {'errors':>7}")
    for r in results:
        print(f"{r['n']:>6} {r['seconds']:>8.2f} {r['seconds'] / r['n'] * 1000:>8.1f} {r['calls']:>13.2f} {r['cpu']:>7.2f} "
              f"{r['emu_cpu']:>15.2f} {r['load']:>6.1f} {r['html_kib']:>9.0f} {r['errors']:>7}")
    for r in results:
        print(f"  {r['n']} environments, S3 calls per environment: "
              + ", ".join(f"{k} {v:g}" for k, v in r["by_call"].items()))
    ok = all(r["errors"] == 0 for r in results)
    at = {r["n"]: r for r in results}
    target = at.get(200) or results[-1]
    verdicts = [("under 10 s wall at 200 environments", target["seconds"] < TARGET_SECONDS),
                (f"at most {MAX_CALLS} S3 calls per environment", all(r["calls"] <= MAX_CALLS for r in results)),
                (f"HTML under {MAX_HTML_BYTES // 1024} KiB at 200 environments",
                 target["html_kib"] * 1024 < MAX_HTML_BYTES)]
    if 200 in at and 1000 in at:
        # Linear: the time per environment at 1,000 is no more than 1.5x the time per environment at 200.
        growth = (at[1000]["seconds"] / 1000) / (at[200]["seconds"] / 200)
        verdicts.append((f"linear growth to 1,000 environments (ms/env ratio 1,000 vs 200: {growth:.2f} <= 1.5)",
                         growth <= 1.5))
    for what, good in verdicts:
        print(f"target: {what} — {'PASS' if good else 'MISS'}")
        ok = ok and good
    print("PASS" if ok else "MISS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
