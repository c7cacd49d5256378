"""The state bucket's protection (versioning, replication, retention) read from S3 and judged against the RPO.

`read_protection` does two or three S3 calls (replication only when the spec asks for a replica: the
backend layer builds none otherwise, so there is none groundctl vouches for); `judge` is pure. What each setting buys, for the RPO
(how much recorded state an environment may lose):
- versioning: an overwritten or deleted state object can be brought back exactly (`groundctl recover`).
  Without it any bad write is a total loss, whatever the RPO says.
- replication: a copy outside the bucket, so losing the bucket (or its region) is not a total loss.
  S3 replication is asynchronous; only Replication Time Control bounds its lag (15 minutes), so
  without RTC there is no bound to hold an RPO against, and with it an RPO under 15 minutes cannot hold.
- retention of noncurrent versions: how far back a restore can reach. It should be what the spec
  asks (`backend.noncurrent_version_retention_days`); expiring sooner quietly shortens that reach.
"""

from __future__ import annotations

from typing import Optional

import botocore.exceptions

from bootstrap.aws.clients import error_code, retry_transient

RTC_MINUTES = 15
MEETS, AT_RISK, FAILS, UNKNOWN = "meets", "at-risk", "fails", "unknown"
_RANK = {MEETS: 0, UNKNOWN: 1, AT_RISK: 2, FAILS: 3}
NOT_READ = "not read"  # replication of a bucket whose spec asks for no replica


def _call(fn, missing: tuple[str, ...], what: str):
    """The response; None when the setting is absent; the error code as a string when it cannot be read."""
    def call():
        try:
            return fn()
        except botocore.exceptions.ClientError as exc:
            code = error_code(exc)
            if code in missing:
                return None
            if code in ("AccessDenied", "AllAccessDisabled", "NoSuchBucket"):
                return code
            raise
    return retry_transient(call, what=what)


def read_protection(s3, bucket: str, *, replication: bool = True) -> dict:
    """Versioning, replication (when asked) and noncurrent-version retention of `bucket`, as plain data."""
    out: dict = {"bucket": bucket, "unreadable": []}
    ver = _call(lambda: s3.get_bucket_versioning(Bucket=bucket), (), f"read versioning of {bucket}")
    if ver == "NoSuchBucket":
        return out | {"exists": False}
    if isinstance(ver, str):
        out["unreadable"].append(f"versioning ({ver})")
        ver = None
    out |= {"exists": True, "versioning": (ver or {}).get("Status") or "Disabled" if ver is not None else None,
            "mfa_delete": (ver or {}).get("MFADelete") == "Enabled"}
    rep = _call(lambda: s3.get_bucket_replication(Bucket=bucket), ("ReplicationConfigurationNotFoundError",),
                f"read replication of {bucket}") if replication else NOT_READ
    if rep is NOT_READ:
        out["replication"] = NOT_READ
    elif isinstance(rep, str):
        out["unreadable"].append(f"replication ({rep})")
        out["replication"] = None
    else:
        rules = [r for r in ((rep or {}).get("ReplicationConfiguration") or {}).get("Rules", [])
                 if r.get("Status") == "Enabled"]
        out["replication"] = {
            "enabled_rules": len(rules),
            "destinations": sorted({str((r.get("Destination") or {}).get("Bucket", "")) for r in rules}),
            "time_control": bool(rules) and all(((r.get("Destination") or {}).get("ReplicationTime") or {})
                                                .get("Status") == "Enabled" for r in rules)}
    lc = _call(lambda: s3.get_bucket_lifecycle_configuration(Bucket=bucket), ("NoSuchLifecycleConfiguration",),
               f"read lifecycle of {bucket}")
    if isinstance(lc, str):
        out["unreadable"].append(f"lifecycle ({lc})")
        out["noncurrent_days"] = None
    else:
        days = [r["NoncurrentVersionExpiration"]["NoncurrentDays"] for r in (lc or {}).get("Rules", [])
                if r.get("Status") == "Enabled" and (r.get("NoncurrentVersionExpiration") or {}).get("NoncurrentDays")]
        out["noncurrent_days"] = min(days) if days else 0  # 0: no rule expires them, they are kept forever
    return out


def judge(protection: dict, *, rpo_minutes: int, retention_days: int, replica_region: Optional[str]) -> dict:
    """{verdict, findings[{level, what}]} of the bucket's protection against the spec. Pure."""
    findings: list[tuple[str, str]] = []
    if not protection.get("exists", True):
        return {"verdict": FAILS, "findings": [{"level": FAILS, "what": f"the state bucket {protection['bucket']} "
                                                "does not exist"}]}
    for item in protection.get("unreadable", []):
        findings.append((UNKNOWN, f"{item} could not be read with these credentials"))
    ver = protection.get("versioning")
    if ver is not None and ver != "Enabled":
        findings.append((FAILS, f"versioning is {ver}: an overwritten or deleted state cannot be brought back, so "
                         f"any bad write loses everything, against an RPO of {rpo_minutes} min"))
    rep = protection.get("replication")
    if rep == NOT_READ:
        findings.append((AT_RISK, "no replica (the spec asks for none): losing the bucket or its region loses "
                         "every version"))
    elif rep is not None:
        if not rep["enabled_rules"]:
            if replica_region:
                findings.append((FAILS, f"the spec asks for a replica in {replica_region}, but the bucket has no "
                                 "enabled replication rule"))
            else:
                findings.append((AT_RISK, "no replica: losing the bucket or its region loses every version; the "
                                 f"RPO of {rpo_minutes} min holds only for bad writes inside the bucket"))
        elif not rep["time_control"]:
            findings.append((AT_RISK, "replication has no time bound without Replication Time Control, so a "
                             f"regional loss may lose more than the RPO of {rpo_minutes} min"))
        elif rpo_minutes < RTC_MINUTES:
            findings.append((AT_RISK, f"Replication Time Control bounds replication at {RTC_MINUTES} min, longer "
                             f"than the RPO of {rpo_minutes} min"))
    days = protection.get("noncurrent_days")
    if days is not None and days and days < retention_days:
        findings.append((AT_RISK, f"noncurrent versions expire after {days} days; the spec keeps them "
                         f"{retention_days}, so a restore reaches less far back than planned"))
    verdict = max((level for level, _ in findings), key=_RANK.__getitem__, default=MEETS)
    return {"verdict": verdict, "findings": [{"level": level, "what": what} for level, what in findings]}
