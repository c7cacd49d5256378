"""Where a fleet pod's flux layer reads Flux's install manifest: never the network. Pure.

The pods reach AWS and the cluster's API, not GitHub, and a drift check or drill that fetched install.yaml on
every run would depend on it anyway. So each environment's spec must name a manifest file (flux.manifest_path):
a repository file (a relative path: the repository is the folder holding environments/, the pod's /work) is put
into a ConfigMap and mounted read-only at the same place under /work; an absolute path is read from the image,
which must hold it. A spec that names none reads the checked copy the repository's pins lock names
(`groundctl pins update` writes it; bootstrap.flux.locked): that copy is mounted the same way, and the lock beside
the specs at /work/groundctl-pins.json, where the pod's groundctl finds the copy and its digest. No manifest at
all (the release URL) or an https:// one is refused.
"""

from __future__ import annotations

import hashlib
from typing import Optional

import yaml

WORKDIR = "/work"          # the image's working directory: the repository root the specs sit in
KEY = "install.yaml"
PREFIX = "groundctl-flux-"  # + the manifest's digest: environments with the same file share one ConfigMap
LIMIT = 1024 * 1024        # Kubernetes refuses a ConfigMap over 1 MiB


def written_path(spec_text: str) -> Optional[str]:
    """flux.manifest_path as the spec file says it (what the pod reads), not as resolved on this machine."""
    try:
        doc = yaml.safe_load(spec_text)
    except yaml.YAMLError:
        return None
    flux = doc.get("flux") if isinstance(doc, dict) else None
    value = flux.get("manifest_path") if isinstance(flux, dict) else None
    return value if isinstance(value, str) and value.strip() else None


def problem(name: str, written: Optional[str], text: Optional[str]) -> Optional[str]:
    """Why environment `name`'s pods could not read their Flux manifest without the network; None when they can."""
    fix = ("run `groundctl pins update` in the repository, which writes the release's install.yaml, checked, where "
           "the pins lock names it (the pods mount it), and commit both; or name a committed copy in "
           "flux.manifest_path, or the absolute path of a copy built into the image")
    if written is None:
        return (f"{name}: flux.manifest_path is not set and the pins lock names no checked copy of its "
                f"install.yaml, so its flux layer would download Flux's install.yaml from GitHub on every run, which "
                f"the pods cannot reach: {fix}")
    if written.startswith(("http://", "https://")):
        return f"{name}: flux.manifest_path is a URL ({written[:120]}), fetched on every run: {fix}"
    if not written.startswith("/") and text is None:
        return f"{name}: its Flux manifest {written} could not be read from the repository: {fix}"
    if not written.startswith("/") and len(text.encode()) > LIMIT:
        return (f"{name}: its Flux manifest {written} is over the {LIMIT:,} bytes a ConfigMap may hold: build it "
                "into the image and give its absolute path in flux.manifest_path")
    return None


def configmap_name(text: str) -> str:
    return PREFIX + hashlib.sha256(text.encode()).hexdigest()[:12]


def mount(written: str, text: Optional[str]) -> Optional[tuple[dict, dict]]:
    """(volume, volumeMount) that puts a repository manifest where the spec names it; None for one in the image."""
    if written.startswith("/") or text is None:
        return None
    path = written.strip().removeprefix("./")
    items = [{"key": KEY, "path": KEY}]
    volume = {"name": "flux-manifest", "configMap": {"name": configmap_name(text), "items": items}}
    return volume, {"name": "flux-manifest", "mountPath": f"{WORKDIR}/{path}", "subPath": KEY, "readOnly": True}


def configmaps(texts: list[str], ns: str, meta) -> list[dict]:
    """One ConfigMap per distinct manifest, in name order. `meta(name, ns)` makes the metadata."""
    by_name = {configmap_name(t): t for t in texts}
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(name, ns), "data": {KEY: by_name[name]}}
            for name in sorted(by_name)]


LOCK_KEY = "groundctl-pins.json"
LOCK_CONFIGMAP = "groundctl-pins"


def lock_mount() -> tuple[dict, dict]:
    """(volume, volumeMount) that puts the repository's pins lock at the pod's repository root."""
    volume = {"name": "pins-lock", "configMap": {"name": LOCK_CONFIGMAP, "items": [{"key": LOCK_KEY,
                                                                                      "path": LOCK_KEY}]}}
    return volume, {"name": "pins-lock", "mountPath": f"{WORKDIR}/{LOCK_KEY}", "subPath": LOCK_KEY, "readOnly": True}


def lock_configmap(text: str, ns: str, meta) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(LOCK_CONFIGMAP, ns), "data": {LOCK_KEY: text}}
