"""The Flux install manifest (issue 27 §3, §4): pinned by its sha256 (required in production and for a URL),
checked before anything applies it, in groundctl and in the flux program alike; `flux.manifest_path` names a
regular, readable, size-capped file, a relative one inside the repository; one base for relative paths."""

from __future__ import annotations

import hashlib
import os
from types import SimpleNamespace

import pulumi
import pytest
import yaml

from bootstrap.spec.stack_config import layer_config
from bootstrap.kit.errors import BadInput, SpecError
from bootstrap.planning.mockrun import run_program
from bootstrap.spec import load_spec, parse_spec
from tests.conftest import REPO
from tests.stackutil import FLUX_ENV, UPSTREAM, named, run, spec
from tests.test_cli_errors import groundctl
from tests.test_spec import raw

MANIFEST = REPO / "tests" / "data" / "flux" / "install.yaml"
DIGEST = hashlib.sha256(MANIFEST.read_bytes()).hexdigest()
OTHER = "ab" * 32
URL = "https://mirror.example/flux/v2.4.0/install.yaml"


def _problems(data: dict) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        parse_spec(data, "environments/x.yaml")
    return info.value.problems


def _flux(name: str, **fields) -> dict:
    data = raw(name)
    data["flux"] = {**data["flux"], **fields}
    for k in [k for k, v in fields.items() if v is None]:
        data["flux"].pop(k)
    return data


# -- the spec's shape --------------------------------------------------------------------------------------


def test_production_requires_the_digest():
    (where, what), = _problems(_flux("prod", manifest_sha256=None))
    assert where == "flux.manifest_sha256"
    assert "production" in what and "flux_2.4.0_checksums.txt" in what


def test_a_url_requires_the_digest_outside_production_too():
    (where, what), = _problems(_flux("dev", manifest_path=URL))
    assert where == "flux.manifest_sha256" and "URL" in what
    spec_ = parse_spec(_flux("dev", manifest_path=URL, manifest_sha256=DIGEST.upper()), "x")
    assert spec_.flux.manifest_sha256 == DIGEST


@pytest.mark.parametrize("field, value, why", [
    ("manifest_sha256", "abc", "not a sha256 digest"),
    ("manifest_sha256", "g" * 64, "not a sha256 digest"),
    ("manifest_path", "../elsewhere/install.yaml", "leaves the repository"),
    ("manifest_path", "ftp://mirror.example/install.yaml", "cannot fetch"),
    ("manifest_path", "   ", "give the path"),
    ("manifest_path", "a\nb.yaml", "give the path"),
])
def test_a_bad_value_names_its_field(field, value, why):
    (where, what), = _problems(_flux("dev", **{field: value}))
    assert where == f"flux.{field}" and why in what, (where, what)


# -- the file: one base, inside the repository, a regular file, the pinned bytes -----------------------------


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A repository with environments/dev.yaml naming manifests/flux.yaml (the test manifest) by a relative path."""
    (tmp_path / "environments").mkdir()
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "flux.yaml").write_bytes(MANIFEST.read_bytes())

    def write(**fields):
        (tmp_path / "environments" / "dev.yaml").write_text(yaml.safe_dump(_flux("dev", **fields)))
        return tmp_path / "environments" / "dev.yaml"

    write(manifest_path="manifests/flux.yaml", manifest_sha256=DIGEST)
    monkeypatch.chdir(tmp_path / "environments")  # neither the working folder nor stacks/flux is the base
    return SimpleNamespace(path=tmp_path, write=write)


def test_a_relative_path_resolves_against_the_repository(repo):
    spec_ = load_spec(str(repo.path / "environments" / "dev.yaml"))
    assert spec_.flux.manifest_path == str(repo.path / "manifests" / "flux.yaml")
    config = layer_config(spec_, "flux", environ=FLUX_ENV)
    assert config["flux:manifestPath"].value == str(repo.path / "manifests" / "flux.yaml")
    assert config["flux:manifestSha256"].value == DIGEST


def _checkout(root, spec_fields: dict):
    """A clone of a repository at `root`: its environments/dev.yaml, the manifest it names, stacks/flux."""
    (root / "environments").mkdir(parents=True)
    (root / "manifests").mkdir()
    (root / "stacks" / "flux").mkdir(parents=True)
    (root / "manifests" / "flux.yaml").write_bytes(MANIFEST.read_bytes())
    (root / "environments" / "dev.yaml").write_text(yaml.safe_dump(_flux("dev", **spec_fields)))
    return load_spec(str(root / "environments" / "dev.yaml"))


def test_two_clones_at_different_paths_give_the_program_the_same_config(tmp_path):
    """The program's manifest path is the controllers' `file` input the offline plan shows, and config each update
    records: a clone's own path in it made every other clone's differ."""
    fields = {"manifest_path": "manifests/flux.yaml", "manifest_sha256": DIGEST}
    clones = [tmp_path / "home" / "alice" / "src" / "fleet", tmp_path / "runner" / "_work" / "fleet" / "fleet"]
    configs = [{k: v.value for k, v in layer_config(_checkout(root, fields), "flux", environ=FLUX_ENV,
                                                     program_dir=root / "stacks" / "flux").items()}
               for root in clones]
    assert configs[0] == configs[1]
    assert configs[0]["flux:manifestPath"] == "../../manifests/flux.yaml"
    assert not any(str(tmp_path) in value for value in configs[0].values())
    # A file outside the program's repository (the image's copy) is named as it is: the same on every machine.
    spec_ = load_spec(str(clones[0] / "environments" / "dev.yaml"))
    spec_ = spec_.model_copy(update={"flux": spec_.flux.model_copy(update={"manifest_path": "/opt/flux/i.yaml"})})
    assert layer_config(spec_, "flux", environ=FLUX_ENV, program_dir=clones[0] / "stacks" / "flux")[
        "flux:manifestPath"].value == "/opt/flux/i.yaml"


def test_the_program_records_the_clones_manifest_without_the_clones_path(monkeypatch, tmp_path):
    """The shipped flux program under the mock runtime (the offline plan's), given this clone's test manifest as a
    spec names it: the controllers' `file` input is relative to stacks/flux, and the program's check before an
    update reads it from there whatever the working folder (the real provider reading it: the cluster tier)."""
    monkeypatch.chdir(tmp_path)
    config = _config(manifest_path=str(MANIFEST), manifest_sha256=DIGEST)
    assert config["flux:manifestPath"].value == "../../tests/data/flux/install.yaml"
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    done = run_program("flux", "dev", config, UPSTREAM)
    recorded = named(done, "flux-controllers").inputs["file"]
    assert recorded == "../../tests/data/flux/install.yaml" and str(REPO) not in recorded
    assert os.path.samefile(REPO / "stacks" / "flux" / recorded, MANIFEST)


def test_ci_counts_the_repository_manifest_as_the_environments_file(repo):
    from groundctl.ci import environments_of

    (env,) = environments_of(repo.path)
    assert env.extra_files == ("manifests/flux.yaml",)


def test_a_path_that_leaves_the_repository_through_a_link_is_refused(repo, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "flux.yaml").write_bytes(MANIFEST.read_bytes())
    (repo.path / "manifests" / "link.yaml").symlink_to(outside / "flux.yaml")
    path = repo.write(manifest_path="manifests/link.yaml", manifest_sha256=DIGEST)
    with pytest.raises(SpecError) as info:
        load_spec(str(path))
    (where, what), = info.value.problems
    assert where == "flux.manifest_path" and "outside the repository" in what


@pytest.mark.parametrize("kind", ["missing", "folder", "fifo", "device", "wrong digest"])
def test_spec_check_and_the_offline_plan_refuse_what_is_not_the_pinned_file(repo, monkeypatch, capsys, kind):
    target = {"missing": "manifests/absent.yaml", "folder": "manifests", "fifo": "manifests/pipe.yaml",
              "device": "/dev/zero", "wrong digest": "manifests/flux.yaml"}[kind]
    if kind == "fifo":
        os.mkfifo(repo.path / target)
    path = repo.write(manifest_path=target, manifest_sha256=OTHER if kind == "wrong digest" else DIGEST)
    for command in (["spec", "check", str(path)], ["plan", str(path), "--offline", "--out", str(repo.path / "plans")]):
        code, out, err = groundctl(monkeypatch, capsys, *command)
        said = " ".join(err.split())
        assert code == 2, (command, err)
        if kind == "wrong digest":
            assert "at flux.manifest_sha256" in said and OTHER in said and DIGEST in said, said
        else:
            assert "at flux.manifest_path" in said and target.rsplit("/", 1)[-1] in said, said
        assert "Traceback" not in err


def test_the_pinned_file_passes(repo, monkeypatch, capsys):
    code, out, err = groundctl(monkeypatch, capsys, "spec", "check", str(repo.path / "environments" / "dev.yaml"))
    assert code == 0, err


def test_spec_check_refuses_the_shipped_production_examples_placeholder_digest_and_says_how_to_record_one(
        monkeypatch, capsys, tmp_path):
    """environments/prod.yaml pins 64 zeros (its account is made up too): `spec check prod` passed and only the
    program's download, after the layers before flux, found no manifest matching it. Now spec check says what it
    is and where the real digest comes from; the example's offline plan (nothing applied or downloaded) still runs
    (tests/test_offline_plan.py)."""
    from bootstrap.flux.manifest import PLACEHOLDER_SHA256
    from tests.test_cli_errors import assert_refused

    assert load_spec("prod").flux.manifest_sha256 == PLACEHOLDER_SHA256 and load_spec("prod").production
    monkeypatch.chdir(tmp_path)  # no environments/ here: the bundled example, as a newcomer meets it
    assert_refused(groundctl(monkeypatch, capsys, "spec", "check", "prod"), 2,
                   "at flux.manifest_sha256: is the example's placeholder", "64 zeros",
                   "not the digest Flux published for v2.4.0's install.yaml",
                   "the install.yaml line of flux_2.4.0_checksums.txt from "
                   "https://github.com/fluxcd/flux2/releases/download/v2.4.0/",
                   "'Pinning the Flux install manifest'")


def test_a_local_manifest_pinned_by_the_placeholder_is_told_so_with_the_files_own_digest(repo, monkeypatch, capsys):
    from bootstrap.flux.manifest import PLACEHOLDER_SHA256
    from tests.test_cli_errors import assert_refused

    path = repo.write(manifest_path="manifests/flux.yaml", manifest_sha256=PLACEHOLDER_SHA256)
    assert_refused(groundctl(monkeypatch, capsys, "spec", "check", str(path)), 2,
                   "at flux.manifest_sha256: is the example's placeholder",
                   f"the file it names has sha256 {DIGEST}, which is the one to record only once it matches that line")
    # The offline plan refuses it as any digest the file does not have, naming both.
    code, _, err = groundctl(monkeypatch, capsys, "plan", str(path), "--offline", "--out", str(repo.path / "plans"))
    said = " ".join(err.split())
    assert code == 2 and f"has sha256 {DIGEST}, but flux.manifest_sha256 pins {PLACEHOLDER_SHA256}" in said, said


def test_every_engine_run_checks_the_file_before_pulumi_reads_it(repo):
    from bootstrap.engine.layer_stacks import LayerStacks

    spec_ = load_spec(str(repo.write(manifest_path="manifests/flux.yaml", manifest_sha256=OTHER)))
    stacks = LayerStacks.__new__(LayerStacks)  # only its spec is read before the refusal
    stacks.spec = spec_
    with pytest.raises(SpecError) as info:
        stacks._layer_config("flux")
    assert info.value.problems[0][0] == "flux.manifest_sha256"


# -- the program: checked before an update, whoever runs it --------------------------------------------------


def _config(**fields):
    return layer_config(parse_spec(_flux("dev", **fields), "x.yaml"), "flux", environ=FLUX_ENV)


def test_the_program_checks_the_digest_before_an_update_and_names_both(monkeypatch):
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    with pytest.raises(BadInput) as info:
        run_program("flux", "dev", _config(manifest_path=str(MANIFEST), manifest_sha256=OTHER), UPSTREAM)
    assert OTHER in info.value.message and DIGEST in info.value.message
    done = run_program("flux", "dev", _config(manifest_path=str(MANIFEST), manifest_sha256=DIGEST), UPSTREAM)
    assert named(done, "flux-controllers").inputs["file"] == "../../tests/data/flux/install.yaml"


def test_the_program_fetches_a_url_once_and_checks_it(monkeypatch):
    import stacks.common.manifest as manifest

    fetched = []
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: False)
    monkeypatch.setattr(manifest.urllib.request, "urlopen",
                        lambda url, timeout: fetched.append(url) or open(MANIFEST, "rb"))
    run_program("flux", "dev", _config(manifest_path=URL, manifest_sha256=DIGEST), UPSTREAM)
    assert fetched == [URL]
    with pytest.raises(BadInput, match=OTHER):
        run_program("flux", "dev", _config(manifest_path=URL, manifest_sha256=OTHER), UPSTREAM)


def test_a_preview_and_the_offline_plan_fetch_nothing(monkeypatch):
    import stacks.common.manifest as manifest

    monkeypatch.setattr(manifest.urllib.request, "urlopen", lambda *a, **k: pytest.fail("a preview downloaded"))
    run_program("flux", "dev", _config(manifest_path=URL, manifest_sha256=OTHER), UPSTREAM)


def test_production_without_a_digest_is_refused_by_the_program_too():
    config = layer_config(spec("prod"), "flux", environ=FLUX_ENV)
    del config["flux:manifestSha256"]
    with pytest.raises(BadInput, match="flux:manifestSha256"):
        run_program("flux", "prod", config, UPSTREAM)


def test_the_release_url_is_the_source_without_a_manifest_path():
    done = run("flux", spec("prod"))
    assert named(done, "flux-controllers").inputs["file"].endswith("/v2.4.0/install.yaml")
