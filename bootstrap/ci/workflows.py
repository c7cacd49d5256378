"""The GitHub Actions workflow set `groundctl ci init` writes: the templates beside this module, filled in.

Every action is pinned by the full commit SHA of a release (the tag is kept as a comment for the reader
and for update bots); a tag can be moved, a commit cannot.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Mapping, Optional

from bootstrap.ci.requirements import CHECKOUT, install_run

WORKFLOW_DIR = ".github/workflows"
PR_WORKFLOW = "groundctl-pr.yml"
APPLY_WORKFLOW = "groundctl-apply.yml"
DRIFT_WORKFLOW = "groundctl-drift.yml"
REHEARSE_WORKFLOW = "groundctl-rehearse.yml"
WORKFLOWS = (PR_WORKFLOW, APPLY_WORKFLOW, DRIFT_WORKFLOW, REHEARSE_WORKFLOW)
DRIFT_TITLE = "groundctl: drift in {environment}"
# The PR workflow's aggregate job: the one check name a branch protection rule requires.
RESULT_CHECK = "groundctl plan result"


@dataclass(frozen=True)
class Action:
    repository: str
    commit: str
    release: str

    def uses(self) -> str:
        return f"{self.repository}@{self.commit}  # {self.release}"


# Each commit is what the release tag pointed to when it was pinned.
ACTIONS: dict[str, Action] = {
    "checkout": Action("actions/checkout", "3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "setup_python": Action("actions/setup-python", "5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "upload_artifact": Action("actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "download_artifact": Action("actions/download-artifact", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "configure_aws_credentials": Action("aws-actions/configure-aws-credentials",
                                        "e6de054238d6b7531b4efff3b6587d9aade6a06c", "v6.2.3"),
}

_CRON_FIELD = re.compile(r"^[0-9*/,\-]+$")
_BRANCH = re.compile(r"^[A-Za-z0-9._/-]+$")


DEFAULT_REQUIREMENTS = "groundctl-requirements.txt"
_REQUIREMENTS_PATH = re.compile(r"[A-Za-z0-9._/-]+\.txt")


@dataclass(frozen=True)
class WorkflowOptions:
    install: str            # `.` (this checkout is groundctl) or the repository's hashed requirements file
    python_version: str
    pulumi_version: str
    default_branch: str
    drift_cron: str
    groundctl_version: str
    # The repository folder of the groundctl wheel the requirements file names by a `file:` URL (None: pip reads
    # the file as it is): bootstrap.ci.requirements.
    wheel_dir: Optional[str] = None
    rehearsal_cron: str = "43 4 * * *"   # daily: the restore rehearsal of every environment with a record role
    # The scheduled drift workflow; left out where the fleet's hourly drift CronJobs check drift (the same records).
    drift: bool = True


def problems(options: WorkflowOptions) -> list[str]:
    """What is wrong with the options, each as 'what (how to fix)'; empty when they render a valid set."""
    from bootstrap.engine.versions import PULUMI_CLI_MIN

    found = []
    install = options.install
    if install != CHECKOUT and (not _REQUIREMENTS_PATH.fullmatch(install) or ".." in install.split("/")
                                or install.startswith("/")):
        found.append(f"--install {install!r} is neither . (install this checkout: groundctl's own repository) nor "
                     f"a requirements file inside the repository such as {DEFAULT_REQUIREMENTS}, whose every line "
                     "pins a version with --hash=sha256:… (the workflows install with --require-hashes)")
    if options.wheel_dir is not None and (not re.fullmatch(r"[A-Za-z0-9._/-]*", options.wheel_dir)
                                          or ".." in options.wheel_dir.split("/")):
        found.append(f"the wheel's folder {options.wheel_dir!r} is not a plain path inside the repository")
    if not re.fullmatch(r"3\.\d{1,2}", options.python_version):
        found.append(f"--python-version {options.python_version!r} is not a Python 3 minor version such as 3.11")
    if not re.fullmatch(r"\d+\.\d+\.\d+", options.pulumi_version):
        found.append(f"--pulumi-version {options.pulumi_version!r} is not a Pulumi CLI release such as "
                     f"{PULUMI_CLI_MIN}")
    elif _release(options.pulumi_version) < _release(PULUMI_CLI_MIN):
        found.append(f"--pulumi-version {options.pulumi_version} is older than {PULUMI_CLI_MIN}, the oldest Pulumi "
                     "CLI groundctl supports")
    if not _BRANCH.fullmatch(options.default_branch) or ".." in options.default_branch:
        found.append(f"--default-branch {options.default_branch!r} is not a branch name")
    for flag, cron in (("--drift-schedule", options.drift_cron), ("--rehearsal-schedule", options.rehearsal_cron)):
        fields = cron.split()
        if len(fields) != 5 or not all(_CRON_FIELD.fullmatch(f) for f in fields):
            found.append(f"{flag} {cron!r} is not a five-field cron schedule such as '17 6 * * *'")
    return found


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in version.split("."))


def _template(name: str) -> str:
    return files("bootstrap.ci").joinpath("templates", name).read_text(encoding="utf-8")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace each <<name>>; a name without a value is a bug in the template, never left in the output."""
    def one(match: re.Match) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template placeholder <<{key}>> has no value")
        return values[key]

    return re.sub(r"<<(\w+)>>", one, template)


def pip_cache_key(install: str) -> str:
    """The file setup-python's pip cache is keyed on (its sha256): what the install step installs, the hashed
    requirements file, or for groundctl's own checkout the pyproject.toml that pins its dependencies. A changed
    file is a new cache; an unchanged one reuses the downloads (~500 MB, ~50 s a job)."""
    return "pyproject.toml" if install == CHECKOUT else install


def render(options: WorkflowOptions) -> dict[str, str]:
    """Repository path → file text for the whole workflow set. Deterministic: no dates, no host facts. No digest
    is written into a workflow: the install steps read the repository's pins lock when they run, so a
    `groundctl pins update` needs no new `ci init`."""
    values = {name: action.uses() for name, action in ACTIONS.items()}
    values.update(
        version=options.groundctl_version,
        # JSON strings are valid YAML double-quoted scalars.
        install=json.dumps(options.install),
        install_run=install_run(options.install, options.wheel_dir),
        pip_cache_key=json.dumps(pip_cache_key(options.install)),
        python_version=options.python_version,
        pulumi_version=options.pulumi_version,
        default_branch=options.default_branch,
        drift_cron=options.drift_cron,
        rehearsal_cron=options.rehearsal_cron,
        drift_title=DRIFT_TITLE.format(environment="${ENVIRONMENT}"),
        pr_workflow=PR_WORKFLOW,
        result_check=RESULT_CHECK,
    )
    return {f"{WORKFLOW_DIR}/{name}": fill(_template(name), values) for name in WORKFLOWS
            if options.drift or name != DRIFT_WORKFLOW}
