"""Which environments a change touches, and what CI may do with each.

A change to `environments/<env>.yaml` (or to a file that spec names, such as a local Flux manifest)
touches that environment; a change to the layer programs or to groundctl itself touches every
environment, since any plan may differ, and so does an upgrade in an adopter's repository, which changes
no program file there but the committed wheel, the requirements, the lock or the workflows; anything else
(docs, runbooks) touches none.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import PurePosixPath
from typing import Iterable, Literal, Optional

from bootstrap.pins.lockfile import LOCK_FILE

ENV_DIR = "environments"
# Paths whose change can alter every environment's plan. Prefixes ending in "/" are folders.
EVERY_ENVIRONMENT = ("stacks/", "bootstrap/", "recovery/", "groundctl/", "pyproject.toml",
                     ".github/workflows/groundctl-")
# The same in an adopter's repository, by file name wherever it lies: groundctl's requirements (the input and the
# compiled file the workflows install), the lock of checked release artifacts (`groundctl pins update`), and the
# committed wheel. The wheel's layer programs and the provider versions its requirements pin are the plan.
UPGRADE_FILES = ("groundctl-requirements.in", "groundctl-requirements.txt", LOCK_FILE)
WHEEL = re.compile(r"^groundctl-[^/]*\.whl$")
# The spec's own rule for names (bootstrap/spec/models.py): a name that fails it is never a usable environment,
# and only such names are put into shell variables and concurrency groups by the workflows.
ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$|^[a-z]$")

Role = Literal["plan", "record", "apply"]


@dataclass(frozen=True)
class CiEnvironment:
    """One environment as the workflows see it: its name, and the OIDC roles its spec names (or not)."""
    environment: str
    region: str = ""
    account_id: str = ""
    plan_role: str = ""
    apply_role: str = ""
    record_role: str = ""
    production: bool = False
    spec_error: str = ""  # the spec did not load: its spec check fails in the job, with the message
    extra_files: tuple[str, ...] = ()  # repository paths the spec reads (a local Flux manifest)


@dataclass(frozen=True)
class Selection:
    include: tuple[CiEnvironment, ...]
    skipped: tuple[tuple[str, str], ...]  # (environment, why CI does not act on it)

    def matrix(self) -> dict:
        """The `strategy.matrix` value: GitHub refuses an empty `include`, so callers check `count` first."""
        rows = []
        for env in self.include:
            row = asdict(env)
            row.pop("extra_files")
            rows.append(row)
        return {"count": len(rows), "include": rows,
                "skipped": [{"environment": e, "reason": r} for e, r in self.skipped]}


def environment_of(path: str) -> Optional[str]:
    """`environments/dev.yaml` → `dev`; None for any other path (specs are `*.yaml` directly in the folder)."""
    p = PurePosixPath(path)
    if len(p.parts) == 2 and p.parts[0] == ENV_DIR and p.suffix == ".yaml":
        return p.stem
    return None


def not_paths(lines: Iterable[str]) -> list[tuple[int, str]]:
    """(line number, line) of each line that `git diff --name-only` never prints: indented, a YAML key or list
    item, a comment. A spec or another document given as the list of changed files is then refused, not read as
    paths that touch nothing."""
    bad = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if (line[0].isspace() or line.startswith(("-", "#", "---")) or ": " in line or line.rstrip().endswith(":")
                or any(ord(c) < 32 for c in line)):
            bad.append((number, line))
    return bad


def _normal(path: str) -> str:
    return str(PurePosixPath(path.strip().lstrip("/"))).removeprefix("./")


def upgrades(path: str, install: str = "") -> bool:
    """True when `path` is part of the groundctl an adopter's workflows install: the requirements file they
    install (`install`, the workflows' GROUNDCTL_INSTALL, or the default name) or its input, the lock, a wheel."""
    name = PurePosixPath(path).name
    own = {_normal(install), _normal(install).removesuffix(".txt") + ".in"} if install.strip() else set()
    return name in UPGRADE_FILES or path in own or bool(WHEEL.match(name))


def touched(changed: Iterable[str], environments: Iterable[CiEnvironment],
            every: tuple[str, ...] = EVERY_ENVIRONMENT, install: str = "") -> tuple[list[str], str]:
    """The names of the environments `changed` touches, in name order, and why (one line)."""
    known = {e.environment: e for e in environments}
    paths = sorted({_normal(p) for p in changed if p.strip()})
    wide = [p for p in paths if any(p == w or p.startswith(w) for w in every) or upgrades(p, install)]
    if wide:
        return sorted(known), f"{wide[0]} changed, which can alter every environment's plan"
    hit = set()
    for p in paths:
        name = environment_of(p)
        if name in known:
            hit.add(name)
        hit.update(e.environment for e in known.values() if p in {_normal(f) for f in e.extra_files})
    return sorted(hit), (f"changed: {', '.join(sorted(hit))}" if hit else "no environment spec or program changed")


def select(environments: Iterable[CiEnvironment], names: Iterable[str], needs: Optional[Role]) -> Selection:
    """The environments CI acts on: `needs` a role the spec must name (a live plan, an apply), or none."""
    by_name = {e.environment: e for e in environments}
    include, skipped = [], []
    for name in sorted(set(names)):
        env = by_name[name]
        if needs is None or env.spec_error:
            # A broken spec is kept so that its job fails with the message instead of passing unseen.
            include.append(env)
        elif needs == "plan" and not env.plan_role:
            skipped.append((name, "its spec names no aws.plan_role_arn, so CI has no role to plan it with"))
        elif needs == "record" and not env.record_role:
            skipped.append((name, "its spec names no aws.record_role_arn, so the scheduled drift check has no role "
                                  "to record its result with (the plan role writes nothing)"))
        elif needs == "apply" and not env.apply_role:
            skipped.append((name, "its spec names no aws.apply_role_arn, so CI has no role to apply it with; "
                                  "apply it by hand with `groundctl up`"))
        else:
            include.append(env)
    return Selection(tuple(include), tuple(skipped))

