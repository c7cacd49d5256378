"""A GitHub Actions runner, as far as groundctl's generated workflows need one, for the journey tests: it reads a
workflow file and runs its jobs in order (`needs`, `if`, a matrix from `fromJSON`), each step as the runner does:
a `run:` script with bash (`--noprofile --norc -eo pipefail`) in the job's workspace, its `${{ }}` expressions
filled in, the workflow's, job's and step's `env` as declared, GITHUB_OUTPUT, GITHUB_PATH and GITHUB_STEP_SUMMARY
files; a `uses:` step replaced by a handler the test gives for that action (what the action provides, nothing more).
An action without a handler fails its step: the journey then fails where a real runner would differ."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>&&|\|\||==|!=|!|\(|\)|,)"
                    r"|(?P<num>\d+)|(?P<name>[A-Za-z_][\w-]*(?:\.[\w-]+|\.\*)*))")
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class Context(dict):
    """A GitHub expression context: a missing property is null, which reads as ''."""

    def path(self, dotted: str) -> Any:
        value: Any = self
        for part in dotted.split("."):
            value = value.get(part, "") if isinstance(value, Mapping) else ""
        return value


def evaluate(expression: str, ctx: Context, status: Mapping[str, bool]) -> Any:
    """One `${{ }}` expression's value: GitHub's operators and literals, the status functions from `status`."""
    python, pos = [], 0
    while pos < len(expression.rstrip()):
        m = _TOKEN.match(expression, pos)
        if not m:
            raise ValueError(f"cannot read the expression {expression!r} at {pos}")
        pos = m.end()
        if m["str"] is not None:
            python.append(repr(m["str"][1:-1].replace("''", "'")))
        elif m["op"] is not None:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(m["op"], m["op"]))
        elif m["num"] is not None:
            python.append(m["num"])
        elif expression[pos:].lstrip().startswith("("):
            python.append(f"_fn[{m['name']!r}]")
        else:
            python.append({"true": "True", "false": "False", "null": "''"}.get(m["name"], f"_ctx.path({m['name']!r})"))
    functions = {"fromJSON": json.loads, "toJSON": json.dumps, **{k: (lambda v=v: v) for k, v in status.items()}}
    return eval("".join(python), {"__builtins__": {}}, {"_ctx": ctx, "_fn": functions})  # noqa: S307 (test data)


def fill(text: Any, ctx: Context, status: Mapping[str, bool]) -> Any:
    """A workflow value with its expressions filled in: a value that is one whole expression keeps its type."""
    if not isinstance(text, str):
        return text
    whole = _EXPR.fullmatch(text.strip())
    if whole and "}}" not in whole.group(1):
        return evaluate(whole.group(1), ctx, status)

    def show(m: re.Match) -> str:
        value = evaluate(m.group(1), ctx, status)
        return {True: "true", False: "false"}.get(value, value) if isinstance(value, bool) else str(value)

    return _EXPR.sub(show, text)


def condition(text: Any, ctx: Context, status: Mapping[str, bool]) -> bool:
    """An `if:` (with or without `${{ }}`); without any status function in it, `success() && …` as GitHub reads it."""
    if text is None:
        return status["success"]
    if isinstance(text, bool):
        return text
    inner = text.strip()
    m = _EXPR.fullmatch(inner)
    inner = m.group(1) if m else inner
    value = evaluate(inner, ctx, status)
    if not re.search(r"\b(always|cancelled|success|failure)\(", inner):
        return bool(value) and status["success"]
    return bool(value)


@dataclass
class Step:
    job: str
    name: str
    outcome: str  # success, failure, skipped
    returncode: Optional[int] = None
    stdout: str = ""
    stderr: str = ""


@dataclass
class Job:
    job_id: str
    matrix: dict
    result: str
    outputs: dict
    steps: list[Step]
    workspace: Path
    summary: str = ""


@dataclass
class Runner:
    """One workflow run. `actions`: action name (owner/repo) → handler(with, job) returning what it provides:
    {"env": {...}, "path": [folders to put first on PATH], "outputs": {...}}. Each job gets a fresh folder
    under `folder` (its workspace and home); `base_env` is the runner image's environment (PATH of its tools)."""

    workflow: dict
    github: dict
    secrets: dict
    actions: Mapping[str, Callable[[dict, "JobState"], dict]]
    folder: Path
    base_env: dict
    jobs: dict[str, list[Job]] = field(default_factory=dict)

    def run(self) -> dict[str, list[Job]]:
        for job_id, job in self.workflow["jobs"].items():
            self.jobs[job_id] = self._run_job(job_id, job)
        return self.jobs

    def result(self, job_id: str) -> str:
        runs = self.jobs[job_id]
        results = {j.result for j in runs}
        return "failure" if "failure" in results else "success" if "success" in results else "skipped"

    def _needs(self, job: dict) -> Context:
        names = job.get("needs") or []
        names = [names] if isinstance(names, str) else names
        return Context({n: {"result": self.result(n), "outputs": self.jobs[n][0].outputs if self.jobs[n] else {}}
                        for n in names})

    def _run_job(self, job_id: str, job: dict) -> list[Job]:
        needs = self._needs(job)
        ctx = Context(github=self.github, secrets=self.secrets, needs=needs, env=self.workflow.get("env") or {})
        ok = all(n["result"] == "success" for n in needs.values())
        status = {"success": ok, "failure": not ok, "always": True, "cancelled": False}
        if not condition(job.get("if"), ctx, status):
            return [Job(job_id, {}, "skipped", {}, [], self.folder)]
        matrix = fill((job.get("strategy") or {}).get("matrix"), ctx, status) or {}
        entries = matrix.get("include") or [{}]
        return [JobState(self, job_id, job, Context({**ctx, "matrix": entry}), i).run() for i, entry in
                enumerate(entries)]


@dataclass
class JobState:
    runner: Runner
    job_id: str
    job: dict
    ctx: Context
    index: int
    env: dict = field(default_factory=dict)  # what actions added (GITHUB_ENV's role)
    path: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.folder = self.runner.folder / f"{self.job_id}-{self.index}"
        self.workspace = self.folder / "workspace"
        self.workspace.mkdir(parents=True)
        self.summary = self.folder / "step-summary.md"
        self.summary.touch()

    def run(self) -> Job:
        steps_ctx: dict = {}
        self.ctx["steps"] = steps_ctx
        done: list[Step] = []
        failed = False
        status = lambda: {"success": not failed, "failure": failed, "always": True, "cancelled": False}  # noqa
        self.ctx["env"] = {**self.ctx["env"], **{k: str(fill(v, self.ctx, status()))
                                                 for k, v in (self.job.get("env") or {}).items()}}
        for i, step in enumerate(self.job["steps"]):
            name = step.get("name") or step.get("uses") or f"step {i}"
            if not condition(step.get("if"), self.ctx, status()):
                done.append(Step(self.job_id, name, "skipped"))
                steps_ctx[step.get("id", f"_{i}")] = {"outcome": "skipped", "conclusion": "skipped", "outputs": {}}
                continue
            result, outputs = self._step(step, name, i)
            done.append(result)
            conclusion = "success" if result.outcome == "success" or step.get("continue-on-error") else "failure"
            steps_ctx[step.get("id", f"_{i}")] = {"outcome": result.outcome, "conclusion": conclusion,
                                                  "outputs": outputs}
            failed = failed or conclusion == "failure"
        outputs = {k: str(fill(v, self.ctx, status())) for k, v in (self.job.get("outputs") or {}).items()}
        return Job(self.job_id, dict(self.ctx["matrix"]), "failure" if failed else "success", outputs, done,
                   self.workspace, self.summary.read_text())

    def _step_env(self, step: dict, i: int) -> tuple[dict, Path]:
        status = {"success": True, "failure": False, "always": True, "cancelled": False}
        declared = {**self.ctx["env"],
                    **{k: str(fill(v, self.ctx, status)) for k, v in (step.get("env") or {}).items()}}
        output = self.folder / f"output-{i}"
        output.touch()
        github = self.runner.github
        env = {**self.runner.base_env, **self.env, **declared,
               "CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(self.workspace),
               "GITHUB_SHA": github["sha"], "GITHUB_REPOSITORY": github["repository"],
               "GITHUB_RUN_ID": str(github["run_id"]), "GITHUB_EVENT_NAME": github["event_name"],
               "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(self.summary),
               "GITHUB_PATH": str(self.folder / f"path-{i}"),
               "RUNNER_TEMP": str(self.folder / "runner-temp"),
               # A runner's home is fresh for every job, and Pulumi's home (~/.pulumi) is in it, empty.
               "HOME": str(self.folder / "home"), "PULUMI_HOME": str(self.folder / "home" / ".pulumi")}
        env["PATH"] = ":".join([*reversed(self.path), self.runner.base_env["PATH"]])
        (self.folder / "runner-temp").mkdir(exist_ok=True)
        (self.folder / "home").mkdir(exist_ok=True)
        return env, output

    def _step(self, step: dict, name: str, i: int) -> tuple[Step, dict]:
        status = {"success": True, "failure": False, "always": True, "cancelled": False}
        if "uses" in step:
            action = step["uses"].split("@", 1)[0]
            handler = self.runner.actions.get(action)
            if handler is None:
                return Step(self.job_id, name, "failure", stderr=f"no stand-in for the action {action}"), {}
            given = {k: fill(v, self.ctx, status) for k, v in (step.get("with") or {}).items()}
            try:
                provided = handler(given, self) or {}
            except (OSError, ValueError, subprocess.SubprocessError, AssertionError) as exc:
                return Step(self.job_id, name, "failure", stderr=f"{action}: {exc}"), {}
            self.env.update(provided.get("env") or {})
            self.path.extend(provided.get("path") or [])
            return Step(self.job_id, name, "success"), provided.get("outputs") or {}
        env, output = self._step_env(step, i)
        script = fill(step["run"], self.ctx, status)
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=self.workspace,
                              env=env, capture_output=True, text=True, timeout=1800)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        added = self.folder / f"path-{i}"
        if added.exists():  # GITHUB_PATH: each line is put in front of PATH for the job's later steps
            self.path.extend(line for line in added.read_text().splitlines() if line.strip())
        return Step(self.job_id, name, "success" if done.returncode == 0 else "failure", done.returncode,
                    done.stdout, done.stderr), outputs
