"""`groundctl state rehearse` through the front door on the emulator: an environment deployed by the in-memory
engine (real ledger, real S3 versions), the recovery's real choice, the real scratch backend, and a stand-in
for the Pulumi engine on that scratch backend that reads back exactly what the rehearsal placed there. The
real engine runs the same scenarios in tests/test_engine_tier_rehearsal.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import urlparse

import pytest

from bootstrap.engine.errors import UnexpectedChanges
from bootstrap.kit.errors import EngineError
from bootstrap.layers import LAYER_NAMES
from bootstrap.planning.plan import Plan, ResourceChange
from bootstrap.records import layout
from recovery.evidence.summary import key as summary_key
from bootstrap.records.ledger import read_ledger
from recovery.evidence.rehearsal_record import load_rehearsal_record, parse_name
from tests.test_cli_up import cli  # noqa: F401 - fixture


class ScratchStandIn:
    """Stands in for PulumiEngine on the scratch backend: what it exports and previews is what the rehearsal
    placed in the scratch folder (and handed it as `state_of`); `behaviour[layer]` makes one layer drift or fail.
    As Pulumi's, its preview cannot run with a wrong passphrase (it decrypts the state and the config first)."""

    behaviour: dict = {}
    seen: list = []
    exported: list = []  # the layers whose state was exported with its secrets decrypted
    previewed: list = []

    def __init__(self, spec, *, backend_override=None, secrets_provider=None, lineage_for=None, state_of=None, **_):
        assert backend_override and backend_override.startswith("file://"), backend_override
        self.root, self.env, self.provider = Path(urlparse(backend_override).path), spec.name, secrets_provider
        placed = [layer for layer in LAYER_NAMES if state_of(layer) is not None]
        assert len(placed) == 1 and state_of(placed[0]) == self._state(placed[0])

    def _state(self, layer: str) -> dict:
        body = (self.root / layout.stack_key(layer, self.env)).read_bytes()
        self.seen.append((layer, hashlib.sha256(body).hexdigest(), self.provider))
        return json.loads(body)["checkpoint"]["latest"]

    def _secrets_manager(self, layer: str) -> None:
        if self.behaviour.get(layer) == "wrong-passphrase":
            raise EngineError(f"Layer '{layer}': getting secrets manager: incorrect passphrase")

    def export_state(self, layer: str) -> dict:
        self.exported.append(layer)
        self._secrets_manager(layer)
        return {"deployment": self._state(layer)}

    def preview(self, layer: str, **kw) -> Plan:
        assert kw == {"refresh": True, "expect_no_changes": True}
        self.previewed.append(layer)
        self._secrets_manager(layer)
        urns = [r["urn"] for r in self._state(layer)["resources"]]
        if self.behaviour.get(layer) == "drift":
            raise UnexpectedChanges(Plan(layer, self.env, (ResourceChange(urns[-1], "t", "update", ("cidrBlock",)),)))
        if self.behaviour.get(layer) == "preview-fails":
            raise EngineError(f"preview of {layer} failed: AccessDenied reading {urns[-1]}")
        return Plan(layer, self.env, tuple(ResourceChange(u, "t", "same") for u in urns))


@pytest.fixture
def rehearse(cli, monkeypatch):  # noqa: F811 - the fixture imported above
    monkeypatch.setattr("bootstrap.engine.automation.PulumiEngine", ScratchStandIn)
    monkeypatch.setattr("bootstrap.engine.preflight.require_cli", lambda: "v3.259.0")
    monkeypatch.setattr(ScratchStandIn, "behaviour", {})
    monkeypatch.setattr(ScratchStandIn, "seen", [])
    monkeypatch.setattr(ScratchStandIn, "exported", [])
    monkeypatch.setattr(ScratchStandIn, "previewed", [])
    code, out, err = cli("up", "SPEC", "--yes", "--json")
    assert code == 0, err

    def run(*args: str, json_out: bool = True) -> tuple[int, dict, str]:
        before = _outside_rehearsals(cli.store)
        code, out, err = cli("state", "rehearse", "SPEC", *(["--json"] if json_out else []), *args)
        assert _outside_rehearsals(cli.store) == before  # nothing but the record was written
        return code, json.loads(out) if json_out else out, err

    run.store = cli.store
    return run


def _outside_rehearsals(store) -> list[tuple]:
    """Every version and delete marker in the bucket but the rehearsal records and the environment's summary they
    add themselves to: stacks, Pulumi's locks, the ledger, groundctl's lock."""
    return sorted((v.key, v.version_id, v.etag, v.delete_marker) for v in store.versions("")
                  if not v.key.startswith(layout.rehearsals_prefix("local")) and v.key != summary_key("local"))


def _layers(doc: dict) -> dict:
    return {lay["layer"]: lay for lay in doc["layers"]}


def test_a_clean_environment_is_proven_layer_by_layer_with_the_ledger_heads_and_recorded(rehearse):
    code, doc, err = rehearse("--record")
    layers = _layers(doc)
    assert code == 0 and doc["outcome"] == "proven", err
    assert {n: lay["outcome"] for n, lay in layers.items()} == {
        "backend": "proven", "network": "proven", "cluster": "proven", "flux": "skipped"}
    for name in ("backend", "network", "cluster"):
        head = read_ledger(rehearse.store, name, "local").head
        lay = layers[name]
        assert lay["version"]["serial"] == head.serial and lay["version"]["version_id"] == head.version_id
        assert (name, head.sha256, "passphrase") in ScratchStandIn.seen  # the very bytes the ledger recorded
        assert lay["age_seconds"] >= 0 and set(lay["seconds"]) == {"choose", "restore", "decrypt", "preview"}
        # The ledger head is the stack's newest version: nothing newer to lose, whatever its age.
        assert lay["rpo_seconds"] == 0 and lay["newer"] == {"versions": 0, "oldest": None}
        assert lay["decrypt"]["result"] == "ok" and lay["preview"]["result"] == "no-change"
    # The previews decrypted every state: no layer paid for an export of its own.
    assert ScratchStandIn.exported == []
    assert [r["layer"] for r in layers["cluster"]["references"]] == ["backend", "network"]
    assert all(r["restored"] for r in layers["cluster"]["references"])
    assert doc["pulumi_version"] == "v3.259.0" and doc["groundctl_version"]
    keys = [k for k, _s, _m in rehearse.store.keys(layout.rehearsals_prefix("local"))]
    assert len(keys) == 1
    stored = load_rehearsal_record(rehearse.store.get(keys[0]).body, keys[0])
    assert stored["rehearsal_id"] == doc["rehearsal_id"] and stored["layers"] == doc["layers"]
    assert parse_name(keys[0].rsplit("/", 1)[1])["layers"]["cluster"] == {"outcome": "proven", "rpo_seconds": 0}


def test_drift_is_restorable_and_reported_with_the_resources_and_fields(rehearse):
    ScratchStandIn.behaviour["network"] = "drift"
    code, doc, _ = rehearse("--layers", "network")
    net = _layers(doc)["network"]
    assert code == 1 and doc["outcome"] == "drift" and net["outcome"] == "drift" and net["failed_phase"] is None
    assert net["preview"]["changes"][0]["operation"] == "update"
    assert net["preview"]["changes"][0]["diff_keys"] == ["cidrBlock"]
    assert list(_layers(doc)) == ["network"]  # backend was only restored, as the layer network reads
    code, out, err = rehearse("--layers", "network", json_out=False)
    assert code == 1 and "rehearsal drift" in err and "update" in err and "(cidrBlock)" in err
    assert "network" in out and "serial" in out


def test_a_wrong_passphrase_fails_the_layer_naming_the_provider_and_the_preview_is_not_run(rehearse):
    ScratchStandIn.behaviour["cluster"] = "wrong-passphrase"
    code, doc, err = rehearse("--layers", "network,cluster")
    cluster = _layers(doc)["cluster"]
    assert code == 1 and doc["outcome"] == "failed" and _layers(doc)["network"]["outcome"] == "proven"
    assert (cluster["failed_phase"], cluster["decrypt"]["kind"]) == ("decrypt", "wrong-passphrase")
    assert "(passphrase)" in cluster["reason"] and cluster["preview"]["result"] == "not-attempted"


def test_a_failed_preview_is_a_failure_with_the_engines_error_never_drift(rehearse):
    ScratchStandIn.behaviour["network"] = "preview-fails"
    code, doc, _ = rehearse("--layers", "network")
    net = _layers(doc)["network"]
    assert code == 1 and (net["outcome"], net["failed_phase"]) == ("failed", "preview")
    assert "AccessDenied" in net["preview"]["error"]
    # The export after the failed preview told that the secrets were not the cause.
    assert ScratchStandIn.exported == ["network"] and net["decrypt"]["result"] == "ok"


def test_a_corrupt_newest_version_falls_back_as_recover_would_and_names_the_version_proven(rehearse):
    key = layout.stack_key("network", "local")
    good = rehearse.store.get(key).body
    corrupt = rehearse.store.put(key, good[: len(good) // 2])
    head = read_ledger(rehearse.store, "network", "local").head
    code, doc, _ = rehearse("--layers", "network", "--newest", "2")
    net = _layers(doc)["network"]
    assert code == 0 and net["version"]["version_id"] == head.version_id and net["version"]["serial"] == head.serial
    # What a restore of it loses is the corrupt write: the measured RPO is that version's age, not the head's.
    assert net["newer"]["versions"] == 1 and net["newer"]["oldest"]["version_id"] == corrupt
    assert 0 <= net["rpo_seconds"] <= net["age_seconds"]
    assert [p["reason"].split(":")[0] for p in net["not_rehearsed"]] == ["unreadable"]


def test_a_version_whose_urns_name_another_stack_is_never_rehearsed(rehearse):
    key = layout.stack_key("network", "local")
    head = read_ledger(rehearse.store, "network", "local").head
    state = json.loads(rehearse.store.get(key).body)
    for r in state["checkpoint"]["latest"]["resources"]:
        r["urn"] = r["urn"].replace("urn:pulumi:local::", "urn:pulumi:prod::")
    rehearse.store.put(key, json.dumps(state).encode())
    code, doc, _ = rehearse("--layers", "network", "--newest", "3")
    net = _layers(doc)["network"]
    assert code == 0 and net["version"]["version_id"] == head.version_id
    foreign = [p for p in net["not_rehearsed"] if "another stack" in p["reason"]]
    assert len(foreign) == 1 and "prod::network" in foreign[0]["reason"]
    placed = {sha for layer, sha, _p in ScratchStandIn.seen if layer == "network"}
    assert hashlib.sha256(json.dumps(state).encode()).hexdigest() not in placed


def test_a_plugin_version_the_state_records_and_this_machine_lacks_fails_the_layer_naming_its_install(
        rehearse, cli, tmp_path, monkeypatch):  # noqa: F811 - the fixture imported above
    """Issue 28: the preview --refresh of a restored state runs the provider plugin versions the state binds its
    providers to, which after an SDK upgrade may be older than any installed here; the rehearsal checked the
    layer programs' plugins only. The network and cluster states bind aws v7.40.0, not installed (the programs'
    versions are): each layer fails at its preview, which never runs, its reason naming the plugin, the version
    and the preflight's install command, and its secrets still decrypted on their own (an export runs no
    provider); the backend, whose state records none, is proven. The version is looked for once in the run,
    however many states record it. Installed, both layers are proven."""
    import platform
    import sys
    from types import SimpleNamespace

    from bootstrap.engine import plugins
    from bootstrap.engine.plugins import Plugin, install_command, layer_plugins
    from bootstrap.engine.versions import platform_key
    from bootstrap.layers import STACKS_DIR
    from tests.fakes.engine import FakeResource
    from tests.test_preflight import install

    old = Plugin("aws", "7.40.0")
    bound = FakeResource("pulumi:providers:aws", "default_7_40_0", {"version": old.version},
                         id="3f1c8e2a-0d4b-4c6e-9a7f-5b2d1e0c9a8b")
    for layer in ("network", "cluster"):
        outputs, secret = cli.engine.declared_outputs[layer]
        cli.engine.declare(layer, [bound, *cli.engine.desired[layer]], outputs, secret)
    assert cli("up", "SPEC", "--layers", "network,cluster", "--yes")[0] == 0
    home = tmp_path / "pulumi-home"
    program = {p for layer in ("backend", "network", "cluster")
               for p in layer_plugins(STACKS_DIR, layer, str(STACKS_DIR.parent))}
    assert program and all(p.version != old.version for p in program)
    for plugin in program:
        install(home, plugin.name, plugin.version)
    monkeypatch.setattr(ScratchStandIn, "stacks_dir", STACKS_DIR, raising=False)
    monkeypatch.setattr(ScratchStandIn, "settings", SimpleNamespace(env={
        "PULUMI_HOME": str(home), "PATH": str(tmp_path / "no-plugins"), "PULUMI_PYTHON_CMD": sys.executable,
        "PYTHONPATH": str(STACKS_DIR.parent)}), raising=False)
    looked, is_installed = [], plugins.is_installed
    monkeypatch.setattr(plugins, "is_installed", lambda p, places: looked.append(p) or is_installed(p, places))

    code, doc, err = rehearse("--record", "--newest", "2")
    layers = _layers(doc)
    assert code == 1 and doc["outcome"] == "failed", err
    assert {n: lay["outcome"] for n, lay in layers.items()} == {
        "backend": "proven", "network": "failed", "cluster": "failed", "flux": "skipped"}
    # No pins lock where the rehearsal runs: the command records the state's version first.
    command = install_command(old, platform_key(platform.system(), platform.machine()), str(home), [])
    for name in ("network", "cluster"):
        lay = layers[name]
        reason = " ".join(lay["reason"].split())
        assert lay["failed_phase"] == "preview" and lay["preview"]["result"] == "not-attempted", lay
        assert reason.startswith(f"The preview of {lay['version']['label']} could not run here"), reason
        assert f"the aws resource plugin v7.40.0 (the state of the {name} layer records it for its provider" in reason
        assert f"install it with {command}" in reason and "groundctl pins update --plugin aws@7.40.0" in command
        assert all(f"v{p.version}" not in reason for p in program)  # the programs' are installed
        assert lay["decrypt"]["result"] == "ok"
        # --newest: the version before the provider was bound records none, and is proven.
        assert [o["outcome"] for o in lay["others"]] == ["proven"]
    assert "network" in ScratchStandIn.exported and "cluster" in ScratchStandIn.exported
    # Their older versions only (--newest): the chosen ones were never previewed.
    assert [n for n in ScratchStandIn.previewed if n in ("network", "cluster")] == ["network", "cluster"]
    assert looked.count(old) == 1
    keys = [k for k, _s, _m in rehearse.store.keys(layout.rehearsals_prefix("local"))]
    assert len(keys) == 1 and parse_name(keys[0].rsplit("/", 1)[1])["layers"]["network"]["outcome"] == "failed"
    assert load_rehearsal_record(rehearse.store.get(keys[0]).body, keys[0])["layers"] == doc["layers"]

    code, out, err = rehearse("--layers", "network", json_out=False)
    said = " ".join(err.split())
    assert code == 1 and "rehearsal failed" in said and "network: The preview of" in said and command in said

    install(home, old.name, old.version)
    code, doc, err = rehearse()
    assert code == 0 and {n: lay["outcome"] for n, lay in _layers(doc).items()} == {
        "backend": "proven", "network": "proven", "cluster": "proven", "flux": "skipped"}, err
