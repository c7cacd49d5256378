"""The offline plan: every layer's real program, in order, under Pulumi's mock runtime, then posture.

No engine, no cloud, no credentials: each layer runs with the config groundctl would set from the
spec, and receives the outputs the layers before it exported (as its StackReferences would). What
the programs declare is checked against the posture rules. This is what lets a pull request be
reviewed without any cloud access.

The Flux deploy key is not needed to check posture, so the plan never reads the real one: it passes
a random placeholder as secret config, and the `flux-deploy-key-secret` rule checks that this
placeholder appears in no plain value.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from bootstrap.planning import posture
from bootstrap.layers import LAYERS
from bootstrap.planning.posture import Finding
from bootstrap.spec import EnvironmentSpec

if TYPE_CHECKING:  # mockrun loads pulumi; it is imported when a plan actually runs
    from bootstrap.planning.mockrun import ProgramRun


@dataclass(frozen=True)
class OfflinePlan:
    """What each layer declares and what the posture rules found, for one environment."""

    spec: EnvironmentSpec
    runs: tuple["ProgramRun", ...]
    findings: tuple[Finding, ...]
    seconds: float

    @property
    def environment(self) -> str:
        return self.spec.name

    @property
    def failed_rules(self) -> list[str]:
        return posture.failed_rules(self.findings)

    @property
    def passed(self) -> bool:
        return not self.failed_rules

    @property
    def exit_code(self) -> int:
        # 1: a posture rule refused what the programs declare; bad input never gets this far (2).
        return 0 if self.passed else 1


def offline_environ() -> dict[str, str]:
    """Placeholder Flux secrets for the mock run: random, so a leak of one is recognisable."""
    from bootstrap.spec.stack_config import DEPLOY_KEY_ENV, KNOWN_HOSTS_ENV

    return {
        DEPLOY_KEY_ENV: f"offline-plan-placeholder-deploy-key-{secrets.token_hex(12)}",
        KNOWN_HOSTS_ENV: "git.example.invalid ssh-ed25519 AAAAofflineplanplaceholder",
    }


def run_offline(spec: EnvironmentSpec, *, on_layer: Callable[[str], None] = lambda _: None,
                clock: Callable[[], float] = time.perf_counter) -> OfflinePlan:
    """Run backend → network → cluster → flux under the mock runtime and check their posture.

    A program that refuses its config raises BadInput (exit 2) naming the layer; a program that
    crashes raises EngineError. `on_layer` is told each layer as it starts (for progress).
    """
    from bootstrap.spec.stack_config import DEPLOY_KEY_ENV, layer_config
    from bootstrap.flux.manifest import require_manifest
    from bootstrap.planning.mockrun import run_program

    # A local Flux manifest that is missing, a folder or not the pinned one: exit 2. A placeholder digest is
    # `spec check`'s and the engine's to refuse: this plan applies and downloads nothing.
    require_manifest(spec, placeholder_ok=True)
    started = clock()
    environ = offline_environ()
    runs: dict[str, ProgramRun] = {}
    for lay in LAYERS:
        on_layer(lay.name)
        config = layer_config(spec, lay.name, environ=environ)
        upstream = {name: runs[name].outputs for name in lay.upstream}
        runs[lay.name] = run_program(lay.name, spec.name, config, upstream)
    findings = posture.evaluate(spec, runs, secret_values=[environ[DEPLOY_KEY_ENV]])
    return OfflinePlan(spec, tuple(runs.values()), tuple(findings), clock() - started)
