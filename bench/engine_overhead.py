"""Benchmark: what groundctl costs over bare Pulumi, side by side. PASS/MISS per pair, exit 1 on a MISS.

    python bench/engine_overhead.py              # medians of 3 runs of each command
    python bench/engine_overhead.py --runs 5 --subprocess

On the engine tier's set-up (tests/engine_programs: the network stand-in, 5 dynamic resources; the product's
DIY S3 backend in the spec's bucket on the emulator; passphrase secrets; a private PULUMI_HOME; no plugin
acquisition), one layer, one stack, in one run:

    groundctl up --yes (no-op)          vs  pulumi up --yes (no-op)
    groundctl up --yes (one change)     vs  pulumi preview --save-plan F, then pulumi up --plan F --yes
                                            (Pulumi's own reviewed flow, two processes, as groundctl's gate:
                                            the same change, network:cidr flipped)
                                        and pulumi up --yes (the same change, ungated: printed, not judged)
    groundctl plan                      vs  pulumi preview --save-plan F (groundctl's plan saves Pulumi's plan for
                                            `up --plan-dir` too) and pulumi preview (printed, not judged)
    groundctl drift                     vs  pulumi preview --refresh --expect-no-changes

groundctl is called in-process through its typer front door, as issue 29's table did: the figure is the
orchestration's cost (its Pulumi commands, selects, config, state reads, records), not the interpreter's
start-up, which bench/startup.py measures on its own. `--subprocess` also times each groundctl command as a
child process (`python tests/engine_programs/groundctl_main.py ...`), what an operator waits for. Bare Pulumi
is always a child process (the CLI). The pairs alternate (groundctl, bare, groundctl, bare ...) so that both
sides see the same load on a shared machine. Bare Pulumi runs the same program with the same environment
(workspace_settings), the same project file (run_project) and the stack's config as groundctl sets it.

Targets (issue 38 §2): the reviewed change <= 1.05x Pulumi's reviewed flow; the others <= 1.10x (the rehearsal
against its bare preview is bench/rehearsal_overhead.py's). The breakdown per phase comes from the run records
groundctl writes to the state bucket (.groundctl/runs/<env>/): the median seconds of each phase over the runs.
`plan` and `drift` keep theirs in memory (bootstrap/apply/preview.py: their preflight phases and each layer's
preview), which the bench keeps too; the commands print them and put them in --json.
Needs the Pulumi CLI on PATH (`pulumi`, `pulumi-language-python`, `pulumi-resource-pulumi-python`);
without it the bench says so and exits 2 (bench/prerequisites.py). It builds and downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

TARGET = 1.10
GATED_TARGET = 1.05  # groundctl's gated up against Pulumi's own reviewed flow: the same two processes
LAYER = "network"
CIDRS = ("10.10.0.0/16", "10.11.0.0/16")
TIMEOUT = 900  # seconds for one bare Pulumi command, generous for a loaded machine


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} (5 min {five:.2f}, 15 min {fifteen:.2f}) on {os.cpu_count()} CPUs"


class Bench:
    """One engine-tier environment with its network layer up, and the bare Pulumi folder beside it."""

    def __init__(self, tmp: Path, endpoint: str):
        import yaml

        from bootstrap.engine.rundir import run_project
        from bootstrap.engine.workspace import workspace_settings
        from bootstrap.spec import load_spec
        from tests.engine_programs.tier import install_stacks_dir, make_tier

        self.tier = make_tier(tmp, endpoint, lambda d: d["network"].update(cidr=CIDRS[0]))
        os.environ.update(self.tier.env)
        os.environ.pop("GROUNDCTL_ENDPOINT_URL", None)
        install_stacks_dir(self.tier.stacks)
        self.cidr = CIDRS[0]
        self.plans = tmp / "plans"
        self._preview_logs: list = []
        self._keep_preview_logs()
        code, out, err = self.tier.cli("up", "SPEC", "--layers", LAYER, "--yes")
        if code != 0:
            raise SystemExit(f"set-up: groundctl up exited {code}:\n{err[-2000:]}{out[-2000:]}")

        spec = load_spec(str(self.tier.spec_path))
        spec = spec.model_copy(update={"aws": spec.aws.model_copy(update={"endpoint_url": endpoint})})
        settings = workspace_settings(spec, endpoint_url=endpoint, environ=os.environ)
        self.bare_env = {**os.environ, **settings.env}
        self.stack = spec.name
        self.bare_dir = tmp / "bare" / LAYER
        self.bare_dir.mkdir(parents=True)
        program = self.tier.stacks / LAYER
        project = yaml.safe_load((program / "Pulumi.yaml").read_text())
        (self.bare_dir / "Pulumi.yaml").write_text(yaml.safe_dump(run_project(project, program), sort_keys=False))
        config = self.tier.engine()._layer_config(LAYER)
        if any(v.secret for v in config.values()):
            raise SystemExit("set-up: the network layer has a secret config value; the bare side cannot copy it")
        self.config = {k: v.value for k, v in config.items()}
        # The lineage groundctl's run sets (from its ledger): the one the stack's outputs already carry.
        root = next(r for r in self.tier.checkpoint(LAYER)["checkpoint"]["latest"]["resources"]
                    if r["type"] == "pulumi:pulumi:Stack")
        self.config["groundctl:lineage"] = root["outputs"]["groundctl_lineage"]
        self._write_bare_config()

    def _keep_preview_logs(self) -> None:
        import bootstrap.apply.preview as preview

        start_run = preview.start_run

        def keep(*args, **kwargs):
            log = start_run(*args, **kwargs)
            self._preview_logs.append(log)
            return log
        preview.start_run = keep

    def preview_record(self) -> dict | None:
        """The in-memory run record of the `plan` or `drift` just run, if it kept one."""
        record = self._preview_logs[-1].record.to_dict() if self._preview_logs else None
        self._preview_logs.clear()
        return record

    def _write_bare_config(self) -> None:
        import yaml

        self.config["network:cidr"] = self.cidr
        (self.bare_dir / f"Pulumi.{self.stack}.yaml").write_text(
            yaml.safe_dump({"secretsprovider": "passphrase", "config": self.config}))

    def flip(self) -> None:
        """The one change: network:cidr to the other value, for both sides (the spec and the stack config)."""
        import yaml

        self.cidr = CIDRS[1] if self.cidr == CIDRS[0] else CIDRS[0]
        data = yaml.safe_load(self.tier.spec_path.read_text())
        data["network"]["cidr"] = self.cidr
        self.tier.spec_path.write_text(yaml.safe_dump(data))
        self._write_bare_config()

    # -- the two sides --------------------------------------------------------------------------------

    def groundctl_args(self, work: str) -> list[str]:
        return {
            "up": ["up", "SPEC", "--layers", LAYER, "--yes"],
            "plan": ["plan", "SPEC", "--layers", LAYER, "--out", str(self.plans)],
            "drift": ["drift", "SPEC", "--layers", LAYER],
        }[work]

    def groundctl(self, work: str, subprocess_: bool = False) -> float:
        args = self.groundctl_args(work)
        t0 = time.perf_counter()
        if subprocess_:
            proc = self.tier.spawn(*args)
            out, err = proc.communicate(timeout=TIMEOUT)
            code = proc.returncode
        else:
            code, out, err = self.tier.cli(*args)
        seconds = time.perf_counter() - t0
        if code != 0:
            raise SystemExit(f"groundctl {' '.join(args)} exited {code}:\n{err[-2000:]}{out[-2000:]}")
        return seconds

    def bare(self, work: str) -> float:
        plan = str(self.bare_dir / "saved-plan.json")
        if work == "reviewed":
            seconds = self._pulumi(["preview", "--save-plan", plan])
            return seconds + self._pulumi(["up", "--yes", "--plan", plan])
        return self._pulumi({
            "up": ["up", "--yes"],
            "plan": ["preview", "--save-plan", plan],
            "preview": ["preview"],
            "drift": ["preview", "--refresh", "--expect-no-changes"],
        }[work])

    def _pulumi(self, args: list[str]) -> float:
        argv = ["pulumi", *args, "--stack", self.stack, "--non-interactive", "--color", "never"]
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=self.bare_dir, env=self.bare_env, capture_output=True, text=True,
                              timeout=TIMEOUT)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}{proc.stdout[-2000:]}")
        return seconds

    # -- where groundctl's time goes ------------------------------------------------------------------

    def newest_record(self, after: set[str]) -> tuple[set[str], dict | None]:
        """Keys of every run record now, and the record written since `after` (None if none was)."""
        prefix = f".groundctl/runs/{self.stack}/"
        keys = set(self.tier.keys(prefix))
        new = sorted(keys - after)
        if not new:
            return keys, None
        body = self.tier.s3.get_object(Bucket=self.tier.state_bucket, Key=new[-1])["Body"].read()
        return keys, json.loads(body)


def phases(record: dict | None) -> dict[str, float]:
    from bootstrap.apply.preview import phase_seconds

    return phase_seconds(record) if record else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each command (the median is judged)")
    parser.add_argument("--subprocess", action="store_true",
                        help="also time each groundctl command as a child process")
    args = parser.parse_args()
    from bench.prerequisites import require_engine

    require_engine("engine overhead bench")
    version = subprocess.run(["pulumi", "version"], capture_output=True, text=True).stdout.strip()
    load_start, began = load(), time.perf_counter()

    from bootstrap.aws.emulator import running_emulator

    with running_emulator() as endpoint, tempfile.TemporaryDirectory(prefix="engine-overhead-") as tmp:
        bench = Bench(Path(tmp), endpoint)
        rows = measure(bench, args.runs, args.subprocess)
    load_end = load()

    print(f"engine overhead bench: Pulumi {version}, the network stand-in (5 dynamic resources), DIY S3 backend "
          f"on the emulator, passphrase secrets; medians of {args.runs}; {time.perf_counter() - began:.0f} s")
    print(f"    load average (1 min) at start {load_start}; at end {load_end}")
    print("    groundctl in-process (its interpreter start-up not counted; see bench/startup.py)"
          + ("; [sub] = groundctl as a child process" if args.subprocess else ""))
    misses = 0
    for name, bare_name, g, b, sub, phase_runs, target in rows:
        gm, bm = statistics.median(g), statistics.median(b)
        ratio = gm / bm
        judged = target is not None
        misses += judged and ratio > target
        print(f"{verdict(ratio <= target) if judged else 'INFO'} {name}: groundctl {gm:.2f} s vs {bare_name} "
              f"{bm:.2f} s = {ratio:.2f}x " + (f"(target <= {target}x)" if judged else "(for information, no target)")
              + f"; runs g {fmt(g)} / bare {fmt(b)}")
        if sub:
            sm = statistics.median(sub)
            print(f"    [sub] groundctl as a child process {sm:.2f} s = {sm / bm:.2f}x; runs {fmt(sub)} "
                  "(not judged: the start-up has its own bench)")
        if judged:
            print(f"    where groundctl's {gm:.2f} s go (median per phase, run records): {breakdown(phase_runs, gm)}")
    return 1 if misses else 0


def fmt(xs: list[float]) -> str:
    return " ".join(f"{x:.2f}" for x in xs)


def breakdown(phase_runs: list[dict[str, float]], total: float) -> str:
    if not any(phase_runs):
        return "no run record was written"
    by = defaultdict(list)
    for run in phase_runs:
        for k, v in run.items():
            by[k].append(v)
    medians = {k: statistics.median(v) for k, v in by.items()}
    parts = [f"{k} {v:.2f}" for k, v in medians.items()]
    rest = total - sum(medians.values())
    return ", ".join(parts) + f"; outside any phase {rest:.2f}"


def measure(bench: Bench, runs: int, with_subprocess: bool) -> list:
    rows = []
    rows.append(pair(bench, runs, with_subprocess, "no-op up", "pulumi up --yes (no-op)", "up") + (TARGET,))
    rows += reviewed(bench, runs, with_subprocess)
    plan = pair(bench, runs, with_subprocess, "plan", "pulumi preview --save-plan", "plan", extra="preview")
    rows += [plan[:-1] + (TARGET,), ("plan (against a preview that saves no plan)", "pulumi preview", plan[2],
                                     plan[-1], [], plan[5], None)]
    rows.append(pair(bench, runs, with_subprocess, "drift", "pulumi preview --refresh --expect-no-changes", "drift")
                + (TARGET,))
    return rows


def pair(bench: Bench, runs: int, with_subprocess: bool, name: str, bare_name: str, work: str,
         extra: str | None = None) -> tuple:
    """Runs alternating groundctl and bare; `extra`: another bare command timed beside them (last in the tuple)."""
    g, b, sub, phase_runs, more = [], [], [], [], []
    keys, _ = bench.newest_record(set())
    for _ in range(runs):
        g.append(bench.groundctl(work))
        keys, record = bench.newest_record(keys)
        phase_runs.append(phases(record or bench.preview_record()))
        b.append(bench.bare(work))
        if extra:
            more.append(bench.bare(extra))
        if with_subprocess:
            sub.append(bench.groundctl(work, subprocess_=True))
            keys, _ = bench.newest_record(keys)
            bench.preview_record()
    return (name, bare_name, g, b, sub, phase_runs) + ((more,) if extra else ())


def reviewed(bench: Bench, runs: int, with_subprocess: bool) -> list:
    """groundctl's gated up of one change against Pulumi's reviewed flow (judged) and its ungated up (not):
    every command is a change, each flipping the CIDR back for the next."""
    g, reviewed_b, ungated_b, sub, phase_runs = [], [], [], [], []
    keys, _ = bench.newest_record(set())
    for _ in range(runs):
        bench.flip()
        g.append(bench.groundctl("up"))
        keys, record = bench.newest_record(keys)
        phase_runs.append(phases(record))
        bench.flip()
        reviewed_b.append(bench.bare("reviewed"))
        bench.flip()
        ungated_b.append(bench.bare("up"))
        if with_subprocess:
            bench.flip()
            sub.append(bench.groundctl("up", subprocess_=True))
            keys, _ = bench.newest_record(keys)
    return [("up with one change (reviewed)", "pulumi preview --save-plan + pulumi up --plan (one change)", g,
             reviewed_b, sub, phase_runs, GATED_TARGET),
            ("up with one change (ungated)", "pulumi up --yes (one change)", g, ungated_b, [], phase_runs, None)]


if __name__ == "__main__":
    sys.exit(main())
