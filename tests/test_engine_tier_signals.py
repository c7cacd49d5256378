"""Engine tier, issue 37 §1: SIGTERM sent to groundctl alone (an evicted pod's main process, `kill <pid>`) while
a real Pulumi preview or update runs, at random moments after that Pulumi process started.

groundctl tells each Pulumi process (SIGINT to its process group, which Pulumi cancels on), kills it after the
grace, and exits with 130 within the README's bound (bootstrap/engine/children.py INTERRUPTED_EXIT_SECONDS);
no process it started is left, the rehearsal's scratch folder is gone, and the environment lock an update
holds is released. Before, groundctl waited on a child that was never told, for as long as that child ran.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time

import pytest

from bootstrap.engine.children import INTERRUPTED_EXIT_SECONDS
from tests.conftest import requires_pulumi
from tests.engine_programs.tier import LAYERS, tier, wait_for  # noqa: F401 - fixture
from tests.processes import alive
from tests.test_engine_tier_interrupts import _name, _tree

pytestmark = [pytest.mark.engine, requires_pulumi]

SEED = random.randrange(1 << 30)
MOMENTS = 2


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _pulumi_under(pid: int, verb: str) -> list[int]:
    return [p for p in _tree(pid) if _name(p) == "pulumi" and verb in _argv(p)]


def _interrupt(run: subprocess.Popen, delay: float, verb: str) -> tuple[float, list[int], str, str]:
    """SIGTERM to the run alone, `delay` seconds after its `pulumi <verb>` process appeared; (seconds from the
    signal to its exit, every process under it at the signal, stdout, stderr)."""
    wait_for(f"`pulumi {verb}` under the run", lambda: _pulumi_under(run.pid, verb) or run.poll() is not None,
             timeout=120, every=0.05)
    assert run.poll() is None, run.communicate()
    time.sleep(delay)
    under = _tree(run.pid)
    sent = time.monotonic()
    run.send_signal(signal.SIGTERM)
    try:
        out, err = run.communicate(timeout=INTERRUPTED_EXIT_SECONDS * 6)
    except subprocess.TimeoutExpired:
        run.kill()
        pytest.fail(f"groundctl still ran {INTERRUPTED_EXIT_SECONDS * 6} s after SIGTERM ({delay:.2f} s in)")
    took = time.monotonic() - sent
    gone = time.monotonic() + 30
    while any(alive(p) for p in under) and time.monotonic() < gone:
        time.sleep(0.1)
    return took, [p for p in under if alive(p)], out, err


def _deployed(tier) -> None:
    """network and cluster deployed, whichever test of the module runs first (and with the spec as it is now)."""
    code, out, err = tier.cli("up", "SPEC", "--layers", LAYERS, "--yes", "--json")
    assert code == 0 and json.loads(out)["outcome"] == "succeeded", err + out


def _tmpdir(tmp_path, name: str):
    folder = tmp_path / name
    folder.mkdir()
    return folder


@pytest.mark.timeout(900)
def test_a_rehearsals_real_preview_interrupted_at_random_moments_exits_130_and_leaves_nothing(tier, tmp_path):
    _deployed(tier)
    rng = random.Random(SEED)
    for i in range(MOMENTS):
        delay = rng.uniform(0.0, 6.0)
        scratch = _tmpdir(tmp_path, f"tmp-{i}")
        # The refresh's read of the VPC record stalls: the preview is still running when the signal comes.
        run = tier.spawn("state", "rehearse", "SPEC", "--layers", "network", "--json",
                         faults={"vpc": "read-sleep:30"}, env={"TMPDIR": str(scratch)})
        took, left, out, err = _interrupt(run, delay, "preview")
        where = f"seed {SEED}, moment {i}: {delay:.2f} s after `pulumi preview` started"
        assert run.returncode == 130, f"{where}: exit {run.returncode}\n{err}"
        assert took <= INTERRUPTED_EXIT_SECONDS, f"{where}: exit after {took:.1f} s"
        assert "Interrupted" in err and "Traceback" not in err, f"{where}\n{err}"
        # The preview's stalled read outlasts Pulumi's cancellation grace only when it had begun; the message
        # says whether Pulumi had to be killed.
        assert ("was killed (`pulumi preview`)" in err) or ("nothing was left half-done" in err), f"{where}\n{err}"
        assert left == [], f"{where}: still running: {[(p, _name(p)) for p in left]}"
        assert [p.name for p in scratch.iterdir() if p.name.startswith("groundctl-")] == [], where


def _updates(tier) -> dict[str, str]:
    """Each `pulumi up` of the network stack Pulumi recorded (.pulumi/history/<project>/<stack>/, written as an
    update ends: pkg/backend/diy/state.go addToHistory): history key -> its result."""
    out = {}
    for key in tier.keys(f".pulumi/history/network/{tier.env_name}/"):
        if key.endswith(".history.json"):
            info = json.loads(tier.s3.get_object(Bucket=tier.state_bucket, Key=key)["Body"].read())
            if info.get("kind") == "update":
                out[key] = info.get("result")
    return out


@pytest.mark.timeout(900)
def test_a_real_update_interrupted_at_random_moments_is_cancelled_exits_130_and_releases_the_locks(tier, tmp_path):
    _deployed(tier)
    rng = random.Random(SEED + 1)
    for i in range(MOMENTS):
        latest = tier.checkpoint("network")["checkpoint"]["latest"]
        has_third = any(r["urn"].endswith("::private-2") for r in latest.get("resources") or [])
        # Each round changes the network (a third AZ's records made or removed), each step of it stalled for 4 s:
        # left alone, the update would end on its own well before groundctl's bound.
        spec = tier.spec_path.read_text()
        tier.spec_path.write_text(spec.replace("az_count: 3", "az_count: 2") if has_third
                                  else spec.replace("az_count: 2", "az_count: 3"))
        fault = "delete-sleep:4" if has_third else "sleep:4"
        before = _updates(tier)
        delay = rng.uniform(0.0, 4.0)
        run = tier.spawn("up", "SPEC", "--layers", "network", "--yes", "--json",
                         faults={"private-2": fault, "public-2": fault}, env={"TMPDIR": str(_tmpdir(tmp_path, f"u{i}"))})
        took, left, out, err = _interrupt(run, delay, "up")
        where = f"seed {SEED + 1}, moment {i}: {delay:.2f} s after `pulumi up` started"
        assert run.returncode == 130, f"{where}: exit {run.returncode}\n{err}"
        assert took <= INTERRUPTED_EXIT_SECONDS, f"{where}: exit after {took:.1f} s"
        assert left == [], f"{where}: still running: {[(p, _name(p)) for p in left]}"
        # Pulumi was told: its update (if it had started) was cancelled, not left to finish.
        ended = {k: v for k, v in _updates(tier).items() if k not in before}
        assert "succeeded" not in ended.values(), f"{where}: {ended}"
        status = tier.cli_json("lock", "status", "SPEC")
        assert status["holder"] is None, f"{where}: groundctl's lock left: {status}"
        # Pulumi cancelled within the grace (the stalled step ends inside it) and released its own lock.
        assert status["pulumi_locks"] == [], f"{where}: {status['pulumi_locks']}"
        pending = tier.checkpoint("network")["checkpoint"]["latest"].get("pending_operations") or []
        assert pending == [], f"{where}: a cancelled update finishes its steps in flight: {pending}"
    code, out, err = tier.cli("up", "SPEC", "--layers", "network", "--yes", "--json")
    assert code == 0 and json.loads(out)["outcome"] == "succeeded", err
