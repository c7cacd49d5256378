"""Kubernetes manifests that run groundctl on a schedule for every environment of a fleet. Pure.

Per environment: a drift CronJob and a restore rehearsal CronJob (record role: each writes its record only)
and, where drills may run, one CronJob per drill (apply role); bootstrap/roles.py says what each role may do.
Jobs never overlap (`concurrencyPolicy: Forbid`), are bounded in retries and time, run under the `restricted`
Pod Security Standard, and read their spec from one ConfigMap that holds every environment's file unchanged
(each pod mounts only its own), and their Flux manifest from the image or a ConfigMap, never the network
(recovery/fleet/flux_manifest.py). Credentials come from IRSA: each role is a ServiceAccount annotated with
the spec's role ARN; nothing secret is in the manifests (an ssh:// Flux repository's deploy key and known
hosts are read from a Secret the operator creates).

Unset schedules are spread over the hour (and the small hours) by a hash of the environment's name,
so two hundred environments do not hit their state buckets and AWS in the same minute.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional

from bootstrap.kit.errors import BadInput
from bootstrap.roles import BY_NAME as ROLES
from bootstrap.spec.models import memory_mebibytes, memory_problem
from recovery.fleet import flux_manifest

IRSA_ANNOTATION = "eks.amazonaws.com/role-arn"
CONFIGMAP = "groundctl-specs"
SPECS_DIR = "/work/environments"    # the image's working directory is /work: `environments/` is found there
SCRATCH = "/tmp"
UID = 10001                         # the image's non-root user (Dockerfile)
CONFIGMAP_LIMIT = 1024 * 1024       # Kubernetes refuses a ConfigMap over 1 MiB
DRIFT_DEADLINE = 30 * 60            # a refresh-preview of four layers; a hung one is killed, not waited on
DRIFT_BACKOFF = 2                   # drift only reads: a retry after a transient failure is harmless
REHEARSAL_DEADLINE = 45 * 60        # every layer restored into scratch, decrypted and refresh-previewed
DRILL_BACKOFF = 0                   # a drill destroys and recreates: a failed one is looked at, never re-run
LABELS = {"app.kubernetes.io/name": "groundctl", "app.kubernetes.io/managed-by": "groundctl-fleet"}
# The exit codes that are an answer, already printed and recorded: a retry would only give it again, so the Job
# fails at once. All: a finding (drift, a failed or drifted drill or rehearsal: 1), bad input (2), a refusal (3);
# a rehearsal's 5 is "nothing deployed to rehearse", recorded as such. Other failures (4: AWS or the engine
# unreachable; a killed pod) are retried within backoffLimit.
ANSWERS = {"drift": [1, 2, 3], "rehearsal": [1, 2, 3, 5], "drill": [1, 2, 3]}
# Jobs that only read (and write their record) are retried after their pod was disrupted (evicted, preempted,
# its node drained) without it counting against backoffLimit; a drill destroys, so a disrupted one is looked at.
RETRIED_AFTER_DISRUPTION = ("drift", "rehearsal")
RESOURCES = {
    "drift": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    "rehearsal": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
    "drill": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}},
}
# The kinds whose memory limit the spec (fleet.memory_limit) or `fleet manifests --memory-limit` sets.
SIZED = ("drift", "rehearsal")


# The Secret each environment with an ssh:// Flux repository needs: environment variable → key (Flux's names).
FLUX_SECRET_KEYS = {"GROUNDCTL_FLUX_DEPLOY_KEY": "identity", "GROUNDCTL_FLUX_KNOWN_HOSTS": "known_hosts"}


def flux_secret_name(environment: str) -> str:
    return f"{environment}-flux-deploy-key"


@dataclass(frozen=True)
class SpecFile:
    """An environment spec as validated, and its file as written (what the ConfigMap carries)."""
    spec: object   # EnvironmentSpec
    filename: str
    text: str
    manifest_text: Optional[str] = None  # the repository's Flux manifest a relative flux.manifest_path names
    # For a spec that names no manifest: the checked copy the repository's pins lock names (bootstrap.flux.locked),
    # and the lock's text, which the pod reads beside its spec to find the copy and its digest.
    locked_path: Optional[str] = None
    lock_text: Optional[str] = None

    @property
    def flux_manifest_path(self) -> Optional[str]:
        return flux_manifest.written_path(self.text) or self.locked_path

    def flux_manifest_mount(self) -> Optional[tuple[dict, dict]]:
        """(volume, volumeMount) of a repository manifest; None for one in the image."""
        written = self.flux_manifest_path
        return flux_manifest.mount(written, self.manifest_text) if written else None

    def lock_mount(self) -> Optional[tuple[dict, dict]]:
        """(volume, volumeMount) of the pins lock, for a spec whose manifest the lock names; None otherwise."""
        if not (self.locked_path and self.lock_text is not None and flux_manifest.written_path(self.text) is None):
            return None
        return flux_manifest.lock_mount()


@dataclass(frozen=True)
class Rendered:
    manifests: tuple[dict, ...]
    notes: tuple[str, ...]       # environments (or jobs) left out, and why


def _spread(name: str) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)


def schedules(spec) -> dict[str, str]:
    """The cron schedule (UTC) of each job: the spec's, or one spread by the environment's name."""
    h = _spread(spec.name)
    minute, hour = h % 60, 1 + (h // 60) % 4
    fleet = spec.fleet
    return {"drift": fleet.drift_schedule or f"{minute} * * * *",
            # Different days, so the two drills of one environment never wait on each other's lock.
            "rebuild-cluster": fleet.rebuild_drill_schedule or f"{minute} {hour} * * 6",
            "state-loss": fleet.state_loss_drill_schedule or f"{minute} {hour} * * 0",
            # Daily, half an hour off the drills' minute: a rehearsal waits on no lock, but shares the bucket.
            "rehearsal": spec.recovery.rehearsal_schedule or f"{(minute + 30) % 60} {hour} * * *"}


def drill_deadline(rto_minutes: int) -> int:
    """Seconds a drill Job may run: twice the RTO (teardown and rebuild) plus a quarter hour of slack."""
    return rto_minutes * 60 * 2 + 900


def _meta(name: str, namespace: str, environment: str | None = None, **extra) -> dict:
    labels = dict(LABELS)
    if environment:
        labels["groundctl/environment"] = environment
    return {"name": name, "namespace": namespace, "labels": labels, **extra}


def namespace(name: str) -> dict:
    pss = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": LABELS | pss}}


def specs_configmap(files: list[SpecFile], ns: str) -> dict:
    data = {f.filename: f.text for f in files}
    size = sum(len(k) + len(v.encode()) for k, v in data.items())
    if size > CONFIGMAP_LIMIT:
        raise BadInput(f"The environment specs add up to {size:,} bytes, more than the {CONFIGMAP_LIMIT:,} a "
                       "Kubernetes ConfigMap may hold. Render the fleet in parts (`groundctl fleet manifests "
                       "--environments DIR` over smaller folders, each with its own --namespace).")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(CONFIGMAP, ns), "data": data}


def service_account(name: str, ns: str, environment: str, role_arn: str) -> dict:
    # IRSA's webhook mounts its own projected web-identity token; the Kubernetes API token is not needed.
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(name, ns, environment, annotations={IRSA_ANNOTATION: role_arn}),
            "automountServiceAccountToken": False}


def resources(kind: str, spec, memory_limit: Optional[str] = None) -> dict:
    """The container's requests and limits: the kind's, with the memory limit of the spec (fleet.memory_limit), else
    the fleet's (`memory_limit`), for the kinds in SIZED; a request never above its limit."""
    out = {part: dict(values) for part, values in RESOURCES[kind].items()}
    limit = (spec.fleet.memory_limit or memory_limit) if kind in SIZED else None
    if limit:
        out["limits"]["memory"] = limit
        if memory_mebibytes(limit) < memory_mebibytes(out["requests"]["memory"]):
            out["requests"]["memory"] = limit
    return out


def _container(image: str, args: list[str], spec_file: SpecFile, kind: str, extra_mounts: list[dict],
               memory_limit: Optional[str] = None) -> dict:
    env = [{"name": "HOME", "value": SCRATCH},
           {"name": "TMPDIR", "value": SCRATCH},
           {"name": "PULUMI_HOME", "value": f"{SCRATCH}/.pulumi"},
           {"name": "PULUMI_SKIP_UPDATE_CHECK", "value": "true"},
           {"name": "AWS_REGION", "value": spec_file.spec.aws.region}]
    if spec_file.spec.flux.repository_url.startswith("ssh://"):
        # The flux layer of an ssh:// repository needs both, for a drift check as for a drill. Not optional: a
        # missing Secret keeps the pod from starting (CreateContainerConfigError), seen at once, instead of a job
        # that runs and fails at its flux layer. The Secret is the operator's (runbook).
        secret = flux_secret_name(spec_file.spec.name)
        env += [{"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
                for var, key in FLUX_SECRET_KEYS.items()]
    mounts = [{"name": "spec", "mountPath": SPECS_DIR, "readOnly": True}, {"name": "scratch", "mountPath": SCRATCH}]
    return {
        "name": "groundctl", "image": image, "imagePullPolicy": "IfNotPresent", "args": args,
        "workingDir": flux_manifest.WORKDIR, "env": env, "resources": resources(kind, spec_file.spec, memory_limit),
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": mounts + extra_mounts,
    }


def failure_policy(kind: str) -> dict:
    """The Job's podFailurePolicy (it needs the pod's restartPolicy Never). The disruption rule comes first, so a
    disrupted pod is never taken for an answer, whatever it exited with."""
    disrupted = [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]
    return {"rules": (disrupted if kind in RETRIED_AFTER_DISRUPTION else []) + [{"action": "FailJob", "onExitCodes": {
        "containerName": "groundctl", "operator": "In", "values": ANSWERS[kind]}}]}


def cronjob(name: str, ns: str, spec_file: SpecFile, *, image: str, schedule: str, args: list[str],
            service_account_name: str, kind: str, backoff_limit: int, deadline: int,
            memory_limit: Optional[str] = None) -> dict:
    environment = spec_file.spec.name
    volume, mount = spec_file.flux_manifest_mount() or (None, None)
    lock_volume, lock_mount = spec_file.lock_mount() or (None, None)
    pod = {
        "serviceAccountName": service_account_name,
        "automountServiceAccountToken": False,
        "restartPolicy": "Never",
        "securityContext": {"runAsNonRoot": True, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [_container(image, args, spec_file, kind, [m for m in (mount, lock_mount) if m],
                                  memory_limit)],
        "volumes": [{"name": "spec", "configMap": {"name": CONFIGMAP, "items": [
                        {"key": spec_file.filename, "path": f"{environment}.yaml"}]}},
                    {"name": "scratch", "emptyDir": {"sizeLimit": "2Gi"}}] + [v for v in (volume, lock_volume) if v],
    }
    return {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": _meta(name, ns, environment),
        "spec": {
            "schedule": schedule, "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
            # A run missed by more than this is skipped, not started late on top of the next one.
            "startingDeadlineSeconds": 600,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 3,
            "jobTemplate": {"metadata": {"labels": LABELS | {"groundctl/environment": environment}},
                            "spec": {"backoffLimit": backoff_limit, "activeDeadlineSeconds": deadline,
                                     "podFailurePolicy": failure_policy(kind),
                                     "ttlSecondsAfterFinished": 7 * 24 * 3600,
                                     "template": {"metadata": {"labels": LABELS | {
                                         "groundctl/environment": environment, "groundctl/job": kind}},
                                                  "spec": pod}}},
        },
    }


def _missing_roles(files: list[SpecFile]) -> list[str]:
    out = []
    for f in files:
        s = f.spec
        if not s.aws.record_role_arn:
            out.append(f"{f.filename}: aws.record_role_arn (drift and the restore rehearsal run with it, and record "
                       "their results)")
        if drills_allowed(s) and not s.aws.apply_role_arn:
            out.append(f"{f.filename}: aws.apply_role_arn (the drills run with it)")
    return out


def drills_allowed(spec) -> bool:
    return not spec.production or spec.fleet.scheduled_drills_in_production


def render(files: list[SpecFile], *, image: str, ns: str = "groundctl", memory_limit: Optional[str] = None,
           drift: bool = True) -> Rendered:
    """Every manifest of the fleet, in apply order (namespace, ConfigMap, ServiceAccounts, CronJobs). `memory_limit`:
    the drift and rehearsal pods' limit where a spec sets none; `drift=False` leaves the drift CronJobs out (the
    drift checks run elsewhere, e.g. `ci init`'s workflow: both write the same records)."""
    if memory_limit is not None and (problem := memory_problem(memory_limit)):
        raise BadInput(f"--memory-limit {problem}.")
    notes: list[str] = []
    runnable = []
    for f in sorted(files, key=lambda f: f.spec.name):
        if f.spec.aws.endpoint_url is not None:
            notes.append(f"{f.spec.name}: left out: it targets an AWS emulator (aws.endpoint_url), which a "
                         "cluster's CronJob cannot reach")
        else:
            runnable.append(f)
    if not runnable:
        raise BadInput("No environment can be scheduled: every spec found targets an AWS emulator (or none was "
                       "found). Point --environments at the folder holding the fleet's specs.")
    unreadable = [p for f in runnable
                  if (p := flux_manifest.problem(f.spec.name, f.flux_manifest_path, f.manifest_text))]
    if unreadable:
        raise BadInput("The fleet's pods read Flux's install manifest from the image or a ConfigMap, never the "
                       f"network: {'; '.join(unreadable)}.")
    missing = _missing_roles(runnable)
    if missing:
        raise BadInput("Scheduled runs get their AWS credentials from IRSA, so each environment needs the role "
                       f"its jobs run with; missing: {'; '.join(missing)}. Add the role ARNs to the specs (or, for "
                       "a production environment, leave fleet.scheduled_drills_in_production false).")
    for f in runnable:
        if (f.flux_manifest_path or "").startswith("/"):
            notes.append(f"{f.spec.name}: its jobs read the Flux manifest {f.flux_manifest_path} from the image: "
                         "build the image with the file there, or the flux layer stops naming it")
        if f.spec.flux.repository_url.startswith("ssh://"):
            notes.append(f"{f.spec.name}: its jobs read the Secret {flux_secret_name(f.spec.name)} (keys "
                         f"{', '.join(FLUX_SECRET_KEYS.values())}) for its ssh:// Flux repository; create it before "
                         "the first run, or its pods will not start")
        if f.spec.aws.profile:
            notes.append(f"{f.spec.name}: its spec names the AWS profile '{f.spec.aws.profile}', which does not exist in "
                         "the pod: its jobs will fail until aws.profile is removed (IRSA provides the credentials)")
    if not drift:
        notes.append("no drift CronJobs (--no-drift): run the drift checks elsewhere (`groundctl ci init`'s drift "
                     "workflow); set each spec's fleet.drift_schedule to that schedule, so that `fleet status` expects "
                     "drift records at its pace")
    out: list[dict] = [namespace(ns), specs_configmap(runnable, ns)]
    out += flux_manifest.configmaps([f.manifest_text for f in runnable if f.flux_manifest_mount()], ns, _meta)
    lock = next((f.lock_text for f in runnable if f.lock_mount()), None)
    if lock is not None:
        out.append(flux_manifest.lock_configmap(lock, ns, _meta))
    jobs: list[dict] = []
    for f in runnable:
        s, when = f.spec, schedules(f.spec)
        record = ROLES["record"].fleet_service_account.format(env=s.name)
        out.append(service_account(record, ns, s.name, s.aws.record_role_arn))
        if drift:
            jobs.append(cronjob(f"drift-{s.name}", ns, f, image=image, schedule=when["drift"],
                                args=["drift", s.name, "--record", "--json"], service_account_name=record,
                                kind="drift", backoff_limit=DRIFT_BACKOFF, deadline=DRIFT_DEADLINE,
                                memory_limit=memory_limit))
        # A rehearsal writes nothing but its record (scratch backend, read-only preview): production too.
        jobs.append(cronjob(f"rehearse-{s.name}", ns, f, image=image, schedule=when["rehearsal"],
                            args=["state", "rehearse", s.name, "--record", "--json"], service_account_name=record,
                            kind="rehearsal", backoff_limit=DRIFT_BACKOFF, deadline=REHEARSAL_DEADLINE,
                            memory_limit=memory_limit))
        if not drills_allowed(s):
            notes.append(f"{s.name}: no scheduled drills: it is a production environment (set "
                         "fleet.scheduled_drills_in_production: true in its spec to opt in)")
            continue
        apply = ROLES["apply"].fleet_service_account.format(env=s.name)
        out.append(service_account(apply, ns, s.name, s.aws.apply_role_arn))
        deadline = drill_deadline(s.recovery.rto_minutes)
        reports = ["--yes", "--json", "--out", f"{SCRATCH}/drill-reports"]
        rebuild = ["drill", "rebuild-cluster", s.name, *reports] + (["--i-mean-production"] if s.production else [])
        jobs.append(cronjob(f"drill-rebuild-{s.name}", ns, f, image=image, schedule=when["rebuild-cluster"],
                            args=rebuild, service_account_name=apply, kind="drill",
                            backoff_limit=DRILL_BACKOFF, deadline=deadline))
        if s.production:  # the state-loss drill itself refuses production, whatever the spec says
            notes.append(f"{s.name}: no scheduled state-loss drill: it never runs against production")
            continue
        jobs.append(cronjob(f"drill-state-loss-{s.name}", ns, f, image=image, schedule=when["state-loss"],
                            args=["drill", "state-loss", s.name, "--layer", s.fleet.state_loss_layer, *reports],
                            service_account_name=apply, kind="drill", backoff_limit=DRILL_BACKOFF,
                            deadline=deadline))
    return Rendered(tuple(out + jobs), tuple(notes))


def to_yaml(manifests: tuple[dict, ...]) -> str:
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _text(dumper, value: str):
        # The specs stay readable in the ConfigMap: multi-line strings as literal blocks.
        style = "|" if "\n" in value and not any(c in value for c in "\t\r") and value == value.rstrip(" ") else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _text)
    return "".join("---\n" + yaml.dump(m, Dumper=_Dumper, sort_keys=False, width=120) for m in manifests)
