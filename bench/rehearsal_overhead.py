"""Benchmark: what a rehearsal costs over the bare preview it runs, and how rehearsals scale in parallel (issue 28).
PASS/MISS per target, exit 1 on a MISS.

    python bench/rehearsal_overhead.py                       # medians of 5; 10, 25 and 50 environments
    python bench/rehearsal_overhead.py --runs 1 --sizes 2,4 --workers 2

On the engine tier's set-up (tests/engine_programs: the network stand-in, 5 dynamic resources; the product's
DIY S3 backend in the spec's bucket on the emulator; passphrase secrets; a private PULUMI_HOME; no plugin
acquisition):

Part 1, one environment with its network layer up:
    groundctl state rehearse <env> --layers network --json     (in-process, as bench/engine_overhead.py does)
vs  pulumi preview --refresh --expect-no-changes               (the CLI, on the same restored scratch stack)
The bare preview runs on a scratch DIY backend (`file://`, the product's ScratchBackend) holding the very state
bytes the rehearsal restores, with the config and lineage groundctl sets: the preview the rehearsal runs, on the
backend it runs it on. (On the real S3 stack the bare side would pay the emulator's round trips the rehearsal's
preview does not, and the ratio would flatter the rehearsal.) What the ratio charges to groundctl is everything
else: reading the ledger and the stack's versions to choose the one a recovery would restore, copying it into
the scratch backend, the workspace set-up (the decryption's proof is the preview's own: only a failed preview
is followed by a `stack export --show-secrets`). Target <= 1.10x (issue 38 §2); the runs interleave, each led by
the other side than the one before; the rehearsal's own seconds per phase (its JSON record) and both sides' CPU
seconds (bench/engine_overhead.py's measure, which a loaded machine disturbs less) are printed beside it.

Part 2, --sizes environments (each its own state and records buckets, the network stand-in up; the set-up is
not timed), rehearsed in parallel: each rehearsal its own process (`tests/engine_programs/groundctl_main.py
state rehearse ...`), --workers at a time. Time per stack = the batch's wall time / its size. Target: at the
largest size within 1.25x of that at the smallest.

Needs the Pulumi CLI on PATH (`pulumi`, `pulumi-language-python`, `pulumi-resource-pulumi-python`); without it
the bench says so and exits 2 (bench/prerequisites.py). It builds and downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.engine_overhead import cpu_seconds, fmt, interleaved, load, verdict  # noqa: E402
from bench.prerequisites import require_engine  # noqa: E402

OVERHEAD_TARGET = 1.10  # issue 38 §2
SCALE_TARGET = 1.25
LAYER = "network"
TIMEOUT = 900  # seconds for one command, generous for a loaded machine


def rehearse_args() -> list[str]:
    return ["state", "rehearse", "SPEC", "--layers", LAYER, "--json"]


def check_rehearsal(code: int, out: str, err: str, where: str) -> dict:
    if code != 0:
        raise SystemExit(f"{where}: groundctl state rehearse exited {code}:\n{err[-2000:]}{out[-2000:]}")
    doc = json.loads(out)
    if doc.get("outcome") != "proven":
        raise SystemExit(f"{where}: the rehearsal was {doc.get('outcome')!r}, not 'proven':\n{out[-2000:]}")
    return doc


class OneEnvironment:
    """Part 1: one engine-tier environment with its network layer up, and the bare folder on a scratch backend."""

    def __init__(self, tmp: Path, endpoint: str):
        import yaml

        from bootstrap.engine.rundir import run_project
        from bootstrap.engine.workspace import workspace_settings
        from bootstrap.spec import load_spec
        from recovery.rehearsal.scratch import ScratchBackend
        from recovery.state.state_bytes import decompress
        from tests.engine_programs.tier import install_stacks_dir, make_tier

        self.tier = make_tier(tmp, endpoint)
        os.environ.update(self.tier.env)
        os.environ.pop("GROUNDCTL_ENDPOINT_URL", None)
        install_stacks_dir(self.tier.stacks)
        code, out, err = self.tier.cli("up", "SPEC", "--layers", LAYER, "--yes")
        if code != 0:
            raise SystemExit(f"set-up: groundctl up exited {code}:\n{err[-2000:]}{out[-2000:]}")

        spec = load_spec(str(self.tier.spec_path))
        spec = spec.model_copy(update={"aws": spec.aws.model_copy(update={"endpoint_url": endpoint})})
        self.stack = spec.name
        # The state the rehearsal restores: the stack object's current version (the ledger's head here).
        raw = self.tier.s3.get_object(Bucket=self.tier.state_bucket, Key=self.tier.stack_key(LAYER))["Body"].read()
        body, _ = decompress(raw, self.tier.stack_key(LAYER))  # placed as the rehearsal places it
        self.scratch = ScratchBackend()
        self.scratch.place(LAYER, self.stack, body)
        settings = workspace_settings(spec, endpoint_url=endpoint, environ=os.environ,
                                      backend_override=self.scratch.url)
        self.bare_env = {**os.environ, **settings.env}
        self.bare_dir = tmp / "bare" / LAYER
        self.bare_dir.mkdir(parents=True)
        program = self.tier.stacks / LAYER
        project = yaml.safe_load((program / "Pulumi.yaml").read_text())
        (self.bare_dir / "Pulumi.yaml").write_text(yaml.safe_dump(run_project(project, program), sort_keys=False))
        config = self.tier.engine()._layer_config(LAYER)
        if any(v.secret for v in config.values()):
            raise SystemExit("set-up: the network layer has a secret config value; the bare side cannot copy it")
        config = {k: v.value for k, v in config.items()}
        root = next(r for r in json.loads(body)["checkpoint"]["latest"]["resources"]
                    if r["type"] == "pulumi:pulumi:Stack")
        config["groundctl:lineage"] = root["outputs"]["groundctl_lineage"]
        (self.bare_dir / f"Pulumi.{self.stack}.yaml").write_text(
            yaml.safe_dump({"secretsprovider": "passphrase", "config": config}))

    def rehearse(self) -> tuple[float, dict]:
        t0 = time.perf_counter()
        code, out, err = self.tier.cli(*rehearse_args())
        seconds = time.perf_counter() - t0
        return seconds, check_rehearsal(code, out, err, "part 1")

    def bare(self) -> float:
        argv = ["pulumi", "preview", "--refresh", "--expect-no-changes", "--stack", self.stack,
                "--non-interactive", "--color", "never"]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=self.bare_dir, env=self.bare_env, capture_output=True, text=True,
                              timeout=TIMEOUT)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}{proc.stdout[-2000:]}")
        return seconds

    def close(self) -> None:
        self.scratch.close()


def layer_phases(doc: dict) -> dict[str, float]:
    """The rehearsal's own seconds per phase: its layer's (choose, restore, decrypt, preview), its references'."""
    out: dict[str, float] = {}
    for lay in doc.get("layers") or []:
        for name, s in (lay.get("seconds") or {}).items():
            out[name] = out.get(name, 0.0) + float(s or 0)
        for ref in lay.get("references") or []:
            for name, s in (ref.get("seconds") or {}).items():
                key = f"reference {ref.get('layer')}/{name}"
                out[key] = out.get(key, 0.0) + float(s or 0)
    return out


def part1(tmp: Path, endpoint: str, runs: int) -> tuple[list[float], list[float], list[dict], list[float], list[float]]:
    """Each side's wall seconds, the rehearsal's phases, each side's CPU seconds (this process's and its children's)."""
    env = OneEnvironment(tmp, endpoint)
    g, b, ph, g_cpu, b_cpu = [], [], [], [], []

    def rehearsal() -> None:
        cpu = cpu_seconds()
        seconds, doc = env.rehearse()
        g_cpu.append(cpu_seconds() - cpu)
        g.append(seconds)
        ph.append(layer_phases(doc))

    def bare() -> None:
        cpu = cpu_seconds()
        b.append(env.bare())
        b_cpu.append(cpu_seconds() - cpu)

    try:
        for i in range(runs):  # interleaved, so both sides see the same load on a shared machine
            for side in interleaved(i, [rehearsal, bare]):
                side()
        return g, b, ph, g_cpu, b_cpu
    finally:
        env.close()


def in_pool(workers: int, fn, items: list) -> list:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def run_child(tier, args: list[str], where: str) -> tuple[float, int, str, str]:
    t0 = time.perf_counter()
    proc = tier.spawn(*args)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # its own session (spawn): the Pulumi children go with it
        out, err = proc.communicate()
        raise SystemExit(f"{where}: `groundctl {' '.join(args)}` took over {TIMEOUT} s")
    return time.perf_counter() - t0, proc.returncode, out, err


def part2(tmp: Path, endpoint: str, sizes: list[int], workers: int) -> list[tuple[int, float, list[float]]]:
    from tests.engine_programs.tier import make_tier

    tiers = [make_tier(tmp / f"env{i:03d}", endpoint) for i in range(max(sizes))]

    def deploy(tier) -> None:
        _, code, out, err = run_child(tier, ["up", "SPEC", "--layers", LAYER, "--yes"], "part 2 set-up")
        if code != 0:
            raise SystemExit(f"part 2 set-up: groundctl up exited {code}:\n{err[-2000:]}{out[-2000:]}")

    in_pool(workers, deploy, tiers)

    def rehearse(tier) -> float:
        seconds, code, out, err = run_child(tier, rehearse_args(), "part 2")
        check_rehearsal(code, out, err, "part 2")
        return seconds

    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        each = in_pool(workers, rehearse, tiers[:n])
        rows.append((n, time.perf_counter() - t0, each))
    return rows


def sizes_arg(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes whole numbers separated by commas, not {text!r}") from None
    if not sizes or any(n < 1 or n > 200 for n in sizes):
        raise argparse.ArgumentTypeError("--sizes takes one or more sizes between 1 and 200")
    return sorted(set(sizes))


def bounded(flag: str, most: int):
    def parse(text: str) -> int:
        if not text.isdigit() or not 1 <= int(text) <= most:
            raise argparse.ArgumentTypeError(f"{flag} takes a whole number from 1 to {most}, not {text!r}")
        return int(text)
    return parse


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=bounded("--runs", 20), default=5, metavar="N",
                        help="part 1: runs of each side (the median is judged), 1 to 20")
    parser.add_argument("--sizes", type=sizes_arg, default=[10, 25, 50],
                        help="part 2: environments rehearsed in parallel, e.g. 10,25,50")
    parser.add_argument("--workers", type=bounded("--workers", 64), default=8, metavar="N",
                        help="part 2: rehearsals running at once, 1 to 64")
    args = parser.parse_args()
    require_engine("rehearsal overhead bench")
    version = subprocess.run(["pulumi", "version"], capture_output=True, text=True).stdout.strip()
    load_start, began = load(), time.perf_counter()

    from bootstrap.aws.emulator import running_emulator

    with running_emulator() as endpoint, tempfile.TemporaryDirectory(prefix="rehearsal-overhead-") as tmp:
        g, b, ph, g_cpu, b_cpu = part1(Path(tmp) / "one", endpoint, args.runs)
        print(f"part 1 done in {time.perf_counter() - began:.0f} s", file=sys.stderr)
        rows = part2(Path(tmp) / "many", endpoint, args.sizes, args.workers)
    load_end = load()

    print(f"rehearsal overhead bench: Pulumi {version}, the network stand-in (5 dynamic resources), DIY S3 backend "
          f"on the emulator, passphrase secrets; {time.perf_counter() - began:.0f} s")
    print(f"    load average (1 min) at start {load_start}; at end {load_end}")
    gm, bm = statistics.median(g), statistics.median(b)
    ratio = gm / bm
    misses = ratio > OVERHEAD_TARGET
    print(f"{verdict(ratio <= OVERHEAD_TARGET)} rehearsal overhead: groundctl state rehearse --layers {LAYER} "
          f"{gm:.2f} s vs pulumi preview --refresh --expect-no-changes (same scratch stack) {bm:.2f} s = "
          f"{ratio:.2f}x (target <= {OVERHEAD_TARGET}x); medians of {args.runs}; runs g {fmt(g)} / bare {fmt(b)}")
    print("    groundctl in-process (its interpreter start-up not counted; see bench/startup.py)")
    gc, bc = statistics.median(g_cpu), statistics.median(b_cpu)
    print(f"    CPU seconds: the rehearsal {gc:.2f} vs the bare preview {bc:.2f} = {gc / bc:.2f}x (for information)")
    names = sorted({k for run in ph for k in run})
    medians = {k: statistics.median([run.get(k, 0.0) for run in ph]) for k in names}
    print(f"    where the rehearsal's {gm:.2f} s go (median per phase, its record): "
          + ", ".join(f"{k} {v:.2f}" for k, v in medians.items())
          + f"; outside any phase {gm - sum(medians.values()):.2f}")

    print(f"parallel rehearsals ({args.workers} at a time, each its own process):")
    for n, wall, each in rows:
        print(f"    {n} environments: {wall:.2f} s wall, {wall / n:.2f} s per stack; one rehearsal median "
              f"{statistics.median(each):.2f} s (min {min(each):.2f}, max {max(each):.2f})")
    (small, small_wall, _), (large, large_wall, _) = rows[0], rows[-1]
    scale = (large_wall / large) / (small_wall / small)
    misses += scale > SCALE_TARGET
    print(f"{verdict(scale <= SCALE_TARGET)} parallel scaling: per stack at {large} {large_wall / large:.2f} s vs at "
          f"{small} {small_wall / small:.2f} s = {scale:.2f}x (target <= {SCALE_TARGET}x)")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
