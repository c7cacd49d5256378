"""The fleet pod's journey: a drift CronJob's container, as `groundctl fleet manifests` writes it, run under its
securityContext without building the image.

In a mount and network namespace of its own: the host's root read-only (readOnlyRootFilesystem), the image's
folders (/opt: the Python, groundctl, the pinned CLI and the plugins, as the Dockerfile lays them out) read-only,
the manifest's volumes mounted at its paths (the specs and Flux-manifest ConfigMaps read-only, the scratch
emptyDir writable), the process started with the manifest's uid, gid and fsGroup through setpriv with no
capabilities and no new privileges, in its workingDir, with its env and nothing else, and no network beyond
loopback. AWS is an emulator on that loopback: the spec the ConfigMap holds gets the one line that points at it
(aws.endpoint_url; the fleet renders no emulator spec), and the environment was born by hand before the pod ran.
The layer programs are the engine tier's stand-ins (tests/journey.py), the provider plugins stand-in binaries
(they cannot be had offline), put where the image puts them.

The pod's `drift --record` reaches its honest outcome (clean), writes its record in the state bucket, and writes
nothing outside its scratch volume (every other folder is read-only: a write there would fail the run).

Marked `engine`: the real CLI. Skipped with the reason where namespaces or setpriv are not available."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.journey import pinned_cli, stand_in_stacks
from tests.plugin_releases import make_tarball

CLI, NO_CLI = pinned_cli()
ENV = "pod"
PORT = 4566
RECORDS = "pod-records"
PASSPHRASE = "pod-journey-passphrase-T7x2"


def _namespaces() -> str:
    """Why the pod cannot be modelled here, or '' when it can."""
    if os.geteuid() != 0:
        return "needs root: a mount namespace whose root is read-only and setpriv to the manifest's uid"
    for tool in ("unshare", "setpriv", "ip"):
        if not shutil.which(tool):
            return f"needs {tool}"
    done = subprocess.run(["unshare", "-m", "-n", "true"], capture_output=True, text=True, timeout=60)
    return "" if done.returncode == 0 else f"unshare -m -n is refused here: {done.stderr.strip()}"


NO_NAMESPACES = _namespaces()
pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800),
              pytest.mark.skipif(CLI is None, reason=NO_CLI or "needs the pinned Pulumi CLI"),
              pytest.mark.skipif(bool(NO_NAMESPACES), reason=NO_NAMESPACES)]


def _fleet(infra: Path) -> dict:
    """The drift CronJob `groundctl fleet manifests` renders for the environment, and the ConfigMaps it mounts."""
    from groundctl.fleet import _spec_files
    from recovery.fleet import manifests as fm

    rendered = fm.render(_spec_files(infra / "environments"), image="registry.example/groundctl@sha256:" + "0" * 64)
    by_kind = {(m["kind"], m["metadata"]["name"]): m for m in rendered.manifests}
    return {"cronjob": by_kind[("CronJob", f"drift-{ENV}")],
            "configmaps": {name: m for (kind, name), m in by_kind.items() if kind == "ConfigMap"}}


def _image(stage: Path, releases) -> dict:
    """What the Dockerfile puts in the image, staged to be mounted read-only: the plugins' binaries (stand-ins,
    from the tarballs the install step would check), the stand-in programs."""
    import tarfile

    plugins = stage / "plugins"
    plugins.mkdir(parents=True)
    for release in releases:
        with tarfile.open(make_tarball(stage / "downloads", release)) as tar:
            tar.extractall(plugins, filter="data")
    return {"plugins": plugins, "stacks": stand_in_stacks(stage / "stacks")}


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


def _script(cronjob: dict, configmaps: dict, stage: Path, image: dict, endpoint: str) -> tuple[str, Path]:
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    context, security = pod["securityContext"], container["securityContext"]
    assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
    assert security["capabilities"]["drop"] == ["ALL"] and context["runAsNonRoot"]

    def pointed(text: str) -> str:
        data = yaml.safe_load(text)
        data["aws"]["endpoint_url"] = endpoint
        return yaml.safe_dump(data, sort_keys=False)

    mounts, scratch = _volumes(pod, configmaps, stage, pointed)
    python = Path(sys.base_prefix)
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
    inspect = ("import boto3, json, yaml; s3 = boto3.client('s3', endpoint_url=%r, region_name='us-east-1', "
               "aws_access_key_id='testing', aws_secret_access_key='testing'); spec = yaml.safe_load(open("
               "'/srv/infra/environments/%s.yaml')); print('INSPECT ' + json.dumps([o['Key'] for o in "
               "s3.list_objects_v2(Bucket=spec['backend']['bucket'], Prefix='.groundctl/drift/').get('Contents', [])]))"
               % (endpoint, ENV))
    script = f"""set -eu
mount --make-rprivate /
ip link set lo up
# The image: its Python, groundctl, the pinned CLI and the plugins, read-only.
mount -t tmpfs -o mode=755 image-opt /opt
mkdir -p /opt/python /opt/groundctl /opt/pulumi/bin /opt/pulumi/plugins /opt/stacks
for pair in "{python}:/opt/python" "{REPO}:/opt/groundctl" "{CLI}:/opt/pulumi/bin" \\
            "{image['plugins']}:/opt/pulumi/plugins" "{image['stacks']}:/opt/stacks"; do
  mount --bind "${{pair%%:*}}" "${{pair#*:}}" && mount -o remount,bind,ro "${{pair#*:}}"
done
mount -o remount,ro /opt
# The operator's side, before the pod: the emulator on loopback, and the environment born by hand.
mount -t tmpfs -o mode=700 operator /srv
mkdir -p /srv/infra/environments
cp {stage}/volume-spec/{ENV}.yaml /srv/infra/environments/
LD_LIBRARY_PATH=/opt/python/lib /opt/python/bin/python -m moto.server -H 127.0.0.1 -p {PORT} >/srv/moto.log 2>&1 &
for i in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/{PORT}) 2>/dev/null && break; sleep 0.1; done
LD_LIBRARY_PATH=/opt/python/lib /opt/python/bin/python -c "import boto3; boto3.client('s3', \\
  endpoint_url='{endpoint}', region_name='us-east-1', aws_access_key_id='t', aws_secret_access_key='t'\\
  ).create_bucket(Bucket='{RECORDS}')"
{by_hand}
# The pod: /work as the image has it, with the manifest's volumes; then the root read-only.
mount -t tmpfs -o mode=755 image-work /work
{chr(10).join(mounts)}
mount -o remount,ro /work
ls -A /dev/shm > /srv/shm.before
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
LD_LIBRARY_PATH=/opt/python/lib /opt/python/bin/python -c "{inspect}"
"""
    return script, scratch


@pytest.fixture
def fleet(tmp_path, local_plugin_releases):
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
    return _fleet(infra), stage, _image(stage, local_plugin_releases[1])


def test_the_drift_cronjobs_container_records_a_clean_environment_under_its_security_context(fleet):
    import base64

    manifests, stage, image = fleet
    endpoint = f"http://127.0.0.1:{PORT}"
    script, scratch = _script(manifests["cronjob"], manifests["configmaps"], stage, image, endpoint)
    assert manifests["cronjob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "drift", ENV, "--record", "--json"]
    done = subprocess.run(["unshare", "-m", "-n", "bash", "-c", script], capture_output=True, text=True,
                          timeout=1700)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.split(" ", 1)[0].isupper()
                and " " in line)
    out, err = (base64.b64decode(said[k]).decode() for k in ("POD_STDOUT", "POD_STDERR"))
    assert said["POD_EXIT"] == "0", out[-3000:] + err[-3000:]
    report = json.loads(out)
    assert report["drift"] is False, report
    assert {r["layer"]: r["state"] for r in report["layers"]} == {
        "backend": "clean", "network": "clean", "cluster": "clean", "flux": "skipped"}, report
    records = json.loads(said["INSPECT"])
    assert [k for k in records if k.startswith(f".groundctl/drift/{ENV}/")], records
    assert "SHM_UNCHANGED" in done.stdout.splitlines()
    # What the pod wrote is in its scratch volume: Pulumi's home and temporary files, owned by the pod's user.
    written = [p for p in scratch.rglob("*")]
    assert any(p.name == ".pulumi" for p in written)
    assert {p.stat().st_uid for p in written} == {manifests["cronjob"]["spec"]["jobTemplate"]["spec"]["template"][
        "spec"]["securityContext"]["runAsUser"]}
