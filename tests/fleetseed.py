"""An environment's records as scheduled runs leave them, written into an emulator bucket: drift records,
drill reports (made by the drills' own report code), ledger heads, a lock, and the bucket's settings.
Used by the fleet status tests and by bench/fleet_status.py."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Optional

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from bootstrap.records.drift import drift_record, save_drift_record
from bootstrap.records.ledger import LedgerRecord
from bootstrap.records import proc_probe
from bootstrap.records.liveness import Place
from bootstrap.records.lock_object import LockInfo
from recovery.drills import phases as dp
from recovery.drills.phases import PhaseResult
from recovery.drills.report import DrillReport, recovery_phases, write_report

T0 = 1_764_000_000.0  # 2025-11-24, a fixed start so the records' ids are stable


@dataclass(frozen=True)
class Seed:
    drift_records: int = 30
    drill_records: int = 10
    drifted_last: bool = False
    drifted_checks: int = 0                  # the last N drift checks found drift (drifted_last: the last one)
    last_drill_fails: bool = False
    slower_each_drill: float = 0.0   # seconds added to the recovery of each successive drill
    lock_holder: Optional[str] = None
    lock_stale: bool = False                 # the holder ran on this host and its pid is gone
    failed_kinds: tuple[str, ...] = ()       # the last drill of these kinds fails (in its last recovery phase)
    failed_runs: int = 1                     # ... and so do the ones before it, this many in all
    fail_early: bool = False                 # ... in preflight instead: nothing is measured
    jitter: float = 0.0                      # seconds added and taken in turn: noise, not a trend
    drift_age_hours: float = 0.0             # with `now`: how old the newest drift record is
    versioning: bool = True
    replication_rtc: Optional[bool] = None   # None: no replication; False: replication without RTC
    noncurrent_days: Optional[int] = None    # None: no lifecycle rule
    layers_with_ledger: tuple[str, ...] = ("backend", "network", "cluster")
    rehearsals: int = 3                      # daily restore rehearsals of the ledger's layers, every one proven
    rehearsal_rpo_seconds: int = 600         # ... of a version this old (the measured RPO)


def _gone_pid() -> int:
    """The pid of a process that has ended (this host's lock holder that died)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(proc.stdout)


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def make_bucket(s3, bucket: str, seed: Seed) -> None:
    s3.create_bucket(Bucket=bucket)
    if seed.versioning:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    if seed.noncurrent_days:
        s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": [{
            "ID": "groundctl-noncurrent", "Status": "Enabled", "Filter": {"Prefix": ""},
            "NoncurrentVersionExpiration": {"NoncurrentDays": seed.noncurrent_days}}]})
    if seed.replication_rtc is not None:
        dest = f"{bucket}-replica"
        s3.create_bucket(Bucket=dest)
        s3.put_bucket_versioning(Bucket=dest, VersioningConfiguration={"Status": "Enabled"})
        destination = {"Bucket": f"arn:aws:s3:::{dest}"}
        if seed.replication_rtc:
            destination |= {"ReplicationTime": {"Status": "Enabled", "Time": {"Minutes": 15}},
                             "Metrics": {"Status": "Enabled", "EventThreshold": {"Minutes": 15}}}
        s3.put_bucket_replication(Bucket=bucket, ReplicationConfiguration={
            "Role": "arn:aws:iam::123456789012:role/replication", "Rules": [{
                "ID": "replicate-everything", "Status": "Enabled", "Priority": 1, "Filter": {"Prefix": ""},
                "DeleteMarkerReplication": {"Status": "Enabled"}, "Destination": destination}]})


def drill_report(environment: str, kind: str, index: int, *, rto_minutes: int, recovery: float,
                 fail: bool = False, early: bool = False, t0: float = T0) -> DrillReport:
    """A finished drill, timed: each phase gets a share of `recovery` seconds (recovery phases) or 20 s."""
    names = dp.REBUILD if kind == "rebuild-cluster" else dp.STATE_LOSS
    rec = recovery_phases(kind)
    start = t0 + index * 86400
    at, phases = start, []
    for i, name in enumerate(names):
        if fail and early and i > 0:
            phases.append(dp.not_attempted(name))
            continue
        secs = recovery / len(rec) if name in rec else 20.0
        failed = fail and name == (names[0] if early else rec[-1])
        phases.append(PhaseResult(name, dp.FAILED if failed else dp.ACHIEVED, "Timeout" if failed else "Done",
                                  "waited too long" if failed else "ok", True, started_at=at, ended_at=at + secs))
        at += secs
    phases_t = tuple(phases)
    verdict = dp.decide(phases_t, rec, rto_minutes)
    stamp = _stamp(start)
    return DrillReport(f"{stamp}-{kind}-{index:06x}", kind, environment, start, at, rto_minutes, phases_t, verdict,
                       layer="network" if kind == "state-loss" else None)


def seed_environment(s3, environment: str, bucket: str, seed: Seed, *, rto_minutes: int = 30,
                     now: Optional[float] = None, summary: Optional[str] = None) -> None:
    """Records as scheduled runs leave them: from T0 on (fixed ids), or, given `now`, hourly drift checks up to
    `seed.drift_age_hours` before it and daily drills up to a day before it. With `summary` (`"plain"`, or
    `"replica"` when the spec asks for a replica), the environment's summary as the last drift check of this
    version leaves it; without, as an earlier version's drift checks left the bucket (a summary only the
    rehearsals wrote, which no listing built)."""
    make_bucket(s3, bucket, seed)
    drift_t0 = T0 if now is None else now - seed.drift_age_hours * 3600 - (seed.drift_records - 1) * 3600
    drill_t0 = T0 if now is None else now - seed.drill_records * 86400
    store = ObjectStore(s3, bucket)
    clean = [{"layer": lay, "state": "clean", "summary": "no changes", "counts": {"same": 4}, "changes": []}
             for lay in ("backend", "network", "cluster", "flux")]
    for i in range(seed.drift_records):
        rows = clean
        if i >= seed.drift_records - max(seed.drifted_checks, 1 if seed.drifted_last else 0):
            rows = [dict(clean[0]), {**clean[1], "state": "drift", "summary": "1 to update",
                                     "changes": [{"urn": "u", "type": "t", "operation": "update", "diff_keys": []}]},
                    *clean[2:]]
        stamp = _stamp(drift_t0 + i * 3600)
        save_drift_record(store, drift_record(environment, rows, clock=lambda: drift_t0 + i * 3600,
                                              check_id=f"{stamp}-{i:06x}"))
    kinds = ("rebuild-cluster", "state-loss")
    for i in range(seed.drill_records):
        kind = kinds[i % 2]
        last_of_kind = i >= seed.drill_records - 2 * seed.failed_runs
        fail = (seed.last_drill_fails or kind in seed.failed_kinds) and last_of_kind
        noise = seed.jitter * (1 if (i // 2) % 2 else -1)
        write_report(drill_report(environment, kind, i, rto_minutes=rto_minutes, t0=drill_t0, early=seed.fail_early,
                                  recovery=600 + seed.slower_each_drill * i + noise, fail=fail), store=store)
    for serial_layer in seed.layers_with_ledger:
        for serial in (1, 2):
            rec = LedgerRecord(str(uuid.UUID(int=7)), serial, "0" * 64, None, None, "up", f"run-{serial}",
                               "2025-11-24T00:00:00.000Z", None, 3, layout.stack_key(serial_layer, environment))
            store.put(layout.ledger_key(serial_layer, environment, serial), rec.to_json())
    reh_t0 = T0 if now is None else now - 3600 - (seed.rehearsals - 1) * 86400
    for i in range(seed.rehearsals):
        save_rehearsal(store, environment, reh_t0 + i * 86400, {
            layer: ("proven", seed.rehearsal_rpo_seconds, None) for layer in seed.layers_with_ledger}, index=i)
    if summary:
        from recovery.evidence.summaries import refresh

        assert refresh(store, s3, environment, replication=summary == "replica")
    if seed.lock_holder:
        # A stale lock is one whose holder exited this host: recorded in this boot and pid namespace, its pid gone.
        here = proc_probe.here()
        holder = Place("runner-7") if not seed.lock_stale else here
        pid = 4242 if not seed.lock_stale else _gone_pid()
        info = LockInfo(environment, seed.lock_holder, holder.host, pid, "run-x", "2025-11-24T00:00:00.000Z",
                        "2025-11-24T00:00:00.000Z", 300, holder.boot_id, holder.pid_ns)
        store.put(layout.lock_key(environment), info.body())


def save_rehearsal(store, environment: str, at: float, layers: dict, *, index: int = 0,
                   reason: Optional[str] = None, ages: Optional[dict] = None) -> str:
    """A restore rehearsal's record as `state rehearse --record` writes it (its own record code), started at
    `at`: layers {layer: (outcome, the measured RPO in seconds or None, reason)}, each version as old as its
    RPO unless `ages` {layer: seconds} says otherwise (a newest version older than the RPO it gives); no
    layers and a `reason`: a run that stopped before any verdict."""
    from recovery.evidence.rehearsal_judge import Attempt, Decrypt, LayerResult, Preview
    from recovery.evidence.rehearsal_record import rehearsal_record, save_rehearsal_record
    from recovery.rehearsal.scope import version_of

    results = []
    for layer, (outcome, rpo, why) in layers.items():
        age = (ages or {}).get(layer, rpo)
        version = version_of(layout.stack_key(layer, environment), f"v{index}", "current",
                             datetime.fromtimestamp(at - (age or 0), timezone.utc), serial=index + 1)
        newer = {"versions": 1 if rpo else 0, "oldest": None}
        if outcome == "failed":
            attempt = Attempt(version, age, Decrypt("failed", "passphrase", "wrong-passphrase", why),
                              seconds={"restore": 0.2}, failed_phase="decrypt", reason=why)
        else:
            attempt = Attempt(version, age, Decrypt("ok", "passphrase", secrets=1),
                              Preview("drift" if outcome == "drift" else "no-change"),
                              {"restore": 0.2, "decrypt": 0.5, "preview": 4.0})
        results.append(LayerResult(layer, attempt, rpo_seconds=rpo, newer=newer))
    stamp = datetime.fromtimestamp(at, timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return save_rehearsal_record(store, rehearsal_record(environment, results, started=at, finished=at + 30,
                                                         groundctl_version="0.1.0", pulumi_version="v3.259.0",
                                                         rehearsal_id=f"{stamp}-{index:06x}", reason=reason))


def spec_data(environment: str, bucket: str, endpoint: str, *, production: bool = False, rto: int = 30,
              rpo: int = 30, retention: int = 30, replica: Optional[str] = None) -> dict:
    data = {"name": environment, "production": production,
            "aws": {"region": "us-east-1", "account_id": "123456789012", "endpoint_url": endpoint},
            "backend": {"bucket": bucket, "kms_alias": f"alias/{environment}",
                        "noncurrent_version_retention_days": retention},
            "network": {"cidr": "10.10.0.0/16", "az_count": 2},
            "cluster": {"kubernetes_version": "1.31", "node_groups": [
                {"name": "system", "instance_types": ["t3.medium"], "min_size": 1, "desired_size": 1, "max_size": 2}]},
            "flux": {"version": "v2.4.0", "repository_url": "https://github.com/acme/fleet.git",
                     "ref": {"branch": "main"}},
            "recovery": {"rto_minutes": rto, "rpo_minutes": rpo}}
    if replica:
        data["backend"]["replica_region"] = replica
    if production:
        data["flux"]["ref"] = {"tag": "v1.0.0"}
        data["flux"]["manifest_sha256"] = "0" * 64  # production pins its Flux manifest (never applied here)
        del data["aws"]["endpoint_url"]
    return data


def dump(data: dict) -> str:
    return json.dumps(data)  # JSON is YAML: a spec file the loader reads as written


# -- the seeded fleet an on-call engineer triages: 50 environments, 16 of them production ----------------

def _fleet_stories() -> dict[str, tuple[Seed, dict, str]]:
    """name: (seed, spec extras, the level its row must have)."""
    base = dict(drift_records=4, drill_records=10, noncurrent_days=30)
    prod = dict(base, replication_rtc=True)
    stories: dict[str, tuple[Seed, dict, str]] = {
        "prod-payments": (Seed(**prod, drifted_last=True), {"production": True, "replica": "us-west-2"}, "critical"),
        "prod-ledger": (Seed(**prod, drifted_checks=3), {"production": True, "replica": "us-west-2"}, "critical"),
        "prod-checkout": (Seed(**prod, failed_kinds=("rebuild-cluster",), failed_runs=2),
                          {"production": True, "replica": "us-west-2"}, "critical"),
        "prod-identity": (Seed(**prod, lock_holder="ci", lock_stale=True), {"production": True, "replica": "us-west-2"}, "critical"),
        "prod-search": (Seed(**dict(prod, versioning=False, replication_rtc=None)), {"production": True, "replica": "us-west-2"}, "critical"),
        "prod-billing": (Seed(**prod, drift_age_hours=84), {"production": True, "replica": "us-west-2"}, "warning"),   # 3.5 days old
        "prod-reports": (Seed(**dict(prod, drift_records=0)), {"production": True, "replica": "us-west-2"}, "warning"),  # never checked
        "prod-media": (Seed(**prod, slower_each_drill=90), {"production": True, "replica": "us-west-2"}, "warning"),
        "stage-api": (Seed(**base, failed_kinds=("rebuild-cluster",)), {}, "critical"),  # a newer state-loss passed
        "stage-web": (Seed(**base, last_drill_fails=True, fail_early=True), {}, "critical"),
        "stage-jobs": (Seed(**base, lock_holder="bob", lock_stale=True), {}, "critical"),
        "dev-batch": (Seed(**base, lock_holder="eve", lock_stale=True), {}, "critical"),
        "stage-cache": (Seed(**base, drifted_last=True), {}, "warning"),
        "dev-ml": (Seed(**base, drifted_last=True), {}, "warning"),
        "dev-edge": (Seed(**base, drifted_last=True), {}, "warning"),
        "dev-mobile": (Seed(**base, drifted_last=True), {}, "warning"),
        "dev-queue": (Seed(**base, slower_each_drill=90), {}, "warning"),
        "dev-stale": (Seed(**base, drift_age_hours=30), {}, "warning"),
        "dev-fresh": (Seed(**dict(base, drift_records=0)), {}, "warning"),
        "dev-gone": (Seed(**base), {"missing": True}, "warning"),
        "dev-noisy": (Seed(**base, jitter=40), {}, "info"),       # ±40 s of noise: no "slower" flag
        "dev-busy": (Seed(**base, lock_holder="ci"), {}, "info"),  # a live run
    }
    for i in range(8):
        stories[f"prod-ok-{i:02d}"] = (Seed(**prod), {"production": True, "replica": "us-west-2"}, "ok")
    for i in range(20):
        stories[f"dev-ok-{i:02d}"] = (Seed(**base), {}, "info")  # no replica: expected outside production
    return stories


def seed_fleet(s3, endpoint: str, now: float, prefix: str) -> tuple[dict, dict[str, str]]:
    """Seed the 50 environments' buckets; ({name: spec}, {name: expected level})."""
    from concurrent.futures import ThreadPoolExecutor

    from bootstrap.spec import parse_spec

    stories = _fleet_stories()

    def one(item):
        name, (seed, extra, _level) = item
        bucket = f"{prefix}-{name}"
        opts = {k: v for k, v in extra.items() if k != "missing"}
        if not extra.get("missing"):
            seed_environment(s3, name, bucket, seed, now=now)
        return name, parse_spec(spec_data(name, bucket, endpoint, **opts), name)

    with ThreadPoolExecutor(max_workers=8) as pool:
        specs = dict(pool.map(one, stories.items()))
    return specs, {name: story[2] for name, story in stories.items()}


def read_counting(spec, store, s3) -> tuple:
    """`read_environment` of one environment, with the names of the S3 operations it called, in order."""
    from recovery.evidence.reading import Source, read_environment

    calls = []

    def count(**kwargs):
        calls.append(kwargs["model"].name)

    s3.meta.events.register("before-call.s3", count)
    try:
        return read_environment(Source(spec, store, s3)), calls
    finally:
        s3.meta.events.unregister("before-call.s3", count)
