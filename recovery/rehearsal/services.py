"""The rehearsal's I/O on a real environment: the engine on the scratch backend, KMS DescribeKey, and the
whole run from an opened target to its record. `run.rehearse` gets these as plain callables."""

from __future__ import annotations

from typing import Callable, Optional

import botocore.exceptions

from bootstrap.aws.clients import error_code, retry_transient
from bootstrap.kit.untrusted import one_line
from recovery.evidence.rehearsal_judge import KeyState


def scratch_engine(target, backend_url: str, secrets: Callable[[], list[str]]):
    """(layer, secrets provider, lineage, the deployment placed as its stack) -> an engine whose every stack
    lives in the scratch backend, opened with the state's own secrets provider (None: the environment's), its
    errors scrubbed of every secret."""
    def build(layer: str, provider: Optional[str], lineage: Optional[str], placed: dict):
        from bootstrap.engine import automation
        from bootstrap.engine.preflight import require_engine
        from bootstrap.engine.scrubbing import ScrubbingEngine

        # Looked up when called: the engine tier stands its programs in by replacing the class.
        engine = automation.PulumiEngine(target.spec, endpoint_url=target.endpoint_url,
                                         lineage_for=lambda _layer: lineage, backend_override=backend_url,
                                         secrets_provider=provider,
                                         state_of=lambda name: placed if name == layer else None)
        require_engine(engine, [layer])
        return ScrubbingEngine(engine, secrets)
    return build


def plugin_check(platform: str) -> Callable[[object, str, dict], Optional[str]]:
    """(engine, layer, the deployment placed as its stack) -> the preflight's paragraph naming each provider
    plugin version the deployment records that Pulumi would not find under the engine's environment, with its
    install command; None when none is missing. The preview's refresh runs those versions, which after an SDK
    upgrade may be older than any installed here (the layer program's are checked when the engine is built).
    Each (plugin, version) is looked for once per run, however many states and versions record it."""
    from bootstrap.engine import plugins
    from bootstrap.engine.preflight import engine_environment
    from bootstrap.engine.versions import PROVIDER_PLUGINS

    installed: dict = {}   # Plugin -> whether Pulumi would find it
    looked: list = []      # where it looked: the message names it

    def check(engine, layer: str, placed: dict) -> Optional[str]:
        if getattr(engine, "stacks_dir", None) is None:
            return None  # an engine that runs no Pulumi program runs no plugin (as require_engine)
        recorded = plugins.state_plugins(placed)
        unknown = [p for p in recorded if p not in installed]
        if unknown:
            looked[:] = [plugins.plugin_places(engine_environment(engine), {p.name for p in unknown})]
            installed.update({p: plugins.is_installed(p, looked[0]) for p in unknown})
        missing = {p: [(layer, plugins.STATE)] for p in recorded if not installed[p]}
        return plugins.missing_plugins_message(missing, looked[0], platform, PROVIDER_PLUGINS) if missing else None
    return check


def _bounded(value: object) -> Optional[str]:
    return one_line(str(value), 300) if value is not None else None


def key_reader(clients) -> Callable[[str, Optional[str]], KeyState]:
    """(key id, region) -> what KMS DescribeKey says of the key; its own failure is part of the answer."""
    def describe(key_id: str, region: Optional[str]) -> KeyState:
        kms = clients.client("kms", region)
        try:
            meta = retry_transient(lambda: kms.describe_key(KeyId=key_id),
                                   what=f"describe the KMS key {key_id}")["KeyMetadata"]
        except botocore.exceptions.ClientError as exc:
            return KeyState(key_id, error=_bounded(error_code(exc)))
        except botocore.exceptions.BotoCoreError as exc:
            return KeyState(key_id, error=type(exc).__name__)
        deletion = meta.get("DeletionDate")
        return KeyState(key_id, _bounded(meta.get("Arn")), _bounded(meta.get("KeyState")),
                        deletion.isoformat() if hasattr(deletion, "isoformat") else _bounded(deletion))
    return describe


def rehearse_target(target, scope, *, newest: int, groundctl_version: str,
                    report: Callable[[str], None]) -> tuple[dict, Callable[[], list[str]]]:
    """Rehearse `scope` on an opened target: the account and the Pulumi CLI checked first, then every layer
    in a scratch backend that is gone afterwards. The record (not yet stored) and the secrets to redact it
    with. Raises a GroundctlError when the run cannot reach a verdict at all (credentials, the engine)."""
    import platform
    import time

    from bootstrap.aws.backend import check_account
    from bootstrap.engine.preflight import require_cli
    from bootstrap.engine.versions import platform_key
    from bootstrap.kit.errors import CloudError
    from recovery.restoring.report import redact
    from recovery.evidence.rehearsal_record import rehearsal_record
    from recovery.rehearsal.run import Services, rehearse
    from recovery.rehearsal.scratch import ScratchBackend

    started = time.time()
    found: set[str] = set()

    def secrets() -> list[str]:
        return [*target.secret_values(), *sorted(found)]

    check_account(target.spec, target.clients)
    pulumi_version = require_cli()
    try:
        with ScratchBackend() as scratch:
            svc = Services(target.store, scratch, scratch_engine(target, scratch.url, secrets),
                           key_reader(target.clients), report=report, secrets=found,
                           plugins_missing=plugin_check(platform_key(platform.system(), platform.machine())))
            layers = rehearse(target.name, scope, svc, newest=newest)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise CloudError(f"Reading the state bucket of '{target.name}' failed ({error_code(exc) or type(exc).__name__})"
                         ". Check that the credentials may list and read object versions under .pulumi/ and "
                         ".groundctl/ in the state bucket, and run the rehearsal again.") from None
    record = rehearsal_record(target.name, layers, started=started, finished=time.time(),
                              groundctl_version=groundctl_version, pulumi_version=pulumi_version)
    return redact(record, secrets()), secrets
