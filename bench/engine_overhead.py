"""Benchmark: what groundctl costs over bare Pulumi, side by side. PASS/MISS per pair, exit 1 on a MISS.

    python bench/engine_overhead.py              # medians of 5 runs of each command
    python bench/engine_overhead.py --runs 9 --subprocess

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
is always a child process (the CLI). The pairs interleave, each run in the other order than the one before
(groundctl, bare; bare, groundctl; ...), so that both sides see the same load, and the same drift of it, on a
shared machine. Bare Pulumi runs the same program with the same environment
(workspace_settings), the same project file (run_project) and the stack's config as groundctl sets it.

Targets (issue 38 §2): the reviewed change <= 1.05x Pulumi's reviewed flow; the others <= 1.10x (the rehearsal
against its bare preview is bench/rehearsal_overhead.py's). The breakdown per phase comes from the run records
groundctl writes to the state bucket (.groundctl/runs/<env>/): the median seconds of each phase over the runs.
`plan` and `drift` keep theirs in memory (bootstrap/apply/preview.py: their preflight phases and each layer's
preview), which the bench keeps too; the commands print them and put them in --json.

Beside each judged ratio, two figures that a loaded machine disturbs less: groundctl's own seconds (its wall time
outside the Pulumi processes it ran, which it times as it starts and reaps them) against its Pulumi processes'
seconds; and the CPU seconds of each side (this process's and its reaped children's, Pulumi's plugins included,
and the in-process emulator serving either side), as a ratio printed for information.
Needs the Pulumi CLI on PATH (`pulumi`, `pulumi-language-python`, `pulumi-resource-pulumi-python`);
without it the bench says so and exits 2 (bench/prerequisites.py). It builds and downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
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
        self.pulumi_seconds = 0.0  # the wall time of every Pulumi process groundctl ran in this process
        self._time_pulumi_processes()
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

    def _time_pulumi_processes(self) -> None:
        from bootstrap.engine import children

        run = children.run

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return run(*args, **kwargs)
            finally:
                self.pulumi_seconds += time.perf_counter() - t0
        children.run = timed

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

    def groundctl(self, work: str, subprocess_: bool = False) -> "Sample":
        args = self.groundctl_args(work)
        cpu, pulumi_before = cpu_seconds(), self.pulumi_seconds
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
        return Sample(seconds, cpu_seconds() - cpu, None if subprocess_ else self.pulumi_seconds - pulumi_before)

    def bare(self, work: str) -> "Sample":
        cpu = cpu_seconds()
        t0 = time.perf_counter()
        self._bare(work)
        seconds = time.perf_counter() - t0
        return Sample(seconds, cpu_seconds() - cpu, seconds)

    def _bare(self, work: str) -> None:
        plan = str(self.bare_dir / "saved-plan.json")
        if work == "reviewed":
            self._pulumi(["preview", "--save-plan", plan])
            self._pulumi(["up", "--yes", "--plan", plan])
            return
        self._pulumi({
            "up": ["up", "--yes"],
            "plan": ["preview", "--save-plan", plan],
            "preview": ["preview"],
            "drift": ["preview", "--refresh", "--expect-no-changes"],
        }[work])

    def _pulumi(self, args: list[str]) -> None:
        argv = ["pulumi", *args, "--stack", self.stack, "--non-interactive", "--color", "never"]
        proc = subprocess.run(argv, cwd=self.bare_dir, env=self.bare_env, capture_output=True, text=True,
                              timeout=TIMEOUT)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}{proc.stdout[-2000:]}")

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


@dataclass(frozen=True)
class Sample:
    """One timed command: its wall seconds, its CPU seconds (this process's and its reaped children's), and the
    seconds of the Pulumi processes it ran (None where they cannot be timed: groundctl as a child process)."""

    seconds: float
    cpu: float
    pulumi: float | None


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def phases(record: dict | None) -> dict[str, float]:
    from bootstrap.apply.preview import phase_seconds

    return phase_seconds(record) if record else {}


@dataclass
class Row:
    name: str
    bare_name: str
    g: list[Sample]
    b: list[Sample]
    sub: list[Sample] = field(default_factory=list)
    phase_runs: list[dict[str, float]] = field(default_factory=list)
    target: float | None = TARGET
    load: str = ""

    @property
    def ratio(self) -> float:
        return median(self.g) / median(self.b)

    @property
    def missed(self) -> bool:
        return self.target is not None and self.ratio > self.target


def median(samples: list[Sample], what: str = "seconds") -> float:
    return statistics.median(getattr(s, what) for s in samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (the median is judged), >= 1")
    parser.add_argument("--subprocess", action="store_true",
                        help="also time each groundctl command as a child process")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs takes a whole number of at least 1 (5 or more for a figure worth judging)")
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
          f"on the emulator, passphrase secrets; medians of {args.runs}, the sides interleaved; "
          f"{time.perf_counter() - began:.0f} s")
    print(f"    load average (1 min) at start {load_start}; at end {load_end}")
    print("    groundctl in-process (its interpreter start-up not counted; see bench/startup.py)"
          + ("; [sub] = groundctl as a child process" if args.subprocess else ""))
    for row in rows:
        report(row)
    return 1 if any(row.missed for row in rows) else 0


def report(row: Row) -> None:
    gm, bm, judged = median(row.g), median(row.b), row.target is not None
    print(f"{verdict(not row.missed) if judged else 'INFO'} {row.name}: groundctl {gm:.2f} s vs {row.bare_name} "
          f"{bm:.2f} s = {row.ratio:.2f}x " + (f"(target <= {row.target}x)" if judged else "(for information, no target)")
          + f"; runs g {fmt([s.seconds for s in row.g])} / bare {fmt([s.seconds for s in row.b])}; load at its "
          f"start {row.load}")
    if row.sub:
        sm = median(row.sub)
        print(f"    [sub] groundctl as a child process {sm:.2f} s = {sm / bm:.2f}x; runs {fmt([s.seconds for s in row.sub])} "
              "(not judged: the start-up has its own bench)")
    if not judged:
        return
    own = [s.seconds - s.pulumi for s in row.g if s.pulumi is not None]
    inside = median(row.g, "pulumi")
    print(f"    groundctl's own seconds (outside its Pulumi processes) {statistics.median(own):.2f} (runs {fmt(own)}); its "
          f"Pulumi processes {inside:.2f} s = {inside / bm:.2f}x the bare side's; CPU seconds groundctl "
          f"{median(row.g, 'cpu'):.2f} vs bare {median(row.b, 'cpu'):.2f} = "
          f"{median(row.g, 'cpu') / median(row.b, 'cpu'):.2f}x (for information)")
    print(f"    where groundctl's {gm:.2f} s go (median per phase, run records): {breakdown(row.phase_runs, gm)}")


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


def measure(bench: Bench, runs: int, with_subprocess: bool) -> list[Row]:
    rows = [pair(bench, runs, with_subprocess, "no-op up", "pulumi up --yes (no-op)", "up")]
    rows += reviewed(bench, runs, with_subprocess)
    plan, plain = pair(bench, runs, with_subprocess, "plan", "pulumi preview --save-plan", "plan", extra="preview")
    rows += [plan, Row("plan (against a preview that saves no plan)", "pulumi preview", plan.g, plain,
                       phase_runs=plan.phase_runs, target=None, load=plan.load)]
    rows.append(pair(bench, runs, with_subprocess, "drift", "pulumi preview --refresh --expect-no-changes", "drift"))
    return rows


def interleaved(i: int, sides: list) -> list:
    """The sides of run `i` in turn, each run starting one further along: every side leads as often."""
    k = i % len(sides)
    return sides[k:] + sides[:k]


def pair(bench: Bench, runs: int, with_subprocess: bool, name: str, bare_name: str, work: str,
         extra: str | None = None):
    """Runs of groundctl and bare interleaved; with `extra` (another bare command timed beside them) also its
    samples: (row, extra samples)."""
    row, more = Row(name, bare_name, [], [], load=load()), []
    keys = [bench.newest_record(set())[0]]

    def groundctl(sub: bool = False) -> None:
        sample = bench.groundctl(work, subprocess_=sub)
        keys[0], record = bench.newest_record(keys[0])
        record = record or bench.preview_record()
        (row.sub if sub else row.g).append(sample)
        if not sub:
            row.phase_runs.append(phases(record))

    sides = [groundctl, lambda: row.b.append(bench.bare(work))]
    if extra:
        sides.append(lambda: more.append(bench.bare(extra)))
    if with_subprocess:
        sides.append(lambda: groundctl(sub=True))
    for i in range(runs):
        for side in interleaved(i, sides):
            side()
    return (row, more) if extra else row


def reviewed(bench: Bench, runs: int, with_subprocess: bool) -> list[Row]:
    """groundctl's gated up of one change against Pulumi's reviewed flow (judged) and its ungated up (not):
    every command is a change, each flipping the CIDR back for the next."""
    gated = Row("up with one change (reviewed)", "pulumi preview --save-plan + pulumi up --plan (one change)", [], [],
                target=GATED_TARGET, load=load())
    ungated = Row("up with one change (ungated)", "pulumi up --yes (one change)", gated.g, [],
                  phase_runs=gated.phase_runs, target=None, load=gated.load)
    keys = [bench.newest_record(set())[0]]

    def groundctl(sub: bool = False) -> None:
        bench.flip()
        sample = bench.groundctl("up", subprocess_=sub)
        keys[0], record = bench.newest_record(keys[0])
        (gated.sub if sub else gated.g).append(sample)
        if not sub:
            gated.phase_runs.append(phases(record))

    def bare(row: Row, work: str) -> None:
        bench.flip()
        row.b.append(bench.bare(work))

    sides = [groundctl, lambda: bare(gated, "reviewed"), lambda: bare(ungated, "up")]
    if with_subprocess:
        sides.append(lambda: groundctl(sub=True))
    for i in range(runs):
        for side in interleaved(i, sides):
            side()
    return [gated, ungated]


if __name__ == "__main__":
    sys.exit(main())
