"""Where things live in the state bucket: Pulumi's DIY layout and groundctl's additions.

Pure key functions, so that every module agrees on the same paths.
"""

from __future__ import annotations

PULUMI = ".pulumi"
GROUNDCTL = ".groundctl"
STATE_SUFFIXES = (".json", ".json.gz", ".json.zst")


def stack_keys(project: str, stack: str) -> list[str]:
    """Every key the current state of a stack may be stored under (plain, gzip, zstd)."""
    return [f"{PULUMI}/stacks/{project}/{stack}{s}" for s in STATE_SUFFIXES]


def stack_key(project: str, stack: str, suffix: str = ".json") -> str:
    return f"{PULUMI}/stacks/{project}/{stack}{suffix}"


def bak_keys(project: str, stack: str) -> list[str]:
    return [k + ".bak" for k in stack_keys(project, stack)]


def history_prefix(project: str, stack: str) -> str:
    return f"{PULUMI}/history/{project}/{stack}/"


def backups_prefix(project: str, stack: str) -> str:
    return f"{PULUMI}/backups/{project}/{stack}/"


def pulumi_locks_prefix(project: str, stack: str) -> str:
    return f"{PULUMI}/locks/organization/{project}/{stack}/"


def ledger_prefix(project: str, stack: str) -> str:
    return f"{GROUNDCTL}/ledger/{project}/{stack}/"


def ledger_key(project: str, stack: str, serial: int) -> str:
    return f"{ledger_prefix(project, stack)}{serial:012d}.json"


def ledger_index_prefix(project: str, stack: str) -> str:
    """Beside the ledger, not in it: a reader of an earlier version finds nothing it does not know there."""
    return f"{GROUNDCTL}/ledger-index/{project}/{stack}/"


def ledger_index_key(project: str, stack: str) -> str:
    return f"{ledger_index_prefix(project, stack)}index.json.gz"


def ledger_digest_key(project: str, stack: str, serial: int, sha256: str) -> str:
    return f"{ledger_index_prefix(project, stack)}{serial:012d}.{sha256}"


def lock_key(environment: str) -> str:
    return f"{GROUNDCTL}/locks/{environment}.json"


def run_key(environment: str, run_id: str) -> str:
    return f"{GROUNDCTL}/runs/{environment}/{run_id}.json"


def drill_key(environment: str, drill_id: str) -> str:
    return f"{GROUNDCTL}/drills/{environment}/{drill_id}.json"


def drill_report_key(environment: str, drill_id: str, extension: str) -> str:
    """A finished drill's rendered report (Markdown, its SVG timeline), kept beside its record for a reader who has
    no other copy (a scheduled drill's pod loses its scratch volume). Past `locks/`, out of the range the fleet's
    status listing reads, so that listing does not grow with the reports."""
    return f"{GROUNDCTL}/reports/drills/{environment}/{drill_id}.{extension}"


def quarantine_key(project: str, stack: str, stamp: str) -> str:
    return f"{GROUNDCTL}/quarantine/{project}/{stack}/{stamp}.json"


def drills_prefix(environment: str) -> str:
    return f"{GROUNDCTL}/drills/{environment}/"


def drift_prefix(environment: str) -> str:
    return f"{GROUNDCTL}/drift/{environment}/"


def drift_key(environment: str, check_id: str) -> str:
    return f"{drift_prefix(environment)}{check_id}.json"


def rehearsals_prefix(environment: str) -> str:
    return f"{GROUNDCTL}/rehearsals/{environment}/"


def rehearsal_key(environment: str, name: str) -> str:
    return f"{rehearsals_prefix(environment)}{name}.json"
