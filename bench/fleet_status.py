"""Benchmark: `groundctl fleet status` over a large fleet on the emulator.

    python bench/fleet_status.py           # 200 environments, each with 30 drift and 10 drill records
    python bench/fleet_status.py --quick   # 20 environments: a smoke run against the same target

Seeds every environment's state bucket in the emulator with the records scheduled runs leave (drift records, drill reports, ledger heads, a few locks, bucket
settings), writes one spec per environment, then runs the real command in-process —
`groundctl fleet status --environments DIR --json --html DIR` — and times it from argument parsing to
the written HTML. S3 calls are counted on the clients the command creates.
The emulator runs as an operator runs it, `groundctl emulator start` in a process of its own (as S3 is
another machine's work, not the reading process's); moto serves each request in ~3 ms of CPU, which
is most of what is measured here.
Target: under 10 s for 200 environments. Prints the figures, the target and PASS/MISS; exits 1 on MISS.
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
        (folder / f"{name}.yaml").write_text(dump(spec_data(name, bucket, endpoint)))

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 environments instead of 200")
    ap.add_argument("--environments", type=int, default=None)
    ap.add_argument("--drift", type=int, default=30)
    ap.add_argument("--drills", type=int, default=10)
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args()
    n = args.environments or (20 if args.quick else 200)
    emu = subprocess.Popen([sys.executable, "-m", "groundctl", "emulator", "start", "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, cwd=REPO)
    try:
        endpoint = _endpoint(emu)
        with tempfile.TemporaryDirectory() as tmp:
            folder, html = Path(tmp) / "environments", Path(tmp) / "html"
            folder.mkdir()
            t = time.perf_counter()
            seed_fleet(endpoint, n, args.drift, args.drills, folder)
            print(f"seeded {n} environments ({args.drift} drift + {args.drills} drill records each) "
                  f"in {time.perf_counter() - t:.1f} s")
            cpu0, emu0, load = time.process_time(), _cpu_of(emu.pid), os.getloadavg()[0]
            elapsed, calls, report = run_status(folder, html, args.workers)
            cpu, emu_cpu = time.process_time() - cpu0, _cpu_of(emu.pid) - emu0
            page = html / "fleet-status.html"
            rows = report["environments"]
            errors = [r["environment"] for r in rows if r.get("error")]
            total = sum(calls.values())
            print(f"fleet status: {len(rows)} environments in {elapsed:.2f} s "
                  f"({elapsed / len(rows) * 1000:.1f} ms per environment, {args.workers} workers)")
            print(f"S3 calls: {total} total, {total / len(rows):.1f} per environment "
                  f"({', '.join(f'{k} {v / len(rows):g}' for k, v in sorted(calls.items()))})")
            print(f"CPU: {cpu:.2f} s in fleet status, {emu_cpu:.2f} s in the emulator serving it "
                  f"(load average {load:.1f} on {os.cpu_count()} cores when it started)")
            print(f"needing attention: {report['counts']['needing_attention']}; errors: {len(errors)}; "
                  f"HTML {page.stat().st_size / 1024:.0f} KiB")
    finally:
        emu.terminate()
        emu.wait(timeout=30)
    # The target is for the full size; a smaller run (--quick) is a smoke run judged against the same 10 s,
    # since the command's start-up (imports, reading the specs) does not shrink with the fleet.
    ok = elapsed < TARGET_SECONDS and not errors
    print(f"target: under {TARGET_SECONDS:.0f} s (set for 200 environments; this run: {n}) — {'PASS' if ok else 'MISS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
