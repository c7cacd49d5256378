"""Time the offline plan (`groundctl plan <env> --offline` without the terminal output).

The first run in a fresh process is reported on its own ("cold": it includes importing Pulumi, the
AWS and Kubernetes SDKs and the layer programs); then --runs more in the same process ("warm"),
each one the whole plan: four programs under the mock runtime, posture, and the rendered files.

    python bench/offline_plan.py [--env dev] [--runs 5]

Prints figures only; the target is under 5 s for `dev`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def one_plan(spec) -> tuple[float, int]:
    from bootstrap.planning import offline_render
    from bootstrap.planning.offline import run_offline

    started = time.perf_counter()
    plan = run_offline(spec)
    offline_render.files(offline_render.document(plan))
    return time.perf_counter() - started, plan.exit_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="dev")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    started = time.perf_counter()
    from bootstrap.spec import load_spec

    spec = load_spec(args.env)
    cold, code = one_plan(spec)
    cold_total = time.perf_counter() - started
    warm = [one_plan(spec)[0] for _ in range(args.runs)]

    print(f"offline plan of {args.env!r} (exit code {code}), {args.runs} warm runs in one process")
    print(f"  cold (first run, imports included): {cold_total:.2f} s  (plan alone {cold:.2f} s)")
    print(f"  warm: min {min(warm):.2f} s  median {statistics.median(warm):.2f} s  max {max(warm):.2f} s")


if __name__ == "__main__":
    main()
