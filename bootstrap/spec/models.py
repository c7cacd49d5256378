"""The spec's models: its shape, and the checks of each field on its own (names, ARNs, CIDRs, versions,
bucket names). The rules across fields are in `bootstrap.spec.rules`; each model runs its own after
its fields are valid.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from bootstrap.spec import cron, rules


_ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}[a-z0-9]$|^[a-z]$")
_ACCOUNT = re.compile(r"^\d{12}$")
_REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+$")
_KMS_ALIAS = re.compile(r"^alias/[a-zA-Z0-9/_-]{1,250}$")
_K8S_VERSION = re.compile(r"^1\.\d{2}$")
_FLUX_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")
_BUCKET_CHARS = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_SHA256 = re.compile(r"^[0-9a-fA-F]{64}$")



def _unless_problem(v: Optional[str], problem_of) -> Optional[str]:
    """`v` unchanged, or the ValueError naming what `problem_of` finds wrong with it (None passes)."""
    problem = problem_of(v) if v is not None else None
    if problem:
        raise ValueError(problem)
    return v

MEMORY_MIN_MI, MEMORY_MAX_MI = 256, 64 * 1024  # below it Pulumi and a provider plugin do not start


def memory_mebibytes(quantity: str) -> int:
    """`1536Mi` or `2Gi` in MiB; ValueError for any other form."""
    m = re.fullmatch(r"([1-9][0-9]{0,5})(Mi|Gi)", quantity)
    if not m:
        raise ValueError(quantity)
    return int(m[1]) * (1024 if m[2] == "Gi" else 1)


def memory_problem(quantity: str) -> Optional[str]:
    """What is wrong with a pod memory limit, or None."""
    try:
        mib = memory_mebibytes(quantity)
    except ValueError:
        return f"'{quantity[:40]}' is not a memory size in Mi or Gi, such as 1536Mi or 2Gi"
    if not MEMORY_MIN_MI <= mib <= MEMORY_MAX_MI:
        return f"{quantity} is outside {MEMORY_MIN_MI}Mi to {MEMORY_MAX_MI // 1024}Gi"
    return None


class _Model(BaseModel):
    # Unknown keys are typos until proven otherwise.
    model_config = ConfigDict(extra="forbid", frozen=True)


def _holds(model: _Model, problem: Optional[str]) -> _Model:
    """`model` when its rule across fields holds; the rule's words as the validation error when not."""
    if problem:
        raise ValueError(problem)
    return model


class AwsSpec(_Model):
    region: str
    account_id: str
    profile: Optional[str] = None
    plan_role_arn: Optional[str] = None
    # Scheduled checks that keep a record (drift --record, rehearsals): the plan role's reads and writes to
    # those records only (bootstrap/roles.py).
    record_role_arn: Optional[str] = None
    apply_role_arn: Optional[str] = None
    endpoint_url: Optional[str] = None

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not _REGION.fullmatch(v):
            raise ValueError(f"'{v}' is not an AWS region name; use a name like 'eu-west-1'")
        return v

    @field_validator("account_id", mode="before")
    @classmethod
    def _account(cls, v: object) -> object:
        if isinstance(v, int):
            raise ValueError(
                "the account id must be quoted in YAML (a number loses leading zeros); write it as a "
                "12-digit string such as \"012345678901\""
            )
        if isinstance(v, str) and not _ACCOUNT.fullmatch(v):
            raise ValueError(f"'{v}' is not a 12-digit AWS account id")
        return v

    @field_validator("plan_role_arn", "record_role_arn", "apply_role_arn")
    @classmethod
    def _role(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not _ROLE_ARN.fullmatch(v):
            raise ValueError(f"'{v}' is not an IAM role ARN; use arn:aws:iam::<account>:role/<name>")
        return v

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not re.fullmatch(r"^https?://[^\s/]+(:\d+)?/?$", v) and v != "embedded":
            raise ValueError(
                f"'{v}' is not an endpoint URL; use http(s)://host:port, or 'embedded' to start the "
                "local AWS emulator"
            )
        return v


def bucket_name_problem(name: str) -> Optional[str]:
    """Why S3 would refuse this general-purpose bucket name, or None."""
    if not 3 <= len(name) <= 63:
        return f"'{name}' has {len(name)} characters; S3 bucket names have 3 to 63"
    if not _BUCKET_CHARS.fullmatch(name):
        return (
            f"'{name}' may use only lowercase letters, digits, dots and hyphens, and must start and "
            "end with a letter or digit"
        )
    if ".." in name or ".-" in name or "-." in name:
        return f"'{name}' has adjacent dots or a dot beside a hyphen, which S3 refuses"
    if re.fullmatch(r"^\d+\.\d+\.\d+\.\d+$", name):
        return f"'{name}' is formatted as an IP address, which S3 refuses"
    for prefix in ("xn--", "sthree-", "amzn-s3-demo-"):
        if name.startswith(prefix):
            return f"'{name}' starts with the reserved prefix '{prefix}'"
    for suffix in ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"):
        if name.endswith(suffix):
            return f"'{name}' ends with the reserved suffix '{suffix}'"
    return None


class BackendSpec(_Model):
    bucket: str
    kms_alias: str
    noncurrent_version_retention_days: Annotated[int, Field(ge=1, le=3650)] = 90
    replica_region: Optional[str] = None

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        problem = bucket_name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("kms_alias")
    @classmethod
    def _alias(cls, v: str) -> str:
        if not _KMS_ALIAS.fullmatch(v) or v.startswith("alias/aws/"):
            raise ValueError(
                f"'{v}' is not a customer KMS alias; use 'alias/<name>' (names under alias/aws/ are "
                "reserved for AWS)"
            )
        return v

    @field_validator("replica_region")
    @classmethod
    def _replica(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not _REGION.fullmatch(v):
            raise ValueError(f"'{v}' is not an AWS region name; use a name like 'eu-central-1'")
        return v


class NetworkSpec(_Model):
    cidr: str
    az_count: Annotated[int, Field(ge=1, le=6)] = 3
    nat: Literal["single", "per-az"] = "single"
    flow_logs_retention_days: Annotated[int, Field(ge=1, le=3653)] = 30

    @field_validator("cidr")
    @classmethod
    def _cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as exc:
            raise ValueError(f"'{v}' is not an IPv4 network in CIDR form such as 10.20.0.0/16 ({exc})")
        if not 16 <= net.prefixlen <= 28:
            raise ValueError(f"a VPC CIDR must be between /16 and /28; '{v}' is /{net.prefixlen}")
        if not net.is_private:
            raise ValueError(f"'{v}' is not a private (RFC 1918) range; use e.g. 10.20.0.0/16")
        return v

    @model_validator(mode="after")
    def _fits(self) -> "NetworkSpec":
        return _holds(self, rules.network_problem(self))


class NodeGroupSpec(_Model):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,38}$")]
    instance_types: Annotated[list[str], Field(min_length=1)]
    min_size: Annotated[int, Field(ge=0, le=450)]
    desired_size: Annotated[int, Field(ge=0, le=450)]
    max_size: Annotated[int, Field(ge=1, le=450)]
    disk_size_gib: Annotated[int, Field(ge=20, le=16384)] = 50
    capacity_type: Literal["ON_DEMAND", "SPOT"] = "ON_DEMAND"

    @model_validator(mode="after")
    def _bounds(self) -> "NodeGroupSpec":
        return _holds(self, rules.node_group_problem(self))


class ClusterSpec(_Model):
    kubernetes_version: str
    endpoint_public_access: Optional[bool] = None
    public_access_cidrs: list[str] = []
    service_cidr: str = "172.20.0.0/16"
    admin_principal_arns: list[str] = []
    node_groups: Annotated[list[NodeGroupSpec], Field(min_length=1)]

    @field_validator("kubernetes_version", mode="before")
    @classmethod
    def _k8s(cls, v: object) -> object:
        if isinstance(v, float):
            raise ValueError(
                f"the Kubernetes version must be quoted in YAML ({v} as a number loses its trailing "
                "zero); write it as a string such as \"1.31\""
            )
        if isinstance(v, str) and not _K8S_VERSION.fullmatch(v):
            raise ValueError(f"'{v}' is not a Kubernetes minor version such as \"1.31\"")
        return v

    @field_validator("admin_principal_arns")
    @classmethod
    def _admins(cls, v: list[str]) -> list[str]:
        for arn in v:
            if not _PRINCIPAL_ARN.fullmatch(arn):
                raise ValueError(f"'{arn}' is not an IAM role or user ARN")
        return v

    @field_validator("public_access_cidrs", "service_cidr")
    @classmethod
    def _cidrs(cls, v):
        for c in [v] if isinstance(v, str) else v:
            try:
                ipaddress.IPv4Network(c, strict=True)
            except ValueError as exc:
                raise ValueError(f"'{c}' is not an IPv4 network in CIDR form ({exc})")
        return v

    @model_validator(mode="after")
    def _unique_groups(self) -> "ClusterSpec":
        return _holds(self, rules.cluster_problem(self))


class FluxRef(_Model):
    tag: Optional[str] = None
    commit: Optional[str] = None
    branch: Optional[str] = None

    @model_validator(mode="after")
    def _one(self) -> "FluxRef":
        return _holds(self, rules.flux_ref_problem(self))

    @property
    def pinned(self) -> bool:
        return self.branch is None


class FluxSpec(_Model):
    version: str
    repository_url: str
    ref: FluxRef
    path: Optional[str] = None
    manifest_path: Optional[str] = None
    manifest_sha256: Optional[str] = None
    interval: str = "5m"
    # How long `up` (and a recovery of the flux layer) waits for Flux's controllers and root Kustomization.
    ready_timeout_minutes: Annotated[int, Field(ge=1, le=1440)] = 10

    @field_validator("version")
    @classmethod
    def _version(cls, v: str) -> str:
        if not _FLUX_VERSION.fullmatch(v):
            raise ValueError(f"'{v}' is not a Flux release such as 'v2.4.0'")
        return v

    @field_validator("repository_url")
    @classmethod
    def _repo(cls, v: str) -> str:
        if not re.fullmatch(r"^(ssh://|https://)\S+$", v):
            raise ValueError(
                f"'{v}' is not a Git URL Flux can fetch; use ssh://git@host/org/repo.git or https://…"
            )
        return v

    @field_validator("manifest_path")
    @classmethod
    def _manifest_path(cls, v: Optional[str]) -> Optional[str]:
        return _unless_problem(v, rules.manifest_path_problem)

    @field_validator("manifest_sha256")
    @classmethod
    def _manifest_sha256(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not _SHA256.fullmatch(v):
            raise ValueError(f"'{v}' is not a sha256 digest: 64 hexadecimal characters, as in Flux's "
                             "flux_<version>_checksums.txt")
        return v.lower() if v is not None else None

    @field_validator("interval")
    @classmethod
    def _interval(cls, v: str) -> str:
        if not re.fullmatch(r"^\d+[smh]$", v):
            raise ValueError(f"'{v}' is not a duration such as '5m'")
        return v


class RecoverySpec(_Model):
    rto_minutes: Annotated[int, Field(ge=1, le=10080)]
    rpo_minutes: Annotated[int, Field(ge=0, le=10080)]
    # When the scheduled restore rehearsal runs (cron, UTC); unset: daily, at a time spread by the name.
    rehearsal_schedule: Optional[str] = None

    @field_validator("rehearsal_schedule")
    @classmethod
    def _cron(cls, v: Optional[str]) -> Optional[str]:
        return _unless_problem(v, cron.schedule_problem)


class FleetSpec(_Model):
    """How `groundctl fleet manifests` schedules this environment (cron, UTC). Unset schedules are spread
    by the environment's name so a fleet's jobs do not all start in the same minute."""
    drift_schedule: Optional[str] = None
    rebuild_drill_schedule: Optional[str] = None
    state_loss_drill_schedule: Optional[str] = None
    state_loss_layer: Literal["backend", "network", "cluster", "flux"] = "network"
    # Drills destroy and recreate; a production environment runs them on a schedule only when it says so.
    scheduled_drills_in_production: bool = False
    # The role `fleet status` assumes to read this environment's state bucket (a fleet across accounts);
    # unset: the caller's own credentials.
    status_role_arn: Optional[str] = None
    # The memory limit of the drift and rehearsal pods (a Kubernetes quantity in Mi or Gi); unset: what
    # `fleet manifests --memory-limit` gives, by default 1Gi. A large environment's refresh-preview needs more.
    memory_limit: Optional[str] = None

    @field_validator("drift_schedule", "rebuild_drill_schedule", "state_loss_drill_schedule")
    @classmethod
    def _cron(cls, v: Optional[str]) -> Optional[str]:
        return _unless_problem(v, cron.schedule_problem)

    @field_validator("memory_limit")
    @classmethod
    def _memory(cls, v: Optional[str]) -> Optional[str]:
        return _unless_problem(v, memory_problem)

    @field_validator("status_role_arn")
    @classmethod
    def _role(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not _ROLE_ARN.match(v):
            raise ValueError(f"'{v}' is not an IAM role ARN; use arn:aws:iam::<account>:role/<name>")
        return v


class EnvironmentSpec(_Model):
    name: str
    production: bool = False
    aws: AwsSpec
    backend: BackendSpec
    network: NetworkSpec
    cluster: ClusterSpec
    flux: FluxSpec
    recovery: RecoverySpec
    fleet: FleetSpec = FleetSpec()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _ENV_NAME.fullmatch(v):
            raise ValueError(
                f"'{v}' is not a usable environment name; use lowercase letters, digits and hyphens "
                "(it becomes the Pulumi stack name)"
            )
        return v

    @model_validator(mode="after")
    def _production_rules(self, info: ValidationInfo) -> "EnvironmentSpec":
        return _holds(self, rules.environment_problem(self, (info.context or {}).get("flux_lock", "")))

    @property
    def flux_path(self) -> str:
        return self.flux.path or f"clusters/{self.name}"

    @property
    def endpoint_public_access(self) -> bool:
        """Off by default in production, on by default elsewhere."""
        if self.cluster.endpoint_public_access is None:
            return not self.production
        return self.cluster.endpoint_public_access

    @property
    def uses_emulator(self) -> bool:
        return self.aws.endpoint_url is not None

