"""A fleet pod's flux layer reads Flux's install manifest from a ConfigMap or the image, never the network
(recovery/fleet/flux_manifest.py): the pods reach AWS and the cluster's API, not GitHub.

The pod's file system is laid out here as the kubelet lays it out from the manifests (each volume's items at
their mount paths), and the spec the pod reads is resolved there as groundctl resolves it (a relative
flux.manifest_path is the repository's: the folder holding environments/, the pod's working directory)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bootstrap.kit.errors import BadInput
from recovery.fleet import flux_manifest, manifests as fm
from tests.conftest import REPO
from tests.test_fleet_manifests import IMAGE, _data, by_name, pod_of, repository, spec_files

MANIFEST = REPO / "tests" / "data" / "flux" / "install.yaml"


@pytest.fixture(scope="module")
def rendered() -> fm.Rendered:
    return fm.render(spec_files(), image=IMAGE)


def _pod_tree(pod: dict, objects: dict[str, dict], root: Path) -> None:
    """Write the files the pod sees under `root` (the container's /) from its ConfigMap volumes and mounts."""
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount in pod["containers"][0]["volumeMounts"]:
        source = volumes[mount["name"]].get("configMap")
        if source is None:
            continue
        data = objects[source["name"]]["data"]
        items = {i["path"]: data[i["key"]] for i in source["items"]}
        target = root / mount["mountPath"].lstrip("/")
        if "subPath" in mount:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(items[mount["subPath"]])
        else:
            target.mkdir(parents=True, exist_ok=True)
            for path, text in items.items():
                (target / path).write_text(text)


def test_every_pod_finds_the_manifest_its_spec_names_in_its_own_file_system(rendered, tmp_path):
    configmaps = by_name(rendered, "ConfigMap")
    for name, job in by_name(rendered, "CronJob").items():
        pod = pod_of(job)
        root = tmp_path / name
        _pod_tree(pod, configmaps, root)
        workdir = root / pod["containers"][0]["workingDir"].lstrip("/")
        env = job["metadata"]["labels"]["groundctl/environment"]
        spec_text = (workdir / "environments" / f"{env}.yaml").read_text()
        written = flux_manifest.written_path(spec_text)
        assert written == "flux/install.yaml", name
        assert (workdir / written).read_bytes() == MANIFEST.read_bytes(), name  # the file as committed
        mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "flux-manifest")
        assert mount["readOnly"] is True


def test_the_fleet_shares_one_configmap_per_manifest_and_sets_every_scratch_variable(rendered):
    held = [n for n in by_name(rendered, "ConfigMap") if n.startswith(flux_manifest.PREFIX)]
    assert held == [flux_manifest.configmap_name(MANIFEST.read_text())]
    for job in by_name(rendered, "CronJob").values():
        env = {e["name"]: e.get("value") for e in pod_of(job)["containers"][0]["env"]}
        assert {env["HOME"], env["TMPDIR"], env["PULUMI_HOME"].rsplit("/", 1)[0]} == {fm.SCRATCH}


@pytest.mark.parametrize("manifest_path,needle", [
    (None, "flux.manifest_path is not set and the pins lock names no checked copy of its install.yaml, so its flux "
           "layer would download Flux's install.yaml from GitHub"),
    ("https://github.com/fluxcd/flux2/releases/download/v2.4.0/install.yaml", "flux.manifest_path is a URL"),
    ("flux/not-committed.yaml", "its Flux manifest flux/not-committed.yaml could not be read"),
])
def test_a_pod_that_would_need_the_network_is_refused(tmp_path, manifest_path, needle):
    data = _data("staging")
    data["flux"].pop("manifest_path")
    if manifest_path:
        data["flux"]["manifest_path"] = manifest_path
        data["flux"]["manifest_sha256"] = "0" * 64  # a URL must be pinned by the spec's own rule
    try:
        files = spec_files(repository(tmp_path, staging=data))
    except BadInput as exc:  # the spec check itself may refuse it first: that is a refusal too
        assert "manifest" in exc.message
        return
    with pytest.raises(BadInput) as err:
        fm.render(files, image=IMAGE)
    assert "never the network" in err.value.message and f"staging: {needle}" in err.value.message


def test_a_manifest_in_the_image_is_read_where_the_spec_says_and_noted(tmp_path):
    staging = spec_files(repository(tmp_path, staging=_data("staging")))[0]
    text = staging.text.replace("manifest_path: flux/install.yaml", "manifest_path: /opt/flux/install-v2.4.0.yaml")
    assert text != staging.text
    out = fm.render([fm.SpecFile(staging.spec, staging.filename, text)], image=IMAGE)
    for job in by_name(out, "CronJob").values():
        pod = pod_of(job)
        assert "flux-manifest" not in {v["name"] for v in pod["volumes"]}
    assert not [n for n in by_name(out, "ConfigMap") if n.startswith(flux_manifest.PREFIX)]
    assert any("/opt/flux/install-v2.4.0.yaml from the image" in n for n in out.notes)


def test_a_manifest_too_large_for_a_configmap_is_refused_with_the_image_as_the_way(tmp_path):
    staging = spec_files(repository(tmp_path, staging=_data("staging")))[0]
    big = replace(staging, manifest_text="#" * (flux_manifest.LIMIT + 1))
    with pytest.raises(BadInput) as err:
        fm.render([big], image=IMAGE)
    message = err.value.message
    assert "over the 1,048,576 bytes a ConfigMap may hold" in message and "into the image" in message
