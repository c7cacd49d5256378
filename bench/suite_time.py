"""Benchmark: how long a contributor waits for the test suite. Prints each tier's wall time per run, the median,
and PASS or MISS against its goal; exit 1 on a MISS.

    python bench/suite_time.py                          # the default tier (the README's `python -m pytest`), 3 runs
    python bench/suite_time.py --tiers default,engine,cluster --bin /root/engine/bin
    python bench/suite_time.py --runs 1 -- -p no:randomly   # arguments after `--` go to every pytest run

Tiers and goals (issue 29): the default tier, as a new contributor runs it, <= 300 s; the engine tier
(`-m engine`, needs `pulumi` on PATH) <= 480 s; the cluster tier (`-m cluster`, needs etcd, kube-apiserver,
kube-controller-manager, pulumi and pulumi-resource-kubernetes on PATH) <= 360 s. A tier whose binaries are absent
is skipped, and says which are missing: nothing here builds or downloads them. A run that does not pass is a MISS
whatever its time (its log is kept and named).

The goals hold on a 2-core machine at a 1-minute load average of 2 or less: the load at the start and the end of
every run is printed beside its time, and so is the CPU time of the run (user + sys, its child processes
included: pytest-xdist's workers too); a wall time far above the CPU time over the cores waited for a busy
neighbour. Each run is the README's command, so it has as many workers as `-n auto` gives (the cores and one
more, tests/conftest.py, or PYTEST_XDIST_AUTO_NUM_WORKERS); `-- -n 0` times one process.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOALS = {"default": 300.0, "engine": 480.0, "cluster": 360.0}
MARKERS = {"default": [], "engine": ["-m", "engine"], "cluster": ["-m", "cluster"]}


def needed(tier: str) -> list[str]:
    """The binaries a tier runs, which must be on its PATH; the default tier needs none."""
    if tier == "default":
        return []
    if tier == "engine":
        return ["pulumi"]
    from tests.kubeapi import BINARIES

    return [*BINARIES, "pulumi", "pulumi-resource-kubernetes"]


def tier_env(tier: str, bin_dir: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if bin_dir and tier != "default":  # the default tier is timed as a contributor without them runs it
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def workers(extra: list[str]) -> str:
    """How many pytest-xdist workers a run has: pyproject's `-n auto`, unless the arguments after `--` say."""
    value = "auto"
    for i, arg in enumerate(extra):
        if arg in ("-n", "--numprocesses") and i + 1 < len(extra):
            value = extra[i + 1]
        elif arg.startswith("--numprocesses="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-n") and len(arg) > 2:
            value = arg[2:]
    if value in ("auto", "logical"):
        # tests/conftest.py's pytest_xdist_auto_num_workers: the cores and one more
        value = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or str(len(os.sched_getaffinity(0)) + 1)
    return "one process (-n 0)" if value == "0" else f"{value} pytest-xdist workers"


def summary_line(log: str) -> str:
    """pytest's last line: `1503 passed, 55 skipped in 283.12s (0:04:43)`."""
    lines = [ln.strip("= ") for ln in log.splitlines() if re.search(r"\b(passed|failed|error|no tests ran)\b", ln)]
    return re.sub(r" in [0-9.]+s.*$", "", lines[-1]) if lines else "no summary (see the log)"


def run_once(tier: str, env: dict, extra: list[str], log_dir: Path, index: int) -> dict:
    log = log_dir / f"{tier}-{index}.log"
    load_start = os.getloadavg()[0]
    before = os.times()
    started = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.run([sys.executable, "-m", "pytest", *MARKERS[tier], *extra], cwd=ROOT, env=env,
                              stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"wall": wall, "cpu": cpu, "load_start": load_start, "load_end": os.getloadavg()[0],
            "passed": proc.returncode == 0, "code": proc.returncode, "summary": summary_line(log.read_text()),
            "log": log}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiers", default="default", help="comma-separated: default, engine, cluster (default: default)")
    ap.add_argument("--runs", type=int, default=3, help="runs per tier; the median is judged (default 3)")
    ap.add_argument("--bin", help="a folder put first on PATH for the engine and cluster tiers (their binaries)")
    for tier, goal in GOALS.items():
        ap.add_argument(f"--{tier}-goal", type=float, default=goal, help=f"seconds (default {goal:.0f})")
    ap.add_argument("--log-dir", type=Path, help="where each run's output is kept (default: a new temporary folder)")
    ap.add_argument("pytest_args", nargs="*", help="after `--`: passed to every pytest run")
    args = ap.parse_args()
    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]
    unknown = [t for t in tiers if t not in GOALS]
    if unknown or not tiers or args.runs < 1:
        ap.error(f"--tiers takes default, engine and cluster (got {args.tiers!r}); --runs at least 1")
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="suite-time-"))
    log_dir.mkdir(parents=True, exist_ok=True)

    print(f"{os.cpu_count()} CPUs, {workers(args.pytest_args)}; logs in {log_dir}")
    missed = False
    for tier in tiers:
        env = tier_env(tier, args.bin)
        goal = getattr(args, f"{tier}_goal")
        absent = [b for b in needed(tier) if shutil.which(b, path=env["PATH"]) is None]
        if absent:
            print(f"{tier}: SKIPPED, not on PATH: {', '.join(absent)}")
            continue
        if tier == "default" and shutil.which("pulumi", path=env["PATH"]):
            print("default: note: `pulumi` is on PATH, so the engine tier runs inside the default one")
        runs = []
        for i in range(1, args.runs + 1):
            r = run_once(tier, env, args.pytest_args, log_dir, i)
            runs.append(r)
            print(f"{tier} run {i}: {r['wall']:6.1f} s wall, {r['cpu']:6.1f} s CPU, load {r['load_start']:.2f} -> "
                  f"{r['load_end']:.2f}: {r['summary']}" + ("" if r["passed"] else f" (exit {r['code']}, {r['log']})"),
                  flush=True)
        median = statistics.median(r["wall"] for r in runs)
        failed = [r for r in runs if not r["passed"]]
        verdict = "PASS" if median <= goal and not failed else "MISS"
        missed |= verdict == "MISS"
        why = f", {len(failed)} of {len(runs)} runs failed" if failed else ""
        if max(r["load_start"] for r in runs) > 2:
            why += " (measured above the goals' load of 2: a MISS may be the neighbours')"
        print(f"{tier}: median {median:.1f} s of {len(runs)} runs, goal <= {goal:.0f} s{why}  {verdict}", flush=True)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
