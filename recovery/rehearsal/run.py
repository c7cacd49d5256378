"""The rehearsal's phases, layer by layer: choose (the recovery's choice), restore into the scratch backend
(the references first), decrypt with the state's own secrets provider, preview with `--refresh
--expect-no-changes`; each timed. The preview is itself the decryption's proof (it cannot run without
decrypting the state and the config); only a failed one is followed by an export that decrypts the state on
its own, to tell whether the secrets were the cause, and so is one that cannot run here (a provider plugin
version the state records is not installed), to prove them. Every I/O goes through `Services`: the state
bucket is only read, the engine only ever sees the scratch backend, and nothing here writes a record (the
caller does, with the result)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import botocore.exceptions

from bootstrap.engine.errors import UnexpectedChanges
from bootstrap.engine.secrets_provider import PASSPHRASE, state_provider
from bootstrap.kit.errors import BadInput, GroundctlError
from bootstrap.records.drift import drift_row
from bootstrap.kit.untrusted import epoch
from recovery.choice.recovery_point import measured_rpo
from recovery.rehearsal.choosing import Chosen, choose_version
from recovery.evidence.rehearsal_judge import (Attempt, Decrypt, KeyState, LayerResult, decrypt_failure, kms_key_id,
                                      kms_region, preview_failure, preview_from_row, preview_not_run,
                                      preview_reason, secrets_in)
from recovery.rehearsal.scope import Scope, Step, newest_to_rehearse, version_of
from recovery.state.state_bytes import NotAState, decompress, load_json

_AWS_ERRORS = (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError)


@dataclass
class Services:
    store: Any                                                     # the state bucket: read, never written here
    scratch: Any                                                   # recovery.rehearsal.scratch.ScratchBackend
    # (layer, secrets provider, lineage, the deployment placed as its stack) -> Engine
    engine_for: Callable[[str, Optional[str], Optional[str], dict], Any]
    describe_key: Callable[[str, Optional[str]], KeyState]         # (key id, region) -> what KMS says of it
    choose: Callable[[Any, str, str], Chosen] = choose_version
    clock: Callable[[], float] = time.time
    timer: Callable[[], float] = time.monotonic
    report: Callable[[str], None] = lambda text: None
    secrets: set = field(default_factory=set)  # plaintexts met while decrypting: redacted from what is kept
    # (engine, layer, the deployment placed) -> why its preview cannot run here: a provider plugin version the
    # state binds its providers to (the refresh runs those) is not installed; None when nothing is missing.
    plugins_missing: Callable[[Any, str, dict], Optional[str]] = lambda _engine, _layer, _placed: None


class RestoreFailed(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def rehearse(environment: str, scope: Scope, svc: Services, *, newest: int = 0) -> list[LayerResult]:
    """Rehearse every layer of `scope` in order; a layer's references are restored before it."""
    at = svc.clock()
    restored: dict[str, dict] = {}
    results = []
    for step in scope.layers:
        if step.skip_reason:
            restored[step.layer] = {"layer": step.layer, "restored": False, "deployed": True,
                                    "note": step.skip_reason}
            if step.rehearse:
                results.append(LayerResult(step.layer, skipped=step.skip_reason))
            continue
        if not step.rehearse:
            restored[step.layer] = _reference(environment, step.layer, svc)
            continue
        result = _layer(environment, step, svc, restored, newest, at)
        results.append(result)
        a = result.attempt
        restored[step.layer] = {"layer": step.layer, "deployed": not result.skipped,
                                "restored": a is not None and a.failed_phase != "restore",
                                "version_id": a.version["version_id"] if a else None,
                                "serial": a.version["serial"] if a else None,
                                "note": result.skipped or result.reason or (a.reason if a else None)}
    return results


def _timed(svc: Services, seconds: dict, phase: str, fn: Callable[[], Any]) -> Any:
    start = svc.timer()
    try:
        return fn()
    finally:
        seconds[phase] = round(seconds.get(phase, 0.0) + svc.timer() - start, 3)


def _layer(environment: str, step: Step, svc: Services, restored: dict, newest: int, at: float) -> LayerResult:
    seconds: dict = {}
    svc.report(f"{step.layer}: choosing the version a recovery would restore")
    chosen = _timed(svc, seconds, "choose", lambda: svc.choose(svc.store, environment, step.layer))
    if chosen.never_deployed:
        return LayerResult(step.layer, choice=chosen.summary(), skipped=f"not deployed: {chosen.last.message}",
                           seconds=seconds)
    refs = tuple(restored.get(r) or _reference(environment, r, svc) for r in step.references)
    option = chosen.option
    if option is None:
        return LayerResult(step.layer, choice=chosen.summary(), references=refs, failed_phase="choose",
                           reason=f"A recovery of {step.layer} today would restore nothing: {chosen.last.message}",
                           seconds=seconds)
    missing = [r for r in refs if r["deployed"] and not r["restored"]]
    if missing:
        return LayerResult(step.layer, choice=chosen.summary(), references=refs, failed_phase="references",
                           reason="; ".join(f"the {r['layer']} layer it reads could not be restored: {r['note']}"
                                            for r in missing), seconds=seconds)
    others, passed_over = [], []
    if newest > 0:
        run = chosen.run
        serials = {r.version_id: r.serial for r in (run.ledger.records if run.ledger else ()) if r.version_id}
        stack_versions = [c for c in run.cset.candidates if c.source in ("current", "version")][:newest]
        evaluated = _timed(svc, seconds, "choose", lambda: [run.evaluator.evaluate(c) for c in stack_versions])
        versions, passed_over = newest_to_rehearse(evaluated, option.ident, serials)
        # The chosen version goes last, so the layers above read it through their StackReferences.
        others = [_attempt(environment, step.layer, v, v["lineage"] or chosen.lineage, svc, at) for v in versions]
    version = version_of(option.ident[0], option.ident[1], option.source, option.when, serial=option.serial,
                         sha256=option.sha256, lineage=option.lineage, label=option.label())
    attempt = _attempt(environment, step.layer, version, chosen.lineage, svc, at)
    rpo, lost = measured_rpo(chosen.run.choice, at)
    oldest = min(lost, key=lambda o: o.when) if lost else None
    newer = {"versions": len(lost), "oldest": oldest and {"version_id": oldest.ident[1], "serial": oldest.serial,
                                                         "time": oldest.when.isoformat()}}
    return LayerResult(step.layer, attempt, chosen.summary(), refs, tuple(others), tuple(passed_over),
                       seconds=seconds, rpo_seconds=rpo, newer=newer)


def _reference(environment: str, layer: str, svc: Services) -> dict:
    """Restore the version a recovery would choose of a layer that is only read through StackReferences."""
    seconds: dict = {}
    svc.report(f"{layer}: restoring the version a recovery would choose (a layer above reads it)")
    chosen = _timed(svc, seconds, "choose", lambda: svc.choose(svc.store, environment, layer))
    entry = {"layer": layer, "deployed": not chosen.never_deployed, "restored": False, "version_id": None,
             "serial": None, "seconds": seconds}
    option = chosen.option
    if chosen.never_deployed or option is None:
        return entry | {"note": ("not deployed: there is nothing to restore" if chosen.never_deployed
                                 else chosen.last.message)}
    try:
        _timed(svc, seconds, "restore", lambda: _place(environment, layer, option.ident, option.sha256, svc))
    except RestoreFailed as exc:
        return entry | {"note": exc.reason}
    return entry | {"restored": True, "version_id": option.ident[1], "serial": option.serial,
                    "note": f"restored {option.label()}"}


def _place(environment: str, layer: str, ident: tuple, sha256: Optional[str], svc: Services) -> dict:
    """Copy one stored version into the scratch backend as the stack's state; its deployment."""
    key, version_id = ident
    try:
        stored = svc.store.get(key, version_id)
    except _AWS_ERRORS as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", type(exc).__name__)
        raise RestoreFailed(f"reading {key} version {version_id or '-'} failed ({code})") from None
    if stored is None:
        raise RestoreFailed(f"{key} version {version_id or '-'} is no longer in the bucket")
    if sha256 and hashlib.sha256(stored.body).hexdigest() != sha256:
        raise RestoreFailed(f"{key} version {version_id or '-'} no longer holds the bytes that were chosen")
    try:
        plain, _ = decompress(stored.body, key)
        doc = load_json(plain, key)
    except NotAState as exc:
        raise RestoreFailed(exc.message) from None
    try:
        svc.scratch.place(layer, environment, plain)
    except OSError as exc:
        raise RestoreFailed(f"the scratch backend could not be written ({exc.strerror or exc})") from None
    return _deployment(doc)


def _deployment(doc) -> dict:
    """The deployment of an export (`deployment`) or a checkpoint (`checkpoint.latest`)."""
    if not isinstance(doc, dict):
        return {}
    checkpoint = doc.get("checkpoint")
    dep = doc.get("deployment") or (checkpoint.get("latest") if isinstance(checkpoint, dict) else None)
    return dep if isinstance(dep, dict) else {}


def _attempt(environment: str, layer: str, version: dict, lineage: Optional[str], svc: Services,
             at: float) -> Attempt:
    seconds: dict = {}
    label = version["label"]
    age = round(at - epoch(version["last_modified"]), 3) if version.get("last_modified") else None
    svc.report(f"{layer}: restoring {label} into the scratch backend")
    try:
        placed = _timed(svc, seconds, "restore", lambda: _place(
            environment, layer, (version["key"], version["version_id"]), version.get("sha256"), svc))
    except RestoreFailed as exc:
        return Attempt(version, age, seconds=seconds, failed_phase="restore",
                       reason=f"{label} could not be restored: {exc.reason}")
    provider = state_provider(placed)
    svc.report(f"{layer}: opening it with its own secrets provider ({provider or PASSPHRASE})")
    engine, decrypt = _timed(svc, seconds, "decrypt", lambda: _open(layer, provider, lineage, placed, svc))
    if engine is not None:
        missing = _timed(svc, seconds, "preview", lambda: svc.plugins_missing(engine, layer, placed))
        if missing:
            preview = preview_not_run(missing)
        else:
            svc.report(f"{layer}: previewing against the cloud, its secrets and config decrypted (refresh, "
                       "expecting no changes)")
            preview = _timed(svc, seconds, "preview", lambda: _preview(engine, layer))
            if preview.result != "failed":
                return Attempt(version, age, decrypt, preview, seconds)
        # Whether the secrets were the cause, and the plaintexts to redact its error with, or, where the preview
        # could not run, their proof: only a preview that proved nothing pays for the export (it runs no provider).
        svc.report(f"{layer}: the preview cannot run here (a provider plugin the state records is missing); "
                   "decrypting the state's secrets on their own" if missing else
                   f"{layer}: the preview failed; decrypting the state's secrets to tell why")
        decrypt = _timed(svc, seconds, "decrypt", lambda: _decrypt(engine, layer, provider, svc))
        if decrypt.result == "ok":
            return Attempt(version, age, decrypt, preview, seconds, "preview", preview_reason(label, preview))
    return Attempt(version, age, decrypt, seconds=seconds, failed_phase="decrypt", reason=decrypt.message)


def _open(layer: str, provider: Optional[str], lineage: Optional[str], placed: dict,
          svc: Services) -> tuple[Any, Decrypt]:
    """The scratch stack's engine, opened with the state's own provider, and the decryption as the preview will
    prove it: Pulumi's preview builds the stack's secrets manager (pkg/cmd/pulumi/operations/preview.go,
    config/io.go getAndSaveSecretsManager), decrypts every secret of the state as it loads it (pkg/backend/diy
    state.go getSnapshot, pkg/resource/stack/deployment.go DeserializeDeploymentV3 BatchDecrypt) and the
    config before the program runs (pkg/engine/deployment.go), so a preview that ran decrypted them all. Or
    why the engine could not be opened (no passphrase)."""
    try:
        engine = svc.engine_for(layer, provider, lineage, placed)
    except BadInput as exc:
        if "passphrase" not in exc.message.lower():
            raise
        return None, decrypt_failure(provider, exc.message)
    return engine, Decrypt("ok", provider or PASSPHRASE, secrets=secrets_in(placed)[0])


def _decrypt(engine, layer: str, provider: Optional[str], svc: Services) -> Decrypt:
    """Every secret of the state decrypted on its own (`stack export --show-secrets`, held in memory only), or
    why that failed: the provider, the engine's error and what KMS says of the key."""
    try:
        deployment = engine.export_state(layer).get("deployment")
    except GroundctlError as exc:
        key_id = kms_key_id(provider)
        key = svc.describe_key(key_id, kms_region(provider)) if key_id else None
        return decrypt_failure(provider, exc.message, key)
    count, plaintexts = secrets_in(deployment)
    svc.secrets.update(plaintexts)
    return Decrypt("ok", provider or PASSPHRASE, secrets=count)


def _preview(engine, layer: str):
    try:
        plan = engine.preview(layer, refresh=True, expect_no_changes=True)
    except UnexpectedChanges as exc:
        plan = exc.plan
    except GroundctlError as exc:
        return preview_failure(exc.message)
    return preview_from_row(drift_row(plan))
