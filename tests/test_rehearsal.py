"""The restore rehearsal's pure core: which layers and references, what a decryption and a preview proved,
and the record (built, named, read back as untrusted input)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from bootstrap.engine.results import SECRET_SIG
from bootstrap.kit.untrusted import Unreadable
from recovery.evidence.rehearsal_judge import (Attempt, Decrypt, KeyState, LayerResult, Preview,
                                      decrypt_failure, failure_kind, kms_key_id, kms_region, preview_from_row,
                                      run_outcome, secrets_in)
from recovery.evidence.rehearsal_record import load_rehearsal_record, parse_name, record_name, rehearsal_record
from recovery.rehearsal.scope import newest_to_rehearse, plan_scope, references_of, version_of

KMS = "awskms://alias/groundctl-dev?region=eu-west-1"
T0 = 1_800_000_000.0


# -- scope -----------------------------------------------------------------------------------------


def test_a_layer_is_rehearsed_after_the_layers_it_reads_which_are_restored_only():
    scope = plan_scope(["cluster"], emulated=False)
    assert [(s.layer, s.rehearse) for s in scope.layers] == [("backend", False), ("network", False),
                                                             ("cluster", True)]
    assert scope.layers[-1].references == ("backend", "network")
    assert references_of("flux") == ("backend", "network", "cluster")


def test_every_layer_by_default_and_flux_is_skipped_on_the_emulator_with_the_reason():
    scope = plan_scope(None, emulated=True)
    assert [s.layer for s in scope.rehearsed] == ["backend", "network", "cluster", "flux"]
    flux = scope.layers[-1]
    assert flux.skip_reason and "Kubernetes" in flux.skip_reason
    assert all(s.skip_reason is None for s in scope.layers[:-1])
    assert plan_scope(None, emulated=False).layers[-1].skip_reason is None


class _Ev:
    def __init__(self, verdict="integral", foreign=(), sha="s", lineage="L", error=None, findings=()):
        self.verdict, self.foreign, self.sha256, self.lineage = verdict, foreign, sha, lineage
        self.error, self.findings = error, findings


class _Cand:
    def __init__(self, vid, ev, source="version"):
        self.key, self.version_id, self.source, self.evaluation = ".pulumi/stacks/network/dev.json", vid, source, ev
        self.last_modified = datetime(2026, 12, 1, tzinfo=timezone.utc)

    @property
    def ident(self):
        return (self.key, self.version_id)


def test_of_the_newest_versions_another_stacks_state_and_an_unreadable_one_are_never_rehearsed():
    cands = [_Cand("v4", _Ev(foreign=("prod::network",)), "current"), _Cand("v3", _Ev("unreadable", error="bad gzip")),
             _Cand("v2", _Ev()), _Cand("v1", _Ev())]
    rehearse, passed = newest_to_rehearse(cands, cands[3].ident, {"v2": 7})
    assert [v["version_id"] for v in rehearse] == ["v2"] and rehearse[0]["serial"] == 7
    reasons = {p["version_id"]: p["reason"] for p in passed}
    assert "another stack (prod::network)" in reasons["v4"] and "never restored" in reasons["v4"]
    assert reasons["v3"] == "unreadable: bad gzip"


# -- the measured RPO ------------------------------------------------------------------------------


def _option(version_id, serial, hours_ago, source="version", sha="s", **kw):
    from recovery.choice.choose import Option

    return Option((".pulumi/stacks/network/dev.json", version_id), source,
                  datetime.fromtimestamp(T0 - hours_ago * 3600, timezone.utc), verdict=kw.pop("verdict", "integral"),
                  sha256=sha, serial=serial, **kw)


def test_a_restore_of_the_newest_version_of_an_untouched_stack_loses_nothing_however_old_it_is():
    from recovery.choice.choose import Choice
    from recovery.choice.recovery_point import measured_rpo

    untouched = Choice(_option("v7", 7, 30 * 24, "current", is_current=True))
    assert measured_rpo(untouched, T0) == (0.0, ())


def test_the_measured_rpo_is_the_age_of_the_oldest_state_written_after_the_proven_one():
    from recovery.choice.choose import Choice
    from recovery.choice.recovery_point import measured_rpo

    chosen = _option("v5", 5, 30 * 24, sha="five")
    newer = (_option("v7", 7, 2, "current", sha="seven", verdict="damaged", is_current=True),
             _option("h7", 7, 2, "history", sha="seven"),                # a copy of v7: not a stack version
             _option("v6", None, 5, after_serial=5, sha="six"),           # unledgered, written after serial 5
             _option("b5", 5, 1, "backup", sha="five"),                   # a copy of the proven state
             _option("v5b", None, 4, after_serial=5, sha="five"),         # the proven bytes saved again
             _option("vx", 9, 3, foreign=("prod::network",), sha="x"))    # another stack's state, not this one's
    rpo, lost = measured_rpo(Choice(chosen, newer=newer), T0)
    assert rpo == 5 * 3600.0 and [o.ident[1] for o in lost] == ["v7", "v6"]
    assert measured_rpo(Choice(chosen, newer=newer[:1]), T0) == (2 * 3600.0, newer[:1])


# -- decryption ------------------------------------------------------------------------------------


def test_secrets_are_counted_and_their_plaintexts_kept_for_redaction():
    dep = {"resources": [{"outputs": {"kubeconfig": {SECRET_SIG[0]: "1b47061264138c4ac30d75fd1eb44270",
                                                      "plaintext": '"token-abcdef"'}},
                          "inputs": {"x": [{SECRET_SIG[0]: "1b47", "plaintext": '"short"'}]}}]}
    count, plain = secrets_in(dep)
    assert count == 2 and "token-abcdef" in plain and "short" not in plain  # too short to mask anywhere


@pytest.mark.parametrize("provider, error, key, kind", [
    ("passphrase", "error: incorrect passphrase", None, "wrong-passphrase"),
    (None, "passphrase must be set with PULUMI_CONFIG_PASSPHRASE", None, "passphrase-missing"),
    (KMS, "operation error KMS: Decrypt, https response error StatusCode: 400, AccessDeniedException: no", None,
     "access-denied"),
    (KMS, "operation error KMS: Decrypt, DisabledException: key is disabled", None, "key-disabled"),
    (KMS, "KMSInvalidStateException: pending", KeyState("alias/x", state="PendingDeletion"), "key-pending-deletion"),
    (KMS, "something opaque", KeyState("alias/x", state="Disabled"), "key-disabled"),
    (KMS, "NotFoundException: alias", KeyState("alias/x", error="NotFoundException"), "key-not-found"),
    (KMS, "something opaque", KeyState("alias/x", state="Enabled"), "decrypt-failed"),
])
def test_why_a_decryption_failed(provider, error, key, kind):
    assert failure_kind(provider, error, key) == kind


def test_a_disabled_key_is_named_with_its_arn_and_the_provider():
    key = KeyState("alias/groundctl-dev", "arn:aws:kms:eu-west-1:123456789012:key/k-1", "Disabled")
    d = decrypt_failure(KMS, "DisabledException: arn:aws:kms:eu-west-1:123456789012:key/k-1 is disabled.", key)
    assert (d.result, d.kind, d.provider) == ("failed", "key-disabled", KMS)
    assert KMS in d.message and "arn:aws:kms:eu-west-1:123456789012:key/k-1 (alias/groundctl-dev) is disabled" \
        in d.message
    assert d.to_dict()["key"]["state"] == "Disabled"
    assert kms_key_id(KMS) == "alias/groundctl-dev" and kms_region(KMS) == "eu-west-1"
    assert kms_key_id("passphrase") is None


def test_a_wrong_passphrase_names_the_passphrase_provider_and_the_engine_error():
    d = decrypt_failure("passphrase", "constructing secrets manager: incorrect passphrase")
    assert d.kind == "wrong-passphrase" and "(passphrase)" in d.message and "incorrect passphrase" in d.message


# -- the preview and the outcome ----------------------------------------------------------------------


def test_a_drift_row_becomes_a_drift_preview_with_resources_and_fields():
    row = {"state": "drift", "summary": "1 to update", "counts": {"update": 1, "same": 3},
           "changes": [{"urn": "urn:pulumi:dev::network::t::vpc", "type": "t", "operation": "update",
                        "diff_keys": ["body"]}]}
    p = preview_from_row(row)
    assert p.result == "drift" and p.changes[0]["diff_keys"] == ["body"] and p.changes_total == 1
    assert preview_from_row({"state": "clean", "summary": "no changes", "counts": {"same": 4}}).result == "no-change"


def _attempt(**kw) -> Attempt:
    version = version_of(".pulumi/stacks/network/dev.json", "v1", "current",
                         datetime.fromtimestamp(T0 - 3600, timezone.utc), serial=3, sha256="ab", lineage="L")
    return Attempt(version, 3600.0, Decrypt("ok", "passphrase", secrets=1), Preview("no-change", "no changes"),
                   {"restore": 0.2, "decrypt": 1.0, "preview": 3.5}, **kw)


def test_outcomes_of_a_version_a_layer_and_a_run():
    proven = LayerResult("network", _attempt())
    drift = LayerResult("cluster", Attempt(proven.attempt.version, 10.0, preview=Preview("drift")))
    failed = LayerResult("cluster", _attempt(failed_phase="decrypt", reason="wrong passphrase"))
    refused = LayerResult("cluster", failed_phase="choose", reason="tampered")
    skipped = LayerResult("flux", skipped="no Kubernetes API")
    assert [r.outcome for r in (proven, drift, failed, refused, skipped)] == [
        "proven", "drift", "failed", "failed", "skipped"]
    assert run_outcome([proven, skipped]) == "proven" and run_outcome([proven, drift]) == "drift"
    assert run_outcome([drift, refused]) == "failed" and run_outcome([skipped]) == "skipped"


# -- the record ------------------------------------------------------------------------------------


def _record(*layers: LayerResult, **kw) -> dict:
    return rehearsal_record("dev", list(layers), started=T0, finished=T0 + 12.5, groundctl_version="0.9.0",
                            pulumi_version="v3.259.0", rehearsal_id="20270115T080000Z-abc123", **kw)


def test_the_record_holds_version_age_rpo_phases_and_versions_and_its_name_says_each_layers_verdict():
    newer = {"versions": 1, "oldest": {"version_id": "v2", "time": "2027-01-15T07:30:00+00:00", "serial": None}}
    rec = _record(LayerResult("network", _attempt(), seconds={"choose": 0.4}, rpo_seconds=1800.0, newer=newer),
                  LayerResult("flux", skipped="no Kubernetes API"))
    net = rec["layers"][0]
    assert (rec["outcome"], rec["pulumi_version"], rec["groundctl_version"]) == ("proven", "v3.259.0", "0.9.0")
    assert net["version"]["serial"] == 3 and net["version"]["version_id"] == "v1" and net["age_seconds"] == 3600.0
    assert net["rpo_seconds"] == 1800.0 and net["newer"] == newer
    assert net["seconds"] == {"choose": 0.4, "restore": 0.2, "decrypt": 1.0, "preview": 3.5}
    assert net["decrypt"]["provider"] == "passphrase" and net["preview"]["result"] == "no-change"
    name = record_name(rec)
    assert name.endswith("--network.proven.1800s+flux.skipped")  # the measured RPO, not the version's age
    parsed = parse_name(name + ".json")
    assert parsed["rehearsal_id"] == "20270115T080000Z-abc123" and parsed["at"] == rec["at"]
    assert parsed["layers"] == {"network": {"outcome": "proven", "rpo_seconds": 1800},
                                "flux": {"outcome": "skipped", "rpo_seconds": None}}
    assert load_rehearsal_record(json.dumps(rec).encode(), "k") == rec
    newest = _record(LayerResult("network", _attempt(), rpo_seconds=0.0, newer={"versions": 0, "oldest": None}))
    assert record_name(newest).endswith("--network.proven.0s")
    with pytest.raises(Unreadable, match="rpo_seconds"):
        load_rehearsal_record(json.dumps(newest | {"layers": [newest["layers"][0] | {"rpo_seconds": -5}]}).encode(),
                              "k")


def test_a_newer_record_sorts_first_and_a_run_that_stopped_names_its_outcome_only():
    older, newer = _record(), rehearsal_record("dev", [], started=T0 + 60, finished=T0 + 61, groundctl_version="1",
                                               pulumi_version=None, reason="the CLI is missing",
                                               rehearsal_id="20270115T080100Z-def456")
    assert record_name(newer) < record_name(older)
    assert newer["outcome"] == "failed" and record_name(newer).endswith("--failed")
    assert parse_name(record_name(newer))["layers"] == {}
    assert parse_name("123-x--network.proven") is None and parse_name("not-a-record") is None
    assert parse_name(record_name(older).replace("skipped", "hacked")) is None


@pytest.mark.parametrize("mutate, why", [
    (lambda d: d.update(kind="drift"), "kind"),
    (lambda d: d.update(outcome="fine"), "outcome"),
    (lambda d: d["layers"][0].update(outcome="\x1b[2Jproven"), "outcome"),
    (lambda d: d["layers"][0]["version"].update(serial="3"), "serial"),
    (lambda d: d["layers"][0]["decrypt"].update(message="a\x1b]8;;evil\x07b"), "control"),
    (lambda d: d["layers"][0]["seconds"].update(preview=-1), "preview"),
    (lambda d: d.update(layers={"network": 1}), "layers"),
])
def test_a_hostile_record_is_unreadable_naming_its_key(mutate, why):
    rec = json.loads(json.dumps(_record(LayerResult("network", _attempt()))))
    mutate(rec)
    with pytest.raises(Unreadable) as exc:
        load_rehearsal_record(json.dumps(rec).encode(), ".groundctl/rehearsals/dev/x.json")
    assert exc.value.source == ".groundctl/rehearsals/dev/x.json" and why in exc.value.reason
    with pytest.raises(Unreadable):
        load_rehearsal_record(b"[1e400]", "k")
