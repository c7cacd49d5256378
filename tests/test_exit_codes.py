"""The exit-code contract (issue 10 §4), kept by every command: 0 ok, 1 a check failed, 2 bad input,
3 refused, 4 the cloud or engine could not be used. A dry run exits with the code the real run would
have where it stops. Every case goes through the front door (`groundctl.main`), so its mapping of outcomes to
exit codes is what is tested: most of them in this process (tests/inprocess.py), which spares a process start-up
per case. The refused-connection class mostly waits out the call deadline: a quarter of its cases run as real
processes (`python -m groundctl`) side by side while the rest wait in this process. One real process per exit code
pins the in-process runs to what a process gives (the same code, the same error paragraph, on stderr only), and a
closed stdout is a real process's.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import REPO
from tests.inprocess import run_main

# Every command that reaches the cloud, with `{env}` for the environment.
COMMANDS = [
    "plan {env}", "status {env}", "drift {env}", "up {env} --yes", "destroy {env} --yes",
    "lock status {env}", "lock break {env}", "state versions {env} network", "state verify {env} network",
    "recover {env} network --dry-run", "recover {env} network --yes",
    "drill state-loss {env} --layer network --dry-run", "drill state-loss {env} --layer network --yes",
    "drill rebuild-cluster {env} --dry-run", "drill rebuild-cluster {env} --yes", "drill history {env}",
]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GROUNDCTL_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE")}
    # The flux layer's SSH secrets are set, so that each class is the only thing wrong: without them, drift and
    # drills of dev refuse at their preflight before they reach the cloud (tests/test_flux_secrets_preflight.py).
    env.update(PULUMI_CONFIG_PASSPHRASE="exit-codes", AWS_CONFIG_FILE=os.devnull,
               AWS_SHARED_CREDENTIALS_FILE=os.devnull, AWS_EC2_METADATA_DISABLED="true",
               GROUNDCTL_CLOUD_DEADLINE="2", GROUNDCTL_FLUX_DEPLOY_KEY="exit-codes-key",
               GROUNDCTL_FLUX_KNOWN_HOSTS="git.example ssh-ed25519 AAAA", **extra)
    return env


def _run(args: list[str], env: dict, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groundctl", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


FAILURE_CLASSES = {
    # class: (environment, extra arguments, extra environment, expected code, words the message must hold)
    "no-credentials": ("dev", [], {}, 4, "no AWS credentials were found"),
    "unknown-environment": ("no-such-env", [], {}, 2, "no-such-env"),
    "unreachable-endpoint": ("local", ["--endpoint-url", f"http://127.0.0.1:{_closed_port()}"], {}, 4,
                             "could not be reached"),
}


# Run as real processes: every fourth case of the class that waits, and one case for each exit code.
IN_PROCESSES = "unreachable-endpoint"
REAL_EVERY = 4  # plan, destroy, state verify, drill state-loss --yes
SAMPLES = [("no-credentials", 1), ("unknown-environment", 0), ("specific", 3), ("specific", 7)]  # exit 4, 2, 3, 2


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> dict:
    """Every case's result, by class: the real processes on threads, side by side (eight: more start-ups at once
    only share the same two cores), while the in-process cases run one after another on this (the main) thread;
    and the real runs of the samples. Each runs in a folder holding the shipped environments/, which takes the
    drill reports the cases write."""
    work = tmp_path_factory.mktemp("exit-codes")
    (work / "environments").symlink_to(REPO / "environments")
    groups = {failure: [(command.format(env=environment).split() + args, _env(extra), work) for command in COMMANDS]
              for failure, (environment, args, extra, _, _) in FAILURE_CLASSES.items()}
    groups["specific"] = [(command.split(), _env({}), work) for command, _, _ in SPECIFIC]  # environments made first
    waiting = groups[IN_PROCESSES]
    with ThreadPoolExecutor(8) as pool:
        spawned = {i: pool.submit(_run, *case) for i, case in enumerate(waiting) if i % REAL_EVERY == 0}
        samples = {sample: pool.submit(_run, *groups[sample[0]][sample[1]]) for sample in SAMPLES}
        done = {group: [(case, run_main(*case)) for case in cases]
                for group, cases in groups.items() if group != IN_PROCESSES}
        here = {i: run_main(*case) for i, case in enumerate(waiting) if i not in spawned}
        done[IN_PROCESSES] = [(case, spawned[i].result() if i in spawned else here[i]) for i, case in enumerate(waiting)]
        done["samples"] = {sample: run.result() for sample, run in samples.items()}
    return done


@pytest.mark.timeout(600)
@pytest.mark.parametrize("failure", sorted(FAILURE_CLASSES))
def test_every_command_exits_with_the_code_of_its_failure_class(failure, matrix):
    code, words = FAILURE_CLASSES[failure][3:]
    wrong = []
    for (argv, _, _), proc in matrix[failure]:
        if proc.returncode != code or "Traceback" in proc.stderr or words not in proc.stdout + proc.stderr:
            wrong.append(f"{' '.join(argv)} → {proc.returncode}: {(proc.stderr or proc.stdout)[-300:]}")
    assert not wrong, "\n".join(wrong)


SPECIFIC = [
    # A typo'd layer is bad input in a dry run as in a real one.
    ("drill state-loss local --layer netwrk --dry-run", 2, "'netwrk' is not a layer"),
    ("drill state-loss local --layer netwrk --yes", 2, "'netwrk' is not a layer"),
    ("recover local netwrk --dry-run", 2, "'netwrk' is not a layer"),
    # A dry run that the real run would refuse exits as refused.
    ("drill rebuild-cluster prod --dry-run", 3, "--i-mean-production"),
    ("drill state-loss prod --layer network --dry-run", 3, "prod"),
    # Checks that need no cloud.
    ("spec check no-such-env", 2, "no-such-env"),
    ("plan no-such-env --offline", 2, "no-such-env"),
    ("state inspect /nonexistent/state.json", 2, "/nonexistent/state.json"),
    ("up local --layers ,", 2, "--layers"),
]


@pytest.mark.timeout(600)
def test_dry_runs_and_bad_input_keep_the_contract(matrix):
    wrong = []
    for (command, code, words), (_, proc) in zip(SPECIFIC, matrix["specific"]):
        if proc.returncode != code or "Traceback" in proc.stderr or words not in proc.stdout + proc.stderr:
            wrong.append(f"{command} → {proc.returncode}: {(proc.stderr or proc.stdout)[-300:]}")
    assert not wrong, "\n".join(wrong)


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def test_a_real_process_gives_what_the_in_process_run_gave(matrix):
    """The in-process runs stand in for processes: for one case of each exit code, a real process exits with the
    same code and the same error paragraph, and prints it on stderr only (stdout is for data)."""
    assert {proc.returncode for proc in matrix["samples"].values()} == {2, 3, 4}
    for (group, index), proc in matrix["samples"].items():
        (argv, _, _), inproc = matrix[group][index]
        assert (proc.returncode, _errors(proc.stderr)) == (inproc.returncode, _errors(inproc.stderr)), argv
        assert "Traceback" not in proc.stderr and not _errors(proc.stdout), argv
        assert bool(proc.stdout) == bool(inproc.stdout), argv


def test_a_refused_connection_is_reported_on_stderr_not_stdout(matrix):
    for (argv, _, _), proc in matrix[IN_PROCESSES]:
        assert not _errors(proc.stdout), (argv, proc.stdout)
        assert "could not be reached" in proc.stderr, (argv, proc.stderr)


def test_a_closed_stdout_is_neither_success_nor_a_bug(tmp_path):
    """`groundctl spec check dev --json | true`: the output was lost, which is not exit 0, and the process ends
    without a traceback or an internal error (exit 70)."""
    read, write = os.pipe()
    os.close(read)  # every write to stdout fails: a broken pipe
    try:
        proc = subprocess.run([sys.executable, "-m", "groundctl", "spec", "check", "dev", "--json"], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=_env({}), timeout=120)
    finally:
        os.close(write)
    assert proc.returncode not in (0, 70), (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    assert "internal error" not in proc.stderr, proc.stderr
