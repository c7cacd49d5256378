"""A spec's Flux install manifest pinned by the repository's pins lock (issue 35 §1, bootstrap/flux/locked.py):
after `groundctl pins update`, a production spec needs neither flux.manifest_sha256 nor flux.manifest_path by
hand. `spec check` reads the lock offline; `up`'s flux layer installs the checked copy and checks its digest; the
fleet's pods, which have no network, mount the copy and the lock `pins update` wrote. Without the lock, or with a
lock of another Flux version, every reader stops with exit 2 naming `groundctl pins update`; an explicit digest
still wins, and is checked."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from pathlib import Path

import pulumi
import pytest
import yaml

from bootstrap.pins.artifacts import FLUX
from bootstrap.pins.lockfile import LOCK_FILE, parse
from bootstrap.planning.mockrun import run_program
from bootstrap.spec import load_spec
from bootstrap.spec.stack_config import layer_config
from tests.conftest import REPO
from tests.plugin_releases import FLUX_MANIFEST, served
from tests.stackutil import FLUX_ENV, UPSTREAM, named
from tests.test_cli_errors import assert_refused, groundctl
from tests.test_fleet_flux_manifest import _pod_tree
from tests.test_fleet_manifests import by_name, pod_of

DIGEST = hashlib.sha256(FLUX_MANIFEST.read_bytes()).hexdigest()
COPY = "manifests/flux-v2.4.0.yaml"


@pytest.fixture(scope="module")
def release_mirror(tmp_path_factory):
    """A mirror of this module's own, without the real plugin (nothing here installs one)."""
    with served(tmp_path_factory.mktemp("mirror") / "mirror", real=()) as releases:
        yield releases


@pytest.fixture
def infra(tmp_path, monkeypatch) -> Path:
    """An adopter's repository holding the example specs, the production one without its digest line (as
    its comment says to delete it), worked in."""
    root = tmp_path / "infra"
    shutil.copytree(REPO / "environments", root / "environments")
    prod = root / "environments" / "prod.yaml"
    prod.write_text("".join(line for line in prod.read_text().splitlines(keepends=True)
                            if not line.lstrip().startswith("manifest_sha256:")))
    monkeypatch.chdir(root)
    return root


def update(monkeypatch, capsys, url: str):
    return groundctl(monkeypatch, capsys, "pins", "update", "--dir", ".", "--no-image", "--no-verify-signatures",
                     env={"GROUNDCTL_RELEASE_MIRROR": url})


def spec_check(monkeypatch, capsys, env: str = "prod"):
    return groundctl(monkeypatch, capsys, "spec", "check", env, "--json")


def offline(monkeypatch) -> None:
    def refuse(*_args, **_kwargs):
        raise OSError("this test is offline")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def _edit(path: Path, **flux) -> None:
    data = yaml.safe_load(path.read_text())
    data["flux"].update(flux)
    path.write_text(yaml.safe_dump(data))


def test_a_production_spec_without_a_digest_is_pinned_by_the_lock_offline(monkeypatch, capsys, infra,
                                                                          release_mirror):
    # No lock: exit 2, the field, why, and the command that records it.
    assert_refused(spec_check(monkeypatch, capsys), 2, "at flux.manifest_sha256: a production environment must pin",
                   f"{infra / LOCK_FILE} does not exist", "run `groundctl pins update` in the repository")
    assert update(monkeypatch, capsys, release_mirror.url)[0] == 0
    flux = next(e for e in parse((infra / LOCK_FILE).read_bytes()) if e.name == FLUX)
    assert flux.sha256 == DIGEST and flux.path == COPY
    assert (infra / COPY).read_bytes() == FLUX_MANIFEST.read_bytes()
    offline(monkeypatch)
    code, out, err = spec_check(monkeypatch, capsys)
    assert code == 0, err
    shown = json.loads(out)["flux"]
    assert shown["manifest_sha256"] == DIGEST and shown["manifest_path"] == str(infra / COPY)
    # `up`'s flux layer is given the lock's digest and the checked copy, relative to the program as ever.
    config = layer_config(load_spec("prod"), "flux", environ=FLUX_ENV, program_dir=infra / "stacks" / "flux")
    assert config["flux:manifestSha256"].value == DIGEST and config["flux:manifestPath"].value == f"../../{COPY}"


def test_the_example_placeholder_gives_way_to_the_lock(monkeypatch, capsys, tmp_path, release_mirror):
    root = tmp_path / "infra"
    shutil.copytree(REPO / "environments", root / "environments")
    monkeypatch.chdir(root)
    assert_refused(spec_check(monkeypatch, capsys), 2, "is the example's placeholder", "`groundctl pins update`")
    assert update(monkeypatch, capsys, release_mirror.url)[0] == 0
    code, out, err = spec_check(monkeypatch, capsys)
    assert code == 0 and json.loads(out)["flux"]["manifest_sha256"] == DIGEST, err


def test_a_lock_of_another_flux_version_is_named_with_the_fix(monkeypatch, capsys, infra, release_mirror):
    assert update(monkeypatch, capsys, release_mirror.url)[0] == 0
    _edit(infra / "environments" / "prod.yaml", version="v2.5.0")
    offline(monkeypatch)
    assert_refused(spec_check(monkeypatch, capsys), 2, "at flux.manifest_sha256",
                   f"{infra / LOCK_FILE} records Flux 2.4.0's install.yaml, not 2.5.0's", "`groundctl pins update`")
    assert_refused(groundctl(monkeypatch, capsys, "pins", "check"), 4, "flux 2.5.0", "`groundctl pins update`")


def test_an_explicit_digest_wins_and_is_checked(monkeypatch, capsys, infra, release_mirror):
    assert update(monkeypatch, capsys, release_mirror.url)[0] == 0
    prod = infra / "environments" / "prod.yaml"
    _edit(prod, manifest_path=COPY, manifest_sha256="ab" * 32)
    assert_refused(spec_check(monkeypatch, capsys), 2, f"has sha256 {DIGEST}, but flux.manifest_sha256 pins "
                   + "ab" * 32)
    _edit(prod, manifest_path=None, manifest_sha256=DIGEST)
    code, out, err = spec_check(monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["flux"]["manifest_path"] is None  # its own digest: the release URL, checked by `up`


def test_a_copy_changed_after_the_update_or_a_broken_lock_stops_the_check(monkeypatch, capsys, infra,
                                                                           release_mirror):
    assert update(monkeypatch, capsys, release_mirror.url)[0] == 0
    copy = infra / COPY
    copy.write_bytes(copy.read_bytes() + b"# edited\n")
    assert_refused(spec_check(monkeypatch, capsys), 2, f"{copy}", f"but flux.manifest_sha256 pins {DIGEST}")
    (infra / LOCK_FILE).write_text((infra / LOCK_FILE).read_text().replace(DIGEST, DIGEST[:40]))
    assert_refused(spec_check(monkeypatch, capsys), 2, f"The pins lock {infra / LOCK_FILE} is not usable",
                   "is not 64 lowercase hex digits", f"`git checkout -- {LOCK_FILE}`")


def test_up_installs_the_checked_copy_and_refuses_other_bytes(monkeypatch, capsys, infra, release_mirror):
    """The shipped flux program under the mock runtime, as an update (not a preview) runs it: it checks the
    manifest it is given against the lock's digest before it registers anything."""
    assert update(monkeypatch, capsys, release_mirror.url)[0] == 0
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    config = layer_config(load_spec("prod"), "flux", environ=FLUX_ENV)
    done = run_program("flux", "prod", config, UPSTREAM)
    assert Path(REPO / "stacks" / "flux" / named(done, "flux-controllers").inputs["file"]).samefile(infra / COPY)
    (infra / COPY).write_bytes(b"kind: Namespace\n")
    with pytest.raises(Exception) as err:
        run_program("flux", "prod", config, UPSTREAM)
    assert f"but flux.manifest_sha256 pins {DIGEST}" in str(err.value)


def test_the_fleets_pods_mount_the_checked_copy_and_the_lock(monkeypatch, capsys, infra, release_mirror, tmp_path):
    code, out, err = groundctl(monkeypatch, capsys, "fleet", "manifests", "--image", "registry.example/groundctl:0.1.0")
    # No lock yet: the production spec is not pinned (exit 2, naming the command); nothing is printed.
    assert code == 2 and "`groundctl pins update`" in err and not out
    assert update(monkeypatch, capsys, release_mirror.url)[0] == 0
    code, out, err = groundctl(monkeypatch, capsys, "fleet", "manifests", "--image",
                               "registry.example/groundctl:0.1.0", "--json")
    assert code == 0, err
    rendered = type("Rendered", (), {"manifests": json.loads(out)["manifests"]})
    configmaps = by_name(rendered, "ConfigMap")
    assert configmaps["groundctl-pins"]["data"][LOCK_FILE] == (infra / LOCK_FILE).read_text()
    jobs = by_name(rendered, "CronJob")
    assert {"drift-dev", "drift-prod"} <= set(jobs)
    for name, job in jobs.items():
        pod = pod_of(job)
        root = tmp_path / "pods" / name
        _pod_tree(pod, configmaps, root)
        work = root / "work"
        assert (work / COPY).read_bytes() == FLUX_MANIFEST.read_bytes(), name
        # The pod's groundctl reads its spec as every reader does: the lock beside it pins the mounted copy.
        env = job["metadata"]["labels"]["groundctl/environment"]
        spec = load_spec(env, base=work / "environments")
        assert spec.flux.manifest_sha256 == DIGEST and spec.flux.manifest_path == str(work / COPY), name
        assert all(m["readOnly"] for m in pod["containers"][0]["volumeMounts"] if m["name"] != "scratch")
