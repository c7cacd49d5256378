"""Benchmark: how fast the CLI answers. Prints each figure beside its target with PASS or MISS; exit 1 on a MISS.

    python bench/startup.py            # every command's --help, 7 runs each
    python bench/startup.py --quick    # the root, three commands and `spec check`, 3 runs each (< 1 minute)

Each figure is the median wall time of a fresh `python -m groundctl …` process started from this
checkout (the console script may point at another one), so it includes the interpreter's own start.

1. `groundctl --help`: target <= 0.3 s.
2. `groundctl <cmd> --help` for every command and subcommand: the slowest median, target <= 0.3 s.
3. `groundctl spec check <env>`: target <= 0.6 s.

The machine is shared: a busy neighbour shows up as a slower median. The child's CPU time (user +
sys) is printed beside the wall time; when the two differ a lot, the wall time waited for the CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HELP_TARGET = 0.3
SPEC_CHECK_TARGET = 0.6


def run_once(args: list[str]) -> tuple[float, float, int]:
    """(wall seconds, child CPU seconds, exit code) of one `python -m groundctl <args>`."""
    before = os.times()
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "groundctl", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, env=os.environ | {"COLUMNS": "100"})
    wall = time.perf_counter() - started
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    if proc.returncode != 0:
        raise SystemExit(f"`groundctl {' '.join(args)}` exited {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace').strip()[:400]}")
    return wall, cpu, proc.returncode


def median_of(args: list[str], runs: int) -> tuple[float, float]:
    run_once(args)  # the first run pays for reading files from disk; the figure is for a warm cache
    samples = [run_once(args) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def command_paths() -> list[list[str]]:
    """Every command and subcommand of the app, as argv prefixes, found from the app itself."""
    import typer.main

    from groundctl.cli import app

    paths: list[list[str]] = []

    def walk(cmd, prefix: list[str]) -> None:
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            paths.append(prefix + [name])
            walk(sub, prefix + [name])

    walk(typer.main.get_command(app), [])
    return paths


def verdict(value: float, target: float) -> str:
    return "PASS" if value <= target else "MISS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a few commands, 3 runs each (under a minute)")
    ap.add_argument("--runs", type=int, help="runs per command (default 7, or 3 with --quick)")
    ap.add_argument("--env", default="local", help="the environment `spec check` reads (default local)")
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 7)

    paths = command_paths()
    if args.quick:
        paths = [p for p in paths if p in (["recover"], ["state", "versions"], ["spec", "check"])]

    rows: list[tuple[str, float, float, float]] = []
    wall, cpu = median_of(["--help"], runs)
    rows.append(("groundctl --help", wall, cpu, HELP_TARGET))
    worst = ("", 0.0, 0.0)
    per_command = []
    for p in paths:
        wall, cpu = median_of([*p, "--help"], runs)
        per_command.append((" ".join(p), wall, cpu))
        if wall >= worst[1]:
            worst = (" ".join(p), wall, cpu)
    rows.append((f"groundctl <cmd> --help (slowest: {worst[0]})", worst[1], worst[2], HELP_TARGET))
    wall, cpu = median_of(["spec", "check", args.env], runs)
    rows.append((f"groundctl spec check {args.env}", wall, cpu, SPEC_CHECK_TARGET))

    load = os.getloadavg()
    print(f"start-up, median of {runs} runs per command (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"on {os.cpu_count()} CPUs)")
    print("  every command's --help: " + ", ".join(f"{n} {w:.2f}" for n, w, _c in per_command))
    missed = False
    for i, (what, wall, cpu, target) in enumerate(rows, start=1):
        v = verdict(wall, target)
        missed |= v == "MISS"
        print(f"[{i}] {what:<52} {wall:5.2f} s (cpu {cpu:4.2f} s)  target <= {target:.1f} s  {v}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
