"""An environment's records as scheduled runs leave them, written into an emulator bucket: drift records,
drill reports (made by the drills' own report code), ledger heads, a lock, and the bucket's settings.
Used by the fleet status tests and by bench/fleet_status.py."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from dataclasses import dataclass
from typing import Optional

from bootstrap.aws.objectstore import ObjectStore
from bootstrap.records import layout
from bootstrap.records.drift import drift_record, save_drift_record
from bootstrap.records.ledger import LedgerRecord
from bootstrap.records.locks import LockInfo
from recovery.drills import phases as dp
from recovery.drills.phases import PhaseResult
from recovery.drills.report import DrillReport, recovery_phases, write_report

T0 = 1_764_000_000.0  # 2025-11-24, a fixed start so the records' ids are stable


@dataclass(frozen=True)
class Seed:
    drift_records: int = 30
    drill_records: int = 10
    drifted_last: bool = False
    last_drill_fails: bool = False
    slower_each_drill: float = 0.0   # seconds added to the recovery of each successive drill
    lock_holder: Optional[str] = None
    versioning: bool = True
    replication_rtc: Optional[bool] = None   # None: no replication; False: replication without RTC
    noncurrent_days: Optional[int] = None    # None: no lifecycle rule
    layers_with_ledger: tuple[str, ...] = ("backend", "network", "cluster")


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
                 fail: bool = False) -> DrillReport:
    """A finished drill, timed: each phase gets a share of `recovery` seconds (recovery phases) or 20 s."""
    names = dp.REBUILD if kind == "rebuild-cluster" else dp.STATE_LOSS
    rec = recovery_phases(kind)
    start = T0 + index * 86400
    at, phases = start, []
    for i, name in enumerate(names):
        secs = recovery / len(rec) if name in rec else 20.0
        failed = fail and name == rec[-1]
        phases.append(PhaseResult(name, dp.FAILED if failed else dp.ACHIEVED, "Timeout" if failed else "Done",
                                  "waited too long" if failed else "ok", True, started_at=at, ended_at=at + secs))
        at += secs
    phases_t = tuple(phases)
    verdict = dp.decide(phases_t, rec, rto_minutes)
    stamp = _stamp(start)
    return DrillReport(f"{stamp}-{kind}-{index:06x}", kind, environment, start, at, rto_minutes, phases_t, verdict,
                       layer="network" if kind == "state-loss" else None)


def seed_environment(s3, environment: str, bucket: str, seed: Seed, *, rto_minutes: int = 30) -> None:
    make_bucket(s3, bucket, seed)
    store = ObjectStore(s3, bucket)
    clean = [{"layer": lay, "state": "clean", "summary": "no changes", "counts": {"same": 4}, "changes": []}
             for lay in ("backend", "network", "cluster", "flux")]
    for i in range(seed.drift_records):
        rows = clean
        if seed.drifted_last and i == seed.drift_records - 1:
            rows = [dict(clean[0]), {**clean[1], "state": "drift", "summary": "1 to update",
                                     "changes": [{"urn": "u", "type": "t", "operation": "update", "diff_keys": []}]},
                    *clean[2:]]
        stamp = _stamp(T0 + i * 3600)
        save_drift_record(store, drift_record(environment, rows, clock=lambda: T0 + i * 3600,
                                              check_id=f"{stamp}-{i:06x}"))
    kinds = ("rebuild-cluster", "state-loss")
    for i in range(seed.drill_records):
        kind = kinds[i % 2]
        fail = seed.last_drill_fails and i >= seed.drill_records - 2
        write_report(drill_report(environment, kind, i, rto_minutes=rto_minutes,
                                  recovery=600 + seed.slower_each_drill * i, fail=fail), store=store)
    for serial_layer in seed.layers_with_ledger:
        for serial in (1, 2):
            rec = LedgerRecord(str(uuid.UUID(int=7)), serial, "0" * 64, None, None, "up", f"run-{serial}",
                               "2025-11-24T00:00:00.000Z", None, 3, layout.stack_key(serial_layer, environment))
            store.put(layout.ledger_key(serial_layer, environment, serial), rec.to_json())
    if seed.lock_holder:
        info = LockInfo(environment, seed.lock_holder, "runner-7", 4242, "run-x", "2025-11-24T00:00:00.000Z",
                        "2025-11-24T00:00:00.000Z", 300)
        store.put(layout.lock_key(environment), info.body())


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
        del data["aws"]["endpoint_url"]
    return data


def dump(data: dict) -> str:
    return json.dumps(data)  # JSON is YAML: a spec file the loader reads as written
