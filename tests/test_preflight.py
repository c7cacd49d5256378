"""Before anything is written: the CLI's version floor, pip in the programs' Python, and the provider plugins a
command runs, the programs' and the states' (bootstrap/engine/preflight.py, plugins.py, toolchain.py), found where
Pulumi looks; and the recovery stopping before its restore when the engine cannot run."""

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

from bootstrap.engine import plugins, preflight, toolchain
from bootstrap.engine.plugins import PROGRAM, STATE, Plugin, PluginPlaces
from bootstrap.engine.versions import PROVIDER_PLUGINS, PULUMI_CLI_MIN, PULUMI_CLI_PINNED
from bootstrap.pins.artifacts import LINUX_AMD64
from bootstrap.pins.lockfile import Entry
from bootstrap.kit.errors import EngineError
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
    assert plugins.program_imports(entry, sources.get) == {"pulumi", "pulumi_aws", "json"}
    aws = Plugin("aws", "7.51.1", "pulumi_aws")
    assert plugins.needed_plugins({"pulumi", "pulumi_aws", "json"}, {"pulumi_aws": aws}) == [aws]
    # An import cycle between local modules ends.
    assert plugins.program_imports("import a\n", {"a": "import b\n", "b": "import a\nimport pulumi_x\n"}.get) == \
        {"pulumi_x"}


def test_each_layer_needs_the_plugin_its_sdk_asks_for_and_a_dynamic_provider_program_none():
    aws = Plugin("aws", sdk_version("pulumi_aws"), "pulumi_aws")
    kubernetes = Plugin("kubernetes", sdk_version("pulumi_kubernetes"), "pulumi_kubernetes")
    root = str(STACKS_DIR.parent)
    assert {layer: plugins.layer_plugins(STACKS_DIR, layer, root) for layer in ("backend", "network", "cluster",
                                                                                 "flux")} == {
        "backend": [aws], "network": [aws], "cluster": [aws], "flux": [kubernetes]}
    # The engine tier's stand-ins use a dynamic provider: no plugin, so they are never refused.
    for layer in ("network", "cluster"):
        assert plugins.layer_plugins(ENGINE_PROGRAMS, layer, str(ENGINE_PROGRAMS)) == []


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
    assert not plugins.is_installed(aws, plugins.plugin_places(env, {"aws"}))  # no plugin folder at all
    install(home, "aws", "7.50.0")  # another version: Pulumi wants the exact one
    install(home, "kubernetes", "7.51.1")
    assert not plugins.is_installed(aws, plugins.plugin_places(env, {"aws"}))
    install(home, "aws", "7.51.1", partial=True)  # an install still under way
    assert not plugins.is_installed(aws, plugins.plugin_places(env, {"aws"}))
    os.remove(home / "plugins" / "resource-aws-v7.51.1.partial")
    places = plugins.plugin_places(env, {"aws"})
    assert plugins.is_installed(aws, places) and places.plugin_dir == str(home / "plugins")
    assert not plugins.is_installed(aws, plugins.plugin_places({"PULUMI_HOME": str(tmp_path / "other")}, {"aws"}))


def test_an_ambient_plugin_on_path_counts_unless_pulumi_is_told_to_ignore_it(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    plugin = bin_dir / "pulumi-resource-aws"
    plugin.write_text("#!/bin/sh\n")
    plugin.chmod(0o755)
    aws = Plugin("aws", "7.51.1")
    env = {"PULUMI_HOME": str(tmp_path / "home"), "PATH": str(bin_dir)}
    assert plugins.is_installed(aws, plugins.plugin_places(env, {"aws"}))  # any version, as Pulumi does
    for value, ignored in (("true", True), ("1", True), ("TRUE", True), ("false", False), ("yes", False)):
        places = plugins.plugin_places({**env, "PULUMI_IGNORE_AMBIENT_PLUGINS": value}, {"aws"})
        assert places.ignore_ambient is ignored and plugins.is_installed(aws, places) is not ignored


def program_needs(layers: list[str]) -> dict:
    """What `up` of `layers` of the shipped programs needs: plugin → [(layer, PROGRAM)]."""
    root = str(STACKS_DIR.parent)
    return plugins.command_needs("up", {layer: plugins.layer_plugins(STACKS_DIR, layer, root) for layer in layers}, {})


def test_a_missing_plugin_is_named_with_its_version_layers_and_checked_install_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a repository with no pins lock
    env = {"PULUMI_HOME": str(tmp_path / "home"), "PATH": str(tmp_path)}
    version = sdk_version("pulumi_aws")
    with pytest.raises(EngineError) as raised:
        plugins.require_plugins(program_needs(["backend", "network", "cluster"]), env, LINUX_AMD64)
    message = raised.value.message
    assert f"the aws resource plugin v{version} (the installed pulumi_aws SDK asks for it: preview and up of the " \
           "backend and network and cluster layers run it)" in message
    assert (f"`groundctl pins update` in the repository (the pins lock groundctl-pins.json does not record "
            f"pulumi-resource-aws-v{version}-linux-amd64.tar.gz; review and commit it), then "
            f"`PULUMI_HOME={tmp_path / 'home'} groundctl pins install --plugins` there") in message
    assert "kubernetes" not in message and "never downloads" in message and "nothing was changed" in message
    one_paragraph(message)
    install(tmp_path / "home", "aws", version)
    plugins.require_plugins(program_needs(["backend", "network", "cluster"]), env, LINUX_AMD64)  # found: no error
    with pytest.raises(EngineError, match=f"kubernetes resource plugin v{sdk_version('pulumi_kubernetes')}"):
        plugins.require_plugins(program_needs(["flux"]), env, LINUX_AMD64)


def _entry(version: str, platform: str = LINUX_AMD64) -> Entry:
    file = f"pulumi-resource-aws-v{version}-{platform}.tar.gz"
    base = f"https://github.com/pulumi/pulumi-aws/releases/download/v{version}"
    return Entry("pulumi-resource-aws", version, platform, file, "a" * 64, f"{base}/{file}",
                 f"{base}/pulumi-aws_{version}_checksums.txt")


def test_the_install_command_carries_the_locks_digest_or_names_the_command_that_records_it():
    aws = Plugin("aws", "7.51.1", "pulumi_aws")
    lock = [_entry("7.51.1")]
    url = ("https://github.com/pulumi/pulumi-aws/releases/download/v7.51.1/"
           "pulumi-resource-aws-v7.51.1-linux-amd64.tar.gz")
    assert plugins.install_command(aws, LINUX_AMD64, None, lock) == (
        f'`t="$(mktemp -d)/pulumi-resource-aws-v7.51.1-linux-amd64.tar.gz" && curl -fsSL --max-time 900 -o "$t" '
        f'{url} && echo "{"a" * 64}  $t" | sha256sum --check --strict - && pulumi plugin install resource aws '
        'v7.51.1 --file "$t" --reinstall`')
    # No lock; a version no SDK asks for (a state's), which is recorded by name.
    for entries, version, extra in (([], "7.51.1", ""), (lock, "7.40.0", " --plugin aws@7.40.0")):
        text = plugins.install_command(Plugin("aws", version), LINUX_AMD64, "/h", entries)
        assert text == (f"`groundctl pins update{extra}` in the repository (the pins lock groundctl-pins.json does not "
                        f"record pulumi-resource-aws-v{version}-linux-amd64.tar.gz; review and commit it), then "
                        "`PULUMI_HOME=/h groundctl pins install --plugins` there")
    # A long home, or one with a space, is given whole and quoted: the command is copied and run as printed.
    home = "/srv/ci runners/" + "deep/" * 40 + ".pulumi"
    assert f"PULUMI_HOME='{home}' pulumi plugin install" in plugins.install_command(aws, LINUX_AMD64, home, lock)


@pytest.mark.parametrize("home", [
    "/srv/ci runners/it's here", "/srv/tab\there", "/srv/new\nline", os.fsdecode(b"/srv/caf\xe9-latin1"),
    "/srv/caf\u00e9 utf-8", "/srv/\x1b[31mred", "/srv/\u202eevil", "/srv/back\\slash$HOME`x`",
])
def test_the_printed_install_command_sets_pulumi_home_to_the_paths_very_bytes(home, tmp_path):
    """Pasted into bash, the command sets PULUMI_HOME to exactly the bytes of the path (a tab, a newline, a byte
    that is not UTF-8 included), and the line prints as plain text: no control or format character reaches a
    terminal."""
    import dataclasses
    import hashlib

    aws = Plugin("aws", "7.51.1", "pulumi_aws")
    tarball = b"the release tarball"
    lock = [dataclasses.replace(_entry("7.51.1"), sha256=hashlib.sha256(tarball).hexdigest())]
    shown = plugins.install_command(aws, LINUX_AMD64, home, lock)
    assert shown.isprintable() and shown.startswith("`t=") and " PULUMI_HOME=" in shown and shown.endswith("`"), shown
    # A `curl` answering the release file, and a `pulumi` that writes down the PULUMI_HOME it was given, where the
    # real one would be found (after the printed command checked the file's sha256).
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(f"#!{sys.executable}\nimport sys\n"
                                  f"open(sys.argv[sys.argv.index('-o') + 1], 'wb').write({tarball!r})\n")
    fake = bin_dir / "pulumi"
    fake.write_text(f"#!{sys.executable}\nimport os\nopen({str(seen)!r}, 'wb').write(os.environb[b'PULUMI_HOME'])\n")
    for tool in (fake, bin_dir / "curl"):
        tool.chmod(0o755)
    done = subprocess.run(["bash", "-c", shown[1:-1]], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert seen.read_bytes() == os.fsencode(home)


def test_the_preflight_prints_the_locks_checked_install_and_it_installs_nothing_that_differs(tmp_path, monkeypatch):
    """With the repository's lock in the working folder, the preflight's message carries the complete install
    command, the lock's digest in it (no value to fetch by hand); run as printed, a download with other bytes
    stops at `sha256sum --check` and Pulumi is never called; the lock's bytes are installed."""
    import dataclasses
    import hashlib
    import re

    from bootstrap.pins.lockfile import render

    version = sdk_version("pulumi_aws")
    tarball = b"the aws plugin's release tarball"
    entry = dataclasses.replace(_entry(version), sha256=hashlib.sha256(tarball).hexdigest())
    (tmp_path / "groundctl-pins.json").write_text(render([entry]))
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    with pytest.raises(EngineError) as raised:
        plugins.require_plugins(program_needs(["network"]), {"PULUMI_HOME": str(home), "PATH": str(tmp_path)},
                                LINUX_AMD64)
    message = raised.value.message
    assert "<sha256>" not in message and f'echo "{entry.sha256}  $t" | sha256sum --check --strict -' in message
    (shown,) = re.findall(r"`(t=[^`]+)`", message)
    bin_dir, seen = tmp_path / "bin", tmp_path / "seen"
    bin_dir.mkdir()
    served = tmp_path / "served"
    (bin_dir / "curl").write_text(f"#!{sys.executable}\nimport sys\n"
                                  f"open(sys.argv[sys.argv.index('-o') + 1], 'wb').write(open({str(served)!r}, 'rb')"
                                  ".read())\n")
    (bin_dir / "pulumi").write_text(f"#!/bin/sh\necho \"$@\" > {seen}\n")
    for tool in ("curl", "pulumi"):
        (bin_dir / tool).chmod(0o755)
    served.write_bytes(tarball + b"\0")  # a mirror serving other bytes than the lock checked
    done = subprocess.run(["bash", "-c", shown], env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr and not seen.exists()
    served.write_bytes(tarball)
    done = subprocess.run(["bash", "-c", shown], env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert seen.read_text().startswith(f"plugin install resource aws v{version} --file ")


def test_an_engine_that_runs_no_pulumi_program_needs_no_plugin():
    preflight.require_engine(object(), ["network"], {"PULUMI_HOME": "/nonexistent"})


def test_the_message_of_several_missing_plugins_is_one_paragraph():
    places = PluginPlaces(frozenset(), (), "/h/plugins", ignore_ambient=True)
    text = plugins.missing_plugins_message({Plugin("aws", "7.51.1", "pulumi_aws"): [("network", PROGRAM)],
                                            Plugin("kubernetes", "4.34.2", "pulumi_kubernetes"): [("flux", PROGRAM)]},
                                           places, "linux-arm64", PROVIDER_PLUGINS, [_entry("7.51.1")])
    assert "does not record pulumi-resource-aws-v7.51.1-linux-arm64.tar.gz" in text  # the lock has no arm64 entry
    assert "does not record pulumi-resource-kubernetes-v4.34.2-linux-arm64.tar.gz" in text
    assert "PULUMI_IGNORE_AMBIENT_PLUGINS is set" in text
    one_paragraph(text)


# -- the versions a stack's state records -------------------------------------------------------------


def provider(name: str, version, urn_name: str = "default") -> dict:
    inputs = {"version": version} if version is not None else {}
    return {"urn": f"urn:pulumi:dev::network::pulumi:providers:{name}::{urn_name}", "type": f"pulumi:providers:{name}",
            "inputs": inputs}


def test_the_state_records_each_providers_plugin_version():
    deployment = {"resources": [
        provider("aws", "7.40.0", "default_7_40_0"), provider("aws", "v7.51.1", "explicit"),
        provider("kubernetes", "4.30.0"), provider("pulumi", "3.0.0"),  # built into the engine: no plugin
        provider("random", None),  # no version recorded: Pulumi takes whichever is installed
        provider("aws", "latest\x1b[31m"), {"type": "aws:ec2/vpc:Vpc", "inputs": {"version": "1.0.0"}},
        "garbage", {"type": "pulumi:providers:aws", "inputs": "garbage"}]}
    assert plugins.state_plugins(deployment) == [Plugin("aws", "7.40.0"), Plugin("aws", "7.51.1"),
                                                 Plugin("kubernetes", "4.30.0")]
    for hostile in ({}, {"resources": None}, {"resources": "x"}, [], None):
        assert plugins.state_plugins(hostile) == []


def test_each_command_needs_the_programs_plugins_the_states_or_both():
    sdk, old = Plugin("aws", "7.51.1", "pulumi_aws"), Plugin("aws", "7.40.0")
    program, state = {"network": [sdk]}, {"network": [old, Plugin("aws", "7.51.1")]}
    assert plugins.command_needs("up", program, state) == {sdk: [("network", PROGRAM)]}
    assert plugins.command_needs("plan", program, state) == {sdk: [("network", PROGRAM)]}
    assert plugins.command_needs("destroy", program, state) == {old: [("network", STATE)],
                                                                Plugin("aws", "7.51.1"): [("network", STATE)]}
    # drift refreshes and previews; one entry per name and version, naming both reasons.
    assert plugins.command_needs("drift", program, state) == {sdk: [("network", PROGRAM), ("network", STATE)],
                                                              old: [("network", STATE)]}
    assert plugins.command_needs("something-new", program, state) == plugins.command_needs("drift", program, state)


class ProgramEngine:
    """An engine that runs the shipped programs under `env` (what require_engine reads of a PulumiEngine)."""

    def __init__(self, env: dict):
        self.stacks_dir = STACKS_DIR
        self.settings = type("Settings", (), {"env": env})()


def test_after_an_sdk_upgrade_refresh_and_drift_need_the_version_the_state_records(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a repository with no pins lock
    sdk = sdk_version("pulumi_aws")
    home = tmp_path / "home"
    install(home, "aws", sdk)
    engine = ProgramEngine({"PULUMI_HOME": str(home), "PATH": str(tmp_path), "PYTHONPATH": str(STACKS_DIR.parent),
                            "PULUMI_PYTHON_CMD": sys.executable})
    states = {"network": {"resources": [provider("aws", "7.40.0", "default_7_40_0")]}}.get
    preflight.require_engine(engine, ["network"], {}, operation="up", states=states)  # the program's: installed
    for operation in ("drift", "destroy", "refresh", "recover"):
        with pytest.raises(EngineError) as raised:
            preflight.require_engine(engine, ["network"], {}, operation=operation, states=states)
        message = raised.value.message
        assert "the aws resource plugin v7.40.0 (the state of the network layer records it for its provider: " \
               "refresh and destroy run that version" in message, message
        assert f"v{sdk}" not in message  # the program's version is installed: only the old one is named
        assert "`groundctl pins update --plugin aws@7.40.0` in the repository (the pins lock groundctl-pins.json " \
               "does not record pulumi-resource-aws-v7.40.0-linux-amd64.tar.gz" in message
        one_paragraph(message)
    install(home, "aws", "7.40.0")
    preflight.require_engine(engine, ["network"], {}, operation="drift", states=states)
    # A layer with no state yet records nothing.
    preflight.require_engine(engine, ["network"], {}, operation="drift", states=lambda layer: None)


def test_up_and_plan_never_read_the_states_their_providers_do_not_run(tmp_path):
    """The apply preflight hands every command a states reader (one bucket read per layer); only a command that
    runs the state's providers may spend it."""
    home = tmp_path / "home"
    install(home, "aws", sdk_version("pulumi_aws"))
    engine = ProgramEngine({"PULUMI_HOME": str(home), "PATH": str(tmp_path), "PYTHONPATH": str(STACKS_DIR.parent),
                            "PULUMI_PYTHON_CMD": sys.executable})
    read = []
    states = lambda layer: read.append(layer)  # noqa: E731 - records the reads, returns no state
    for operation in ("up", "plan"):
        preflight.require_engine(engine, ["network"], {}, operation=operation, states=states)
    assert read == []
    preflight.require_engine(engine, ["network"], {}, operation="destroy", states=states)
    assert read == ["network"]


def test_the_stored_state_is_read_from_the_bucket_whatever_its_encoding(aws, bucket):
    import gzip

    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.records import layout

    store = ObjectStore(aws.client("s3"), bucket)
    assert preflight.stored_states(store, "dev")("network") is None  # no state yet
    deployment = {"resources": [provider("aws", "7.40.0")]}
    checkpoint = {"version": 3, "checkpoint": {"latest": deployment}}
    store.put(layout.stack_key("network", "dev", ".json.gz"), gzip.compress(json.dumps(checkpoint).encode()))
    store.put(layout.stack_key("cluster", "dev"), b"{not json")
    read = preflight.stored_states(store, "dev")  # a run's reader reads each state once: a new run's
    assert read("network") == deployment
    assert read("cluster") is None  # unreadable: the engine reports it, with its own words
    assert preflight.stored_states(ObjectStore(aws.client("s3"), f"{bucket}-missing"), "dev")("network") is None


def test_a_run_reads_each_layers_state_once_for_the_plugins_and_the_pending_operations(aws, bucket):
    """The engine phase (destroy: the plugins its states record) and the pending phase share one reader."""
    from bootstrap.aws.objectstore import ObjectStore

    store = ObjectStore(aws.client("s3"), bucket)
    asked = []
    get = store.get
    def counted(key, *a, **kw):
        asked.append(key)
        return get(key, *a, **kw)
    store.get = counted
    read = preflight.stored_states(store, "dev")
    checkpoint = {"version": 3, "checkpoint": {"latest": {"resources": [provider("aws", "7.40.0")]}}}
    store.put(".pulumi/stacks/network/dev.json", json.dumps(checkpoint).encode())
    assert read("network") == checkpoint["checkpoint"]["latest"] and read("network") is read("network")
    assert read("cluster") is None and read("cluster") is None
    assert asked == [".pulumi/stacks/network/dev.json"]


# -- where Pulumi's home is ----------------------------------------------------------------------------


def test_pulumi_home_is_where_pulumi_looks_not_where_home_points():
    passwd = "# a comment\nroot:x:0:0:root:/root:/bin/bash\nci:x:1001:1001::/home/ci:/bin/sh\nbad:line\n"
    assert plugins.account_home(passwd, 1001) == "/home/ci" and plugins.account_home(passwd, 0) == "/root"
    assert plugins.account_home(passwd, 4242) is None
    overridden = {"HOME": "/tmp/elsewhere", "USER": "ci"}  # `sudo -E`, a runner that sets HOME
    assert plugins.pulumi_home(overridden, "/home/ci") == "/home/ci/.pulumi"
    assert plugins.pulumi_home({**overridden, "PULUMI_HOME": "/p"}, "/home/ci") == "/p"
    # A uid the user database lacks: Go's os/user falls back to $HOME, and only with $USER set.
    assert plugins.pulumi_home(overridden, None) == "/tmp/elsewhere/.pulumi"
    assert plugins.pulumi_home({"HOME": "/tmp/elsewhere"}, None) is None


def test_the_plugin_folder_of_the_accounts_home_is_read_even_when_home_points_elsewhere(tmp_path):
    account, elsewhere = tmp_path / "account", tmp_path / "elsewhere"
    install(account / ".pulumi", "aws", "7.51.1")
    env = {"HOME": str(elsewhere), "USER": "ci", "PATH": str(tmp_path / "empty")}
    places = plugins.plugin_places(env, {"aws"}, account=lambda: str(account))
    assert plugins.is_installed(Plugin("aws", "7.51.1"), places)
    assert places.plugin_dir == str(account / ".pulumi" / "plugins")
    # The probe reads the account's home from the user database, as Pulumi's CLI does.
    import pwd

    assert plugins._account_home() == pwd.getpwuid(os.getuid()).pw_dir


# -- pip in the programs' Python ---------------------------------------------------------------------


def test_the_programs_python_must_have_pip(tmp_path):
    problem = toolchain.pip_problem("/venv/bin/python", False, "/venv/bin/python")
    assert "/venv/bin/python -m ensurepip --upgrade" in problem and "uv venv --seed" in problem
    assert "python -m pip list" in problem and "Nothing was changed" in problem
    one_paragraph(problem)
    assert toolchain.pip_problem("/venv/bin/python", True, "/venv/bin/python") is None
    assert "is not on PATH" in toolchain.pip_problem(None, False, "python3 or python")
    toolchain.require_pip({"PULUMI_PYTHON_CMD": sys.executable})  # this interpreter has pip
    bare = tmp_path / "no-pip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=300)
    with pytest.raises(EngineError, match="has no pip"):
        toolchain.require_pip({"PULUMI_PYTHON_CMD": str(bare / "bin" / "python")})
    # Without PULUMI_PYTHON_CMD, Pulumi runs the first python3 on PATH: the same check applies to it.
    with pytest.raises(EngineError, match="has no pip"):
        toolchain.require_pip({"PATH": str(bare / "bin")})


def test_the_engine_check_refuses_a_python_without_pip_before_looking_at_plugins(tmp_path):
    bare = tmp_path / "no-pip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=300)
    engine = ProgramEngine({"PULUMI_HOME": str(tmp_path / "home"), "PATH": str(tmp_path),
                            "PULUMI_PYTHON_CMD": str(bare / "bin" / "python")})
    with pytest.raises(EngineError, match="has no pip") as raised:
        preflight.require_engine(engine, ["network"], {})
    assert "plugin" not in raised.value.message


# -- the recovery stops before its restore -----------------------------------------------------------


def deleted_state(store, env: str, provider: str | None = None):
    """Three recorded updates of network/<env>, then its state object deleted: a recovery would restore it.
    With `provider`, its states bind an aws provider to that plugin version."""
    from bootstrap.records import layout
    from tests.fakes.engine import BucketEngine, FakeResource, LINEAGE_CONFIG, quick_append

    engine = BucketEngine(env, store=store)
    engine.set_config("network", LINEAGE_CONFIG, "11111111-1111-4111-8111-111111111111")
    bound = [FakeResource("pulumi:providers:aws", f"default_{provider.replace('.', '_')}", {"version": provider},
                          id="3f1c8e2a-0d4b-4c6e-9a7f-5b2d1e0c9a8b")] if provider else []
    for i in range(3):
        engine.declare("network", bound + [FakeResource("aws:ec2/vpc:Vpc", f"vpc-{j}", {"n": j})
                                           for j in range(i + 1)])
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
    from recovery.survivors.inventory import collect
    from tests.fakes.engine import quick_append

    store, env = ObjectStore(aws.client("s3"), bucket), f"e{uuid.uuid4().hex[:8]}"
    engine = deleted_state(store, env)
    before, calls = versions(store), []

    def ready(chosen):
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


def test_recover_checks_the_plugin_version_the_chosen_state_records_before_its_restore(aws, bucket, tmp_path,
                                                                                     monkeypatch):
    """Issue 27 §3: the refresh and import after a restore run the plugin version the chosen state binds its
    provider to. `recover`'s check before the restore (engine_ready) was given the program's plugins only, so a
    version the SDK upgrade left behind failed the verification after the restore had written; now it names it
    and nothing is written."""
    from types import SimpleNamespace

    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.records.locks import EnvironmentLock
    from groundctl.recover import engine_ready
    from recovery.guide.flow import run_guide
    from recovery.guide.model import GuideOptions, GuideServices
    from recovery.survivors.inventory import collect
    from tests.fakes.engine import quick_append

    store, env = ObjectStore(aws.client("s3"), bucket), f"e{uuid.uuid4().hex[:8]}"
    engine = deleted_state(store, env, provider="7.40.0")
    home = tmp_path / "home"
    program = plugins.layer_plugins(STACKS_DIR, "network", str(STACKS_DIR.parent))
    for plugin in program:
        install(home, plugin.name, plugin.version)
    engine.stacks_dir = STACKS_DIR
    engine.settings = SimpleNamespace(env={"PULUMI_HOME": str(home), "PATH": str(tmp_path / "no-plugins"),
                                           "PYTHONPATH": str(STACKS_DIR.parent), "PULUMI_PYTHON_CMD": sys.executable})
    monkeypatch.setattr("bootstrap.aws.backend.check_account", lambda spec, clients: "123456789012")
    target = SimpleNamespace(spec=None, clients=None, engine=engine, engine_check=lambda: None)
    given = []
    before = versions(store)

    def ready(chosen):
        given.append(chosen)
        engine_ready(target, "network", chosen)

    svc = GuideServices(store=store, engine=lambda: engine, inventory=lambda e, layer: collect(aws, e, layer),
                        lock_factory=lambda s, e, run_id: EnvironmentLock(s, e, run_id, settle_seconds=0),
                        confirm=lambda q: True, append_record=quick_append, ready=ready)
    transcript = run_guide(GuideOptions(env, "network", yes=True), svc)
    phases = {c.phase: c for c in transcript.conditions}
    assert transcript.exit_code == 4 and phases["restore"].status == "failed", phases["restore"].message
    message = " ".join(phases["restore"].message.split())
    assert "Nothing was restored or written" in message
    assert "the aws resource plugin v7.40.0 (the state of the network layer records it for its provider" in message
    assert all(f"v{p.version}" not in message for p in program)  # the program's are installed
    assert versions(store) == before
    (chosen,) = given
    assert [(r["type"], r["inputs"]["version"]) for r in chosen["resources"]] == [
        ("pulumi:providers:aws", "7.40.0")]
    install(home, "aws", "7.40.0")
    engine_ready(target, "network", chosen)  # the version the chosen state records is there: the way is open


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
