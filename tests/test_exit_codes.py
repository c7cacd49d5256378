"""The exit-code contract (issue 10 §4), kept by every command: 0 ok, 1 a check failed, 2 bad input,
3 refused, 4 the cloud or engine could not be used. A dry run exits with the code the real run would
have where it stops. Real processes (`python -m groundctl`), so the front door's mapping is what is tested.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.conftest import REPO

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


def _run(args: list[str], extra: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groundctl", *args], capture_output=True, text=True, cwd=REPO,
                          env=_env(extra), timeout=120)


FAILURE_CLASSES = {
    # class: (environment, extra arguments, extra environment, expected code, words the message must hold)
    "no-credentials": ("dev", [], {}, 4, "no AWS credentials were found"),
    "unknown-environment": ("no-such-env", [], {}, 2, "no-such-env"),
    "unreachable-endpoint": ("local", ["--endpoint-url", f"http://127.0.0.1:{_closed_port()}"], {}, 4,
                             "could not be reached"),
}


@pytest.fixture(scope="module")
def matrix() -> dict[str, list]:
    """Every case of this module, each its own process, sixteen at a time, the groups interleaved: a refused
    connection's case mostly waits (retried up to the deadline) while the others' start-ups use the CPU."""
    groups = {failure: [(command.format(env=environment).split() + args, extra) for command in COMMANDS]
              for failure, (environment, args, extra, _, _) in FAILURE_CLASSES.items()}
    groups["specific"] = [(command.split(), {}) for command, _, _ in SPECIFIC]
    width = max(map(len, groups.values()))
    interleaved = [(group, cases[i]) for i in range(width) for group, cases in groups.items() if i < len(cases)]
    with ThreadPoolExecutor(16) as pool:
        runs = [(group, case, pool.submit(_run, *case)) for group, case in interleaved]
        done: dict = {group: [] for group in groups}
        for group, case, run in runs:
            done[group].append((case, run.result()))
    return done


@pytest.mark.timeout(600)
@pytest.mark.parametrize("failure", sorted(FAILURE_CLASSES))
def test_every_command_exits_with_the_code_of_its_failure_class(failure, matrix):
    code, words = FAILURE_CLASSES[failure][3:]
    wrong = []
    for (argv, _), proc in matrix[failure]:
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
