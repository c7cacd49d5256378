"""The fleet pod's journey: the CronJobs' containers (drift, the rebuild drill, the restore rehearsal), as
`groundctl fleet manifests` writes them, run under their securityContext without building the image.

In a mount and network namespace of its own: the host's root read-only (readOnlyRootFilesystem), the image's
folders (/opt: the Python, groundctl, the pinned CLI and the plugins, as the Dockerfile lays them out) read-only,
the manifest's volumes mounted at its paths (the specs and Flux-manifest ConfigMaps read-only, the scratch
emptyDir writable), the process started with the manifest's uid, gid and fsGroup through setpriv with no
capabilities and no new privileges, in its workingDir, with its env and nothing else, and no network beyond
loopback. AWS is an emulator on that loopback (a free port): the spec the ConfigMap holds gets the one line that
points at it (aws.endpoint_url; the fleet renders no emulator spec), and the environment was born by hand before
the pod ran.
The layer programs are the engine tier's stand-ins (tests/journey.py), the provider plugins stand-in binaries
(they cannot be had offline), put where the image puts them, and /etc/passwd and /etc/group hold the image's
user as its Dockerfile adds it.

Each pod reaches its honest outcome and writes its record in the state bucket, and nothing outside its scratch
volume (every other folder is read-only: a write there would fail the run): `drift --record` finds the
environment clean; the rebuild drill destroys and recreates the cluster layer and, with no Kubernetes API on the
emulator, skips the Flux phases and says the drill is unverified (exit 1), its report files in the scratch volume
(--out); `state rehearse --record` proves every deployed layer restorable, touching no stack.

The image's Python is the one running the tests, with the packages of the environment the tests run in: in a
virtual environment (the README's install), its site-packages take the place of the base interpreter's, as the
Dockerfile installs groundctl's dependencies into the image's own Python. Everything a run starts (the emulator,
the pod) is in a PID namespace of its own, which ends with the run on every path: a failed script, a timeout, an
interrupted pytest.

Marked `engine`: the real CLI. Skipped with the reason where namespaces or setpriv are not available."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path

import pytest
import yaml

from tests.dockerfile import shipped_dockerfile
from tests.conftest import REPO
from tests.journey import pinned_cli, stand_in_stacks

CLI, NO_CLI = pinned_cli()
ENV = "pod"
RECORDS = "pod-records"
PASSPHRASE = "pod-journey-passphrase-T7x2"


def _namespaces() -> str:
    """Why the pod cannot be modelled here, or '' when it can."""
    if os.geteuid() != 0:
        return "needs root: a mount namespace whose root is read-only and setpriv to the manifest's uid"
    for tool in ("unshare", "setpriv", "ip"):
        if not shutil.which(tool):
            return f"needs {tool}"
    done = subprocess.run([*NAMESPACES, "true"], capture_output=True, text=True, timeout=60)
    return "" if done.returncode == 0 else f"{' '.join(NAMESPACES)} is refused here: {done.stderr.strip()}"


# Mounts, network and PIDs of its own: whatever the script starts dies with it (the kernel ends every process of a
# PID namespace when its first one ends, and --kill-child ends that one when unshare itself is killed).
NAMESPACES = ("unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc")


def in_namespaces(script: str, timeout: float) -> subprocess.CompletedProcess:
    """`script` run by bash in NAMESPACES; on a timeout (or any other way out) nothing it started is left."""
    proc = subprocess.Popen([*NAMESPACES, "bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _free_port() -> int:
    # Free on this host, and so in the run's own (empty) network namespace too; never a fixed one.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def image_python() -> tuple[Path, list[tuple[Path, str]]]:
    """The interpreter the image's /opt/python is made of, and what is mounted over it: in a virtual environment,
    its site-packages over the base's (which lacks what the venv installed: pulumi, boto3, moto)."""
    base = Path(sys.base_prefix)
    if Path(sys.prefix) == base:
        return base, []
    sites = sorted({Path(sysconfig.get_path(kind)) for kind in ("purelib", "platlib")})
    return base, [(site, f"/opt/python/{site.relative_to(sys.prefix)}") for site in sites]


NO_NAMESPACES = _namespaces()
pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800),
              pytest.mark.skipif(CLI is None, reason=NO_CLI or "needs the pinned Pulumi CLI"),
              pytest.mark.skipif(bool(NO_NAMESPACES), reason=NO_NAMESPACES)]


def _fleet(infra: Path) -> dict:
    """The CronJobs `groundctl fleet manifests` renders for the environment, by name, and the ConfigMaps they
    mount."""
    from groundctl.fleet import _spec_files
    from recovery.fleet import manifests as fm

    rendered = fm.render(_spec_files(infra / "environments"), image="registry.example/groundctl@sha256:" + "0" * 64)
    by_kind = {(m["kind"], m["metadata"]["name"]): m for m in rendered.manifests}
    return {"cronjobs": {name: m for (kind, name), m in by_kind.items() if kind == "CronJob"},
            "configmaps": {name: m for (kind, name), m in by_kind.items() if kind == "ConfigMap"}}


def _pod(cronjob: dict) -> dict:
    return cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def _image(stage: Path, releases) -> dict:
    """What the Dockerfile puts in the image, staged to be mounted read-only: the plugins' binaries (from the
    tarballs the local release mirror serves, which the image's install step checks against the lock), the stand-in programs, and /etc/passwd and /etc/group with
    the user its groupadd and useradd lines make (Pulumi's destroy and up look their user up by uid)."""
    import re
    import tarfile

    plugins = stage / "plugins"
    plugins.mkdir(parents=True)
    from bootstrap.engine.versions import PROVIDER_PLUGINS
    from bootstrap.pins.artifacts import LINUX_AMD64, Want, plugin_name

    for release in PROVIDER_PLUGINS:
        with tarfile.open(releases.mirror.file(Want(plugin_name(release.name), release.version, LINUX_AMD64))) as tar:
            tar.extractall(plugins, filter="data")
    dockerfile = shipped_dockerfile()
    group = re.search(r"groupadd --gid (\d+) (\S+)", dockerfile)
    user = re.search(r"useradd --uid (\d+) --gid (\d+) --home-dir (\S+) .*--shell (\S+) (\S+)", dockerfile)
    assert group and user, "the Dockerfile's groupadd and useradd lines"
    etc = stage / "etc"
    etc.mkdir()
    (etc / "passwd").write_text(Path("/etc/passwd").read_text()
                                + f"{user[5]}:x:{user[1]}:{user[2]}::{user[3]}:{user[4]}\n")
    (etc / "group").write_text(Path("/etc/group").read_text() + f"{group[2]}:x:{group[1]}:\n")
    return {"plugins": plugins, "stacks": stand_in_stacks(stage / "stacks"), "etc": etc, "uid": int(user[1])}


def _volumes(pod: dict, configmaps: dict, stage: Path, spec_edit) -> tuple[list[str], Path]:
    """Shell lines mounting the pod's volumes at its container's paths; the scratch folder (the emptyDir)."""
    container = pod["containers"][0]
    volumes = {v["name"]: v for v in pod["volumes"]}
    lines, scratch = [], None
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "emptyDir" in volume:
            scratch = stage / f"volume-{mount['name']}"
            scratch.mkdir()
            os.chown(scratch, pod["securityContext"]["runAsUser"], pod["securityContext"]["fsGroup"])
            source = scratch
        else:
            data = configmaps[volume["configMap"]["name"]]["data"]
            source = stage / f"volume-{mount['name']}"
            source.mkdir()
            for item in volume["configMap"]["items"]:
                text = data[item["key"]]
                (source / item["path"]).write_text(spec_edit(text) if item["key"] == f"{ENV}.yaml" else text)
            if mount.get("subPath"):
                source = source / mount["subPath"]
        target = mount["mountPath"]
        make = f"mkdir -p {os.path.dirname(target)} && touch {target}" if source.is_file() else f"mkdir -p {target}"
        ro = "" if not mount.get("readOnly") else f" && mount -o remount,bind,ro {target}"
        lines.append(f"{make} && mount --bind {source} {target}{ro}")
    assert scratch is not None, "the pod has no writable volume"
    return lines, scratch


def _script(cronjob: dict, configmaps: dict, stage: Path, image: dict, port: int) -> tuple[str, Path]:
    pod = _pod(cronjob)
    container = pod["containers"][0]
    context, security = pod["securityContext"], container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"]["drop"] == ["ALL"] and context["runAsNonRoot"]
    assert context["runAsUser"] == image["uid"]  # the image's user

    endpoint = f"http://127.0.0.1:{port}"

    def pointed(text: str) -> str:
        data = yaml.safe_load(text)
        data["aws"]["endpoint_url"] = endpoint
        return yaml.safe_dump(data, sort_keys=False)

    mounts, scratch = _volumes(pod, configmaps, stage, pointed)
    python, site_packages = image_python()
    packages = "".join(f'mount --bind "{site}" "{target}" && mount -o remount,bind,ro "{target}"\n'
                       for site, target in site_packages)
    image_path = "/opt/pulumi/bin:/opt/pulumi/plugins:/opt/python/bin:/usr/bin:/bin"
    # What the image's environment (Dockerfile ENV) and the emulator's stand-ins add to the manifest's env.
    runtime = {"PATH": image_path, "LD_LIBRARY_PATH": "/opt/python/lib", "PYTHONDONTWRITEBYTECODE": "1",
               "PYTHONUNBUFFERED": "1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE, "ENGINE_TIER_RECORDS_BUCKET": RECORDS,
               "GROUNDCTL_JOURNEY_STACKS": "/opt/stacks", "PYTHONPATH": "/opt/groundctl/tests/engine_programs"}
    declared = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert not [e for e in container["env"] if "valueFrom" in e]  # an https Flux repository: no Secret
    pod_env = " ".join(f"{k}={json.dumps(v)}" for k, v in {**runtime, **declared}.items())
    entry = "/opt/python/bin/python /opt/groundctl/tests/journey_groundctl.py"  # the image's `groundctl`
    args = " ".join(json.dumps(a) for a in container["args"])
    by_hand = (f"cd /srv/infra && env -i {' '.join(f'{k}={json.dumps(v)}' for k, v in runtime.items())} "
               "HOME=/srv TMPDIR=/srv PULUMI_HOME=/srv/.pulumi GROUNDCTL_JOURNEY_BY_HAND=1 "
               f"{entry} up {ENV} --yes >/srv/by-hand.out 2>/srv/by-hand.err "
               "|| { cat /srv/by-hand.out /srv/by-hand.err; exit 97; }")
    # What the bucket holds, read by the operator's side: groundctl's records, every stack object's version ids
    # (what a run wrote to its stacks) and the stand-in programs' "cloud" (the records bucket).
    inspect = ("import boto3, json, sys, yaml; s3 = boto3.client('s3', endpoint_url=%r, region_name='us-east-1', "
               "aws_access_key_id='testing', aws_secret_access_key='testing'); bucket = yaml.safe_load(open("
               "'/srv/infra/environments/%s.yaml'))['backend']['bucket']; keys = lambda b, p: [o['Key'] for page in "
               "s3.get_paginator('list_objects_v2').paginate(Bucket=b, Prefix=p) for o in page.get('Contents', [])]; "
               "stacks = {}; [stacks.setdefault(v['Key'], []).append(v['VersionId']) for page in "
               "s3.get_paginator('list_object_versions').paginate(Bucket=bucket, Prefix='.pulumi/stacks/') "
               "for v in page.get('Versions', []) + page.get('DeleteMarkers', [])]; print(sys.argv[1] + ' ' + "
               "json.dumps({'records': keys(bucket, '.groundctl/'), 'stacks': stacks, 'cloud': keys(%r, '')}))"
               % (endpoint, ENV, RECORDS))
    script = f"""set -eu
mount --make-rprivate /
ip link set lo up
# The image: its Python, groundctl, the pinned CLI, the plugins and its user (/etc/passwd, /etc/group), read-only.
mount -t tmpfs -o mode=755 image-opt /opt
mkdir -p /opt/python /opt/groundctl /opt/pulumi/bin /opt/pulumi/plugins /opt/stacks
for pair in "{python}:/opt/python" "{REPO}:/opt/groundctl" "{CLI}:/opt/pulumi/bin" \\
            "{image['plugins']}:/opt/pulumi/plugins" "{image['stacks']}:/opt/stacks" \\
            "{image['etc']}/passwd:/etc/passwd" "{image['etc']}/group:/etc/group"; do
  mount --bind "${{pair%%:*}}" "${{pair#*:}}" && mount -o remount,bind,ro "${{pair#*:}}"
done
{packages}mount -o remount,ro /opt
# The operator's side, before the pod: the emulator on loopback, and the environment born by hand.
mount -t tmpfs -o mode=700 operator /srv
mkdir -p /srv/infra/environments
cp {stage}/volume-spec/{ENV}.yaml /srv/infra/environments/
LD_LIBRARY_PATH=/opt/python/lib /opt/python/bin/python -m moto.server -H 127.0.0.1 -p {port} >/srv/moto.log 2>&1 &
trap "kill $! 2>/dev/null" EXIT
for i in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.1; done
LD_LIBRARY_PATH=/opt/python/lib /opt/python/bin/python -c "import boto3; boto3.client('s3', \\
  endpoint_url='{endpoint}', region_name='us-east-1', aws_access_key_id='t', aws_secret_access_key='t'\\
  ).create_bucket(Bucket='{RECORDS}')"
{by_hand}
# The pod: /work as the image has it, with the manifest's volumes; then the root read-only.
mount -t tmpfs -o mode=755 image-work /work
{chr(10).join(mounts)}
mount -o remount,ro /work
ls -A /dev/shm > /srv/shm.before
LD_LIBRARY_PATH=/opt/python/lib /opt/python/bin/python -c "{inspect}" BEFORE
mount -o remount,bind,ro /
set +e
cd {container['workingDir']}
setpriv --reuid {context['runAsUser']} --regid {context['runAsGroup']} --groups {context['fsGroup']} \\
  --no-new-privs --inh-caps=-all --bounding-set=-all \\
  env -i {pod_env} {entry} {args} >/srv/pod.out 2>/srv/pod.err
echo "POD_EXIT $?"
set -e
ls -A /dev/shm | diff /srv/shm.before - >/dev/null && echo "SHM_UNCHANGED"
echo "POD_STDOUT $(base64 -w0 /srv/pod.out)"
echo "POD_STDERR $(base64 -w0 /srv/pod.err)"
LD_LIBRARY_PATH=/opt/python/lib /opt/python/bin/python -c "{inspect}" AFTER
"""
    return script, scratch


@pytest.fixture
def fleet(tmp_path, release_mirror):
    infra = tmp_path / "infra"
    (infra / "environments").mkdir(parents=True)
    (infra / "flux").mkdir()
    shutil.copy(REPO / "tests" / "data" / "flux" / "install.yaml", infra / "flux" / "install.yaml")
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["name"] = ENV
    del spec["aws"]["endpoint_url"]
    spec["aws"].update({f"{r}_role_arn": f"arn:aws:iam::123456789012:role/groundctl-{r}"
                        for r in ("plan", "record", "apply")})
    spec["backend"].update(bucket=f"pod-{uuid.uuid4().hex[:16]}", kms_alias="alias/pod-state")
    spec["flux"]["manifest_path"] = "flux/install.yaml"
    (infra / "environments" / f"{ENV}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    stage = tmp_path / "stage"
    stage.mkdir()
    os.chmod(tmp_path, 0o755)
    return _fleet(infra), stage, _image(stage, release_mirror)


def _run(fleet, name: str, args: list[str]) -> dict:
    """The CronJob `name`'s container, whose args must be `args`, run under its securityContext: its exit code,
    stdout and stderr, the bucket before and after (see `_script`), and what it wrote to its scratch volume (which
    must be all it wrote, owned by the pod's user, holding Pulumi's home)."""
    import base64

    manifests, stage, image = fleet
    cronjob = manifests["cronjobs"][name]
    assert _pod(cronjob)["containers"][0]["args"] == args
    script, scratch = _script(cronjob, manifests["configmaps"], stage, image, _free_port())
    done = in_namespaces(script, timeout=1700)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].isupper()
                and " " in line)
    out, err = (base64.b64decode(said[k]).decode() for k in ("POD_STDOUT", "POD_STDERR"))
    assert "SHM_UNCHANGED" in done.stdout.splitlines()
    written = list(scratch.rglob("*"))
    assert any(p.name == ".pulumi" for p in written)
    assert {p.stat().st_uid for p in written} == {_pod(cronjob)["securityContext"]["runAsUser"]}
    return {"exit": int(said["POD_EXIT"]), "out": out, "err": err, "before": json.loads(said["BEFORE"]),
            "after": json.loads(said["AFTER"]), "scratch": scratch}


def _new(run: dict, what: str) -> list[str]:
    """The keys of `what` (records, cloud) the pod added."""
    return sorted(set(run["after"][what]) - set(run["before"][what]))


def _running(marker: str) -> list[str]:
    """The host's processes whose command line holds `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes():
                found.append(proc.name)
        except OSError:
            pass  # ended while looking
    return found


def _gone(marker: str) -> bool:
    import time

    ends = time.monotonic() + 60  # the kernel ends a PID namespace's processes at once; a loaded host is slow to
    while _running(marker) and time.monotonic() < ends:
        time.sleep(0.1)
    return not _running(marker)


def test_what_a_run_starts_ends_with_it_whether_it_fails_or_times_out():
    """The emulator a run starts in the background (here a stand-in with a marked command line) does not outlive
    it: not when the script fails with it running, nor when the run is cut off by its timeout."""
    marker = f"pod-journey-{uuid.uuid4().hex}"
    started = (f"(exec -a {marker} sleep 600) & for i in $(seq 1200); do pgrep -f {marker} >/dev/null && break; "
               "sleep 0.05; done; ")
    done = in_namespaces(started + "echo UP; exit 3", timeout=120)
    assert done.returncode == 3 and "UP" in done.stdout, done.stderr
    assert _gone(marker), _running(marker)
    with pytest.raises(subprocess.TimeoutExpired):
        in_namespaces(started + "sleep 600", timeout=5)
    assert _gone(marker), _running(marker)


def test_the_drift_cronjobs_container_records_a_clean_environment_under_its_security_context(fleet):
    run = _run(fleet, f"drift-{ENV}", ["drift", ENV, "--record", "--json"])
    assert run["exit"] == 0, run["out"][-3000:] + run["err"][-3000:]
    report = json.loads(run["out"])
    assert report["drift"] is False, report
    assert {r["layer"]: r["state"] for r in report["layers"]} == {
        "backend": "clean", "network": "clean", "cluster": "clean", "flux": "skipped"}, report
    assert [k for k in _new(run, "records") if k.startswith(f".groundctl/drift/{ENV}/")], run["after"]
    assert run["after"]["stacks"] == run["before"]["stacks"]


def test_the_rebuild_drill_cronjobs_container_rebuilds_the_cluster_and_records_a_drill_it_cannot_verify(fleet):
    """On the emulator (no Kubernetes API) the drill destroys and recreates the stand-in cluster layer through
    the orchestrator and skips the Flux phases, naming why: its honest verdict is `unverified` (exit 1), and it
    writes its record in the state bucket and its report files in the scratch volume (--out)."""
    from bootstrap.apply.steps import EMULATOR_HAS_NO_KUBERNETES
    from bootstrap.records.layout import drill_report_key, drills_prefix, stack_key
    from recovery.fleet.manifests import SCRATCH

    out_dir = f"{SCRATCH}/drill-reports"
    run = _run(fleet, f"drill-rebuild-{ENV}", ["drill", "rebuild-cluster", ENV, "--yes", "--json", "--out", out_dir])
    assert run["exit"] == 1, run["out"][-3000:] + run["err"][-3000:]
    report = json.loads(run["out"])
    assert {p["name"]: p["status"] for p in report["phases"]} == {
        "preflight": "achieved", "baseline": "achieved", "destroy-flux": "skipped", "destroy-cluster": "achieved",
        "recreate-cluster": "achieved", "recreate-flux": "skipped", "flux-ready": "skipped",
        "verify-kustomizations": "skipped"}, [(p["name"], p["status"], p["message"]) for p in report["phases"]]
    assert {p["message"] for p in report["phases"] if p["status"] == "skipped"} == {
        f"Skipped: {EMULATOR_HAS_NO_KUBERNETES}."}
    assert (report["verdict"]["outcome"], report["verdict"]["reason"]) == ("unverified", "NotFullyVerified")
    assert report["verdict"]["recovery_seconds"] is not None and report["left_half_done"] == []
    # The cluster layer was destroyed and recreated: two orchestrated runs, each a new version of its stack
    # object, and its stand-in resource is back in the "cloud".
    assert len(report["runs"]) == 2, report["runs"]
    cluster = stack_key("cluster", ENV)
    assert len(run["after"]["stacks"][cluster]) >= len(run["before"]["stacks"][cluster]) + 2
    others = [{k: v for k, v in run[when]["stacks"].items() if not k.startswith(cluster.rsplit("/", 1)[0] + "/")}
              for when in ("before", "after")]
    assert others[0] == others[1] and len(others[0]) >= 3, others
    assert f"{ENV}/cluster/cluster" in run["after"]["cloud"] and run["after"]["cloud"] == run["before"]["cloud"]
    # Its record and its rendered report in the state bucket (the scratch volume goes with the pod), and its report
    # files in the scratch volume, where --out put them.
    assert report["written"]["bucket_key"] in _new(run, "records")
    assert report["written"]["bucket_key"].startswith(drills_prefix(ENV))
    assert report["written"]["bucket_reports"] == [drill_report_key(ENV, report["drill_id"], ext)
                                                   for ext in ("md", "svg")]
    assert set(report["written"]["bucket_reports"]) <= set(_new(run, "records"))
    files = report["written"]["files"]
    assert files and all(f.startswith(out_dir + "/") for f in files), files
    assert all((run["scratch"] / Path(f).relative_to(SCRATCH)).is_file() for f in files)


def test_the_rehearse_cronjobs_container_proves_each_layer_and_writes_its_record_only(fleet):
    """The restore rehearsal (record role) restores each layer into a scratch backend in its scratch volume,
    decrypts and previews it: every deployed layer proven (flux skipped on the emulator), each the stack's newest
    state (a measured RPO of 0), one record written, the stacks and the stand-in cloud untouched."""
    from bootstrap.records.layout import rehearsals_prefix
    from recovery.evidence import summary

    run = _run(fleet, f"rehearse-{ENV}", ["state", "rehearse", ENV, "--record", "--json"])
    assert run["exit"] == 0, run["out"][-3000:] + run["err"][-3000:]
    doc = json.loads(run["out"])
    layers = {lay["layer"]: lay for lay in doc["layers"]}
    assert doc["outcome"] == "proven" and {name: lay["outcome"] for name, lay in layers.items()} == {
        "backend": "proven", "network": "proven", "cluster": "proven", "flux": "skipped"}, doc
    assert {name: layers[name]["rpo_seconds"] for name in ("backend", "network", "cluster")} == {
        "backend": 0, "network": 0, "cluster": 0}
    # Its record, and the environment's summary that `fleet status` reads in one call (recovery.evidence.summary).
    summary_key, record = _new(run, "records")  # sorted: drift/ before rehearsals/
    assert summary_key == summary.key(ENV)
    assert record.startswith(rehearsals_prefix(ENV)) and doc["rehearsal_id"] in record, record
    assert run["after"]["stacks"] == run["before"]["stacks"] and run["after"]["cloud"] == run["before"]["cloud"]
