"""Before anything is written: the CLI's version floor and the provider plugins each layer's program needs
(bootstrap/engine/preflight.py), and the recovery stopping before its restore when the engine cannot run."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from bootstrap.engine import preflight
from bootstrap.engine.preflight import Plugin, PluginPlaces
from bootstrap.engine.versions import PULUMI_CLI_MIN, PULUMI_CLI_PINNED
from bootstrap.errors import EngineError
from bootstrap.layers import STACKS_DIR
from tests.conftest import REPO

ENGINE_PROGRAMS = REPO / "tests" / "engine_programs"


def sdk_version(package: str) -> str:
    import importlib.util

    folder = importlib.util.find_spec(package).submodule_search_locations[0]
    return json.loads((Path(folder) / "pulumi-plugin.json").read_text())["version"]


def one_paragraph(message: str) -> None:
    assert "\n" not in message and len(message) < 1500


# -- the CLI version ---------------------------------------------------------------------------------


def test_the_cli_version_floor_names_the_found_and_the_needed_version():
    old = preflight.cli_version_problem("v3.200.0")
    assert old and "v3.200.0" in old and f"v{PULUMI_CLI_MIN} or later" in old and f"v{PULUMI_CLI_PINNED}" in old
    assert "unknown flag" in old and "Nothing was changed" in old
    one_paragraph(old)
    assert preflight.cli_version_problem(f"v{PULUMI_CLI_MIN}") is None
    assert preflight.cli_version_problem(f"v{PULUMI_CLI_PINNED}") is None
    assert preflight.cli_version_problem("v3.260.0-dev.0") is None  # a build from source reports a pre-release
    assert preflight.cli_version_problem("v4.0.0") is None
    odd = preflight.cli_version_problem("garbage\x1b[31m" + "x" * 500)
    assert odd and "cannot tell" in odd and "\x1b" not in odd and len(odd) < 1000


def fake_pulumi(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "pulumi"
    script.write_text(f"#!/bin/sh\necho {version}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_require_cli_reads_the_version_of_the_pulumi_on_path(tmp_path, monkeypatch):
    fake_pulumi(tmp_path / "old", "v3.200.0")
    monkeypatch.setenv("PATH", str(tmp_path / "old"))
    with pytest.raises(EngineError, match=r"is v3\.200\.0, but groundctl needs v3\.247\.0 or later"):
        preflight.require_cli()
    fake_pulumi(tmp_path / "new", f"v{PULUMI_CLI_PINNED}")
    monkeypatch.setenv("PATH", str(tmp_path / "new"))
    assert preflight.require_cli() == f"v{PULUMI_CLI_PINNED}"
    monkeypatch.setenv("PATH", str(tmp_path / "none"))
    with pytest.raises(EngineError, match="not installed or not on PATH"):
        preflight.require_cli()


# -- which plugins a layer needs ---------------------------------------------------------------------


def test_a_program_needs_the_plugins_of_the_sdks_it_imports_through_its_local_modules():
    sources = {"stacks.common.providers": "import pulumi_aws as aws\nfrom stacks.common.tags import t\n",
               "stacks.common.tags": "from stacks.common.naming import *\n", "stacks.common.naming": "X = 1\n"}
    entry = "import pulumi\nfrom stacks.common.providers import provider\nimport json\n"
    assert preflight.program_imports(entry, sources.get) == {"pulumi", "pulumi_aws", "json"}
    aws = Plugin("aws", "7.51.1", "pulumi_aws")
    assert preflight.needed_plugins({"pulumi", "pulumi_aws", "json"}, {"pulumi_aws": aws}) == [aws]
    # An import cycle between local modules ends.
    assert preflight.program_imports("import a\n", {"a": "import b\n", "b": "import a\nimport pulumi_x\n"}.get) == \
        {"pulumi_x"}


def test_each_layer_needs_the_plugin_its_sdk_asks_for_and_a_dynamic_provider_program_none():
    aws = Plugin("aws", sdk_version("pulumi_aws"), "pulumi_aws")
    kubernetes = Plugin("kubernetes", sdk_version("pulumi_kubernetes"), "pulumi_kubernetes")
    root = str(STACKS_DIR.parent)
    assert {layer: preflight.layer_plugins(STACKS_DIR, layer, root) for layer in ("backend", "network", "cluster",
                                                                                 "flux")} == {
        "backend": [aws], "network": [aws], "cluster": [aws], "flux": [kubernetes]}
    # The engine tier's stand-ins use a dynamic provider: no plugin, so they are never refused.
    for layer in ("network", "cluster"):
        assert preflight.layer_plugins(ENGINE_PROGRAMS, layer, str(ENGINE_PROGRAMS)) == []


# -- where Pulumi finds them -------------------------------------------------------------------------


def install(home: Path, name: str, version: str, *, executable: bool = True, partial: bool = False) -> None:
    folder = home / "plugins" / f"resource-{name}-v{version}"
    folder.mkdir(parents=True)
    if executable:
        (folder / f"pulumi-resource-{name}").write_text("#!/bin/sh\n")
    if partial:
        Path(f"{folder}.partial").write_text("")


def test_the_plugin_cache_is_read_as_pulumi_reads_it(tmp_path):
    home = tmp_path / "home"
    aws = Plugin("aws", "7.51.1")
    env = {"PULUMI_HOME": str(home), "PATH": str(tmp_path / "empty")}
    assert not preflight.is_installed(aws, preflight.plugin_places(env, {"aws"}))  # no plugin folder at all
    install(home, "aws", "7.50.0")  # another version: Pulumi wants the exact one
    install(home, "kubernetes", "7.51.1")
    assert not preflight.is_installed(aws, preflight.plugin_places(env, {"aws"}))
    install(home, "aws", "7.51.1", partial=True)  # an install still under way
    assert not preflight.is_installed(aws, preflight.plugin_places(env, {"aws"}))
    os.remove(home / "plugins" / "resource-aws-v7.51.1.partial")
    places = preflight.plugin_places(env, {"aws"})
    assert preflight.is_installed(aws, places) and places.plugin_dir == str(home / "plugins")
    assert not preflight.is_installed(aws, preflight.plugin_places({"PULUMI_HOME": str(tmp_path / "other")}, {"aws"}))


def test_an_ambient_plugin_on_path_counts_unless_pulumi_is_told_to_ignore_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "pulumi-resource-aws"
    plugin.write_text("#!/bin/sh\n")
    plugin.chmod(0o755)
    aws = Plugin("aws", "7.51.1")
    env = {"PULUMI_HOME": str(tmp_path / "home"), "PATH": str(bin_dir)}
    assert preflight.is_installed(aws, preflight.plugin_places(env, {"aws"}))  # any version, as Pulumi does
    for value, ignored in (("true", True), ("1", True), ("TRUE", True), ("false", False), ("yes", False)):
        places = preflight.plugin_places({**env, "PULUMI_IGNORE_AMBIENT_PLUGINS": value}, {"aws"})
        assert places.ignore_ambient is ignored and preflight.is_installed(aws, places) is not ignored


def test_a_missing_plugin_is_named_with_its_version_layers_and_offline_install_command(tmp_path):
    env = {"PULUMI_HOME": str(tmp_path / "home"), "PATH": str(tmp_path), "PYTHONPATH": str(STACKS_DIR.parent)}
    version = sdk_version("pulumi_aws")
    with pytest.raises(EngineError) as raised:
        preflight.require_plugins(STACKS_DIR, ["backend", "network", "cluster"], env)
    message = raised.value.message
    assert f"the aws resource plugin v{version}" in message and "backend and network and cluster layers" in message
    assert (f"`PULUMI_HOME={tmp_path / 'home'} pulumi plugin install resource aws v{version} --file "
            f"pulumi-resource-aws-v{version}-") in message
    assert "kubernetes" not in message and "never downloads" in message and "nothing was changed" in message
    one_paragraph(message)
    install(tmp_path / "home", "aws", version)
    preflight.require_plugins(STACKS_DIR, ["backend", "network", "cluster"], env)  # found: no error
    with pytest.raises(EngineError, match=f"kubernetes resource plugin v{sdk_version('pulumi_kubernetes')}"):
        preflight.require_plugins(STACKS_DIR, ["flux"], env)


def test_an_engine_that_runs_no_pulumi_program_needs_no_plugin():
    preflight.require_engine(object(), ["network"], {"PULUMI_HOME": "/nonexistent"})


def test_the_message_of_several_missing_plugins_is_one_paragraph():
    places = PluginPlaces(frozenset(), (), "/h/plugins", ignore_ambient=True)
    text = preflight.missing_plugins_message({Plugin("aws", "7.51.1", "pulumi_aws"): ["network"],
                                              Plugin("kubernetes", "4.34.2", "pulumi_kubernetes"): ["flux"]},
                                             places, system="Linux", machine="aarch64")
    assert "pulumi plugin install resource aws v7.51.1 --file pulumi-resource-aws-v7.51.1-linux-arm64.tar.gz" in text
    assert "pulumi plugin install resource kubernetes v4.34.2 --file" in text
    assert "PULUMI_IGNORE_AMBIENT_PLUGINS is set" in text
    one_paragraph(text)


# -- the recovery stops before its restore -----------------------------------------------------------


def deleted_state(store, env: str):
    """Three recorded updates of network/<env>, then its state object deleted: a recovery would restore it."""
    from bootstrap.records import layout
    from tests.fakes.engine import BucketEngine, FakeResource, LINEAGE_CONFIG, quick_append

    engine = BucketEngine(env, store=store)
    engine.set_config("network", LINEAGE_CONFIG, "11111111-1111-4111-8111-111111111111")
    for i in range(3):
        engine.declare("network", [FakeResource("aws:ec2/vpc:Vpc", f"vpc-{j}", {"n": j}) for j in range(i + 1)])
        engine.up("network")
        quick_append(store, "network", env, operation="up", run_id=f"run-{i}",
                     lineage="11111111-1111-4111-8111-111111111111")
    store.delete(layout.stack_key("network", env))
    return engine


def versions(store) -> list[tuple]:
    return sorted((v.key, v.version_id, v.delete_marker) for v in store.versions(""))


def test_the_guide_checks_the_way_forward_once_before_its_first_write(aws, bucket):
    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.records.locks import EnvironmentLock
    from recovery.guide.flow import run_guide
    from recovery.guide.model import GuideOptions, GuideServices
    from recovery.inventory import collect
    from tests.fakes.engine import quick_append

    store, env = ObjectStore(aws.client("s3"), bucket), f"e{uuid.uuid4().hex[:8]}"
    engine = deleted_state(store, env)
    before, calls = versions(store), []

    def ready():
        calls.append("ready")
        raise EngineError("The Pulumi CLI is not installed or not on PATH.")

    svc = GuideServices(store=store, engine=lambda: engine, inventory=lambda e, layer: collect(aws, e, layer),
                        lock_factory=lambda s, e, run_id: EnvironmentLock(s, e, run_id, settle_seconds=0),
                        confirm=lambda q: True, append_record=quick_append, ready=ready)
    transcript = run_guide(GuideOptions(env, "network", yes=True), svc)
    phases = {c.phase: c for c in transcript.conditions}
    assert calls == ["ready"] and transcript.exit_code == 4
    assert phases["choose"].status == "achieved" and phases["restore"].status == "failed"
    assert "not installed" in phases["restore"].message
    assert all(phases[p].status == "not-attempted" for p in ("reconcile", "import", "pending", "verify"))
    assert versions(store) == before  # no restore, no quarantine copy, no ledger record
    # A dry run writes nothing, so it does not need the engine.
    calls.clear()
    dry = run_guide(GuideOptions(env, "network", yes=True, dry_run=True), svc)
    assert calls == [] and dry.exit_code == 0


def test_recover_without_the_pulumi_cli_stops_before_the_restore(tmp_path, aws, bucket, emulator_endpoint):
    """`recover --yes` with no CLI on PATH: nothing restored, no ledger record, exit 4 naming what is missing."""
    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.records.ledger import read_ledger

    path = os.path.dirname(sys.executable)
    if preflight.shutil.which("pulumi", path=path):
        pytest.skip(f"a pulumi binary sits beside the interpreter in {path}")
    store = ObjectStore(aws.client("s3"), bucket)
    deleted_state(store, "local")
    before = versions(store)
    spec = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    spec["backend"]["bucket"] = bucket
    (tmp_path / "local.yaml").write_text(yaml.safe_dump(spec))
    env = {**{k: v for k, v in os.environ.items() if k != "GROUNDCTL_ENDPOINT_URL"}, "PATH": path,
           "PULUMI_CONFIG_PASSPHRASE": "p"}
    proc = subprocess.run([sys.executable, "-m", "groundctl", "recover", str(tmp_path / "local.yaml"), "network",
                           "--yes", "--json", "--endpoint-url", emulator_endpoint],
                          capture_output=True, text=True, timeout=180, env=env, cwd=REPO)
    assert proc.returncode == 4, proc.stderr
    phases = {p["phase"]: p for p in json.loads(proc.stdout)["phases"]}
    restore = phases["restore"]
    assert restore["status"] == "failed" and not restore["achieved"]
    assert "Nothing was restored or written" in restore["message"] and "Pulumi CLI is not installed" in restore["message"]
    assert phases["verify"]["status"] == "not-attempted" and "Traceback" not in proc.stderr
    assert versions(store) == before
    assert [r.operation for r in read_ledger(store, "network", "local").records] == ["up", "up", "up"]


# -- one Pulumi version everywhere ---------------------------------------------------------------------


def test_the_readme_dockerfile_and_pyproject_state_the_versions_groundctl_supports():
    import inspect
    import re
    from importlib.metadata import version

    from pulumi.automation import Stack

    from bootstrap.engine.versions import PULUMI_SDK_MIN

    readme = " ".join((REPO / "README.md").read_text().split())
    prerequisites = readme[readme.index("## Prerequisites for real runs"):readme.index("## Layers")]
    assert f"v{PULUMI_CLI_MIN} or later" in prerequisites and f"v{PULUMI_CLI_PINNED}" in prerequisites
    assert f"`pulumi>={PULUMI_SDK_MIN}`" in prerequisites and "any Pulumi CLI 3.x" not in readme
    dockerfile = (REPO / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", dockerfile, re.M))
    assert args["PULUMI_VERSION"] == PULUMI_CLI_PINNED
    # The image installs the SDKs at its plugins' versions, so its preflight finds what the SDKs ask for.
    for sdk, arg, plugin in (("pulumi-aws", "PULUMI_AWS_VERSION", "aws"),
                             ("pulumi-kubernetes", "PULUMI_KUBERNETES_VERSION", "kubernetes")):
        assert f'"{sdk}==${{{arg}}}"' in dockerfile
        assert f"`{plugin} v{args[arg]}`" in prerequisites
    assert f"pulumi plugin install resource aws v{args['PULUMI_AWS_VERSION']} --file" in prerequisites
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'"pulumi>=([0-9.]+),<4"', pyproject)[1] == PULUMI_SDK_MIN
    # The SDK installed here meets the floor, and has what the floor is for.
    assert preflight.parse_version(version("pulumi")) >= preflight.parse_version(PULUMI_SDK_MIN)
    assert "clear_pending_creates" in inspect.signature(Stack.refresh).parameters
