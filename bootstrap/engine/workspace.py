"""How each layer's workspace reaches Pulumi for one environment: the backend URL, the secrets provider and
the environment variables the CLI and the programs run under. Pure but for reading a passphrase file."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import quote

from bootstrap.engine.passphrase import PULUMI_PASSPHRASE_FILE_VAR, PULUMI_PASSPHRASE_VAR, passphrase_from
from bootstrap.kit.errors import BadInput
from bootstrap.layers import STACKS_DIR

# Pulumi settings groundctl's guarantees rest on, whatever the operator's shell exports: these win over the
# inherited environment (the Automation API lays env_vars over os.environ), and a primary name that is set
# wins over its alternative (sdk/go/common/util/env/env.go:261-277). docs/enforced-environment.md's table lists them (a test
# holds it to this):
# - PULUMI_SKIP_CHECKPOINTS held to false: true would save only an update's final state (pkg/backend/
#   snapshot.go:1014-1016, journal.go:704-706), so a killed update would leave the state as it was before,
#   with no pending operation naming what it was creating, and recovery no mid-update checkpoint.
# - PULUMI_DIY_BACKEND_LEGACY_LAYOUT held to false: true would lay out a new bucket the legacy way, every
#   layer's <env> stack under one name, .pulumi/stacks/<env>.json (pkg/backend/diy/meta.go:91-96).
# - PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER=true: no settings file survives a run, so the stack's secrets
#   provider and data key come from its state (bootstrap/engine/secrets_provider.py).
# - PULUMI_CLOUD_SECRET_OVERRIDE held empty (Pulumi reads any non-empty value): it replaces the stack's cloud
#   secrets provider for the run, and a new data key re-encrypts the state under it (pkg/secrets/cloud/
#   manager.go:197-222), past the provider check made on the state before.
# - PULUMI_RUN_PROGRAM held to false: true makes a refresh-preview, a refresh and a destroy run the program
#   (pkg/cmd/pulumi/operations/preview.go:778, refresh.go:389, destroy.go:417) instead of reading each
#   resource from its provider, which is the refresh the drift rule and the pending-create clearing assume.
# - PULUMI_ENABLE_LEGACY_REFRESH_DIFF held to false: true reports only output changes from a refresh, never
#   the difference from what the program declares (sdk/go/common/env/env.go:59-61), and the drift rule reads
#   the latter (bootstrap/engine/events.py).
# - PULUMI_SKIP_UPDATE_CHECK=true: no call to the Pulumi Cloud API for the latest version on every command.
# - PYTHONDONTWRITEBYTECODE: the programs' folder (and stacks/common) is never written.
# - PIP_DISABLE_PIP_VERSION_CHECK=1: the Python host lists the program's packages with `pip list` on every
#   preview and update (sdk/python/toolchain/pip.go:146-160), and pip asks PyPI for its newest version on it
#   wherever its weekly answer cannot be cached (a read-only pod): a wait on the network, or on its timeout.
ENFORCED_ENV = {
    "PULUMI_SKIP_CHECKPOINTS": "false",
    "PULUMI_DIY_BACKEND_LEGACY_LAYOUT": "false",
    "PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER": "true",
    "PULUMI_CLOUD_SECRET_OVERRIDE": "",
    "PULUMI_RUN_PROGRAM": "false",
    "PULUMI_ENABLE_LEGACY_REFRESH_DIFF": "false",
    "PULUMI_SKIP_UPDATE_CHECK": "true",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}
EMULATOR_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


@dataclass(frozen=True, repr=False)
class WorkspaceSettings:
    """How every layer's workspace reaches its backend. `env` and `secrets` may hold the passphrase: never log them."""

    backend_url: str
    secrets_provider: str
    env: dict
    emulator_endpoint: str | None = None
    secrets: tuple[str, ...] = ()

    @property
    def secret_values(self) -> tuple[str, ...]:
        return tuple(v for v in self.secrets if v)

    def __repr__(self) -> str:
        return f"WorkspaceSettings(backend_url={self.backend_url!r}, secrets_provider={self.secrets_provider!r})"


def backend_url(bucket: str, region: str, endpoint_url: str | None = None) -> str:
    """The DIY backend URL. gocloud's s3blob reads `endpoint` (a full URL, so http:// needs no
    TLS flag) and `s3ForcePathStyle` (kept by its SDK-v2 opener for compatibility); the older
    `disableSSL` is refused as unknown by the SDK-v2 opener, so it is not used."""
    url = f"s3://{bucket}?region={region}"
    if endpoint_url:
        url += f"&endpoint={quote(endpoint_url.rstrip('/'), safe='')}&s3ForcePathStyle=true"
    return url


def kms_provider(alias: str, region: str) -> str:
    """The awskms:// secrets provider of a KMS alias. It names no endpoint: an emulator's is given by
    AWS_ENDPOINT_URL_KMS (aws-sdk-go-v2 config env_config.go GetServiceBaseEndpoint, which gocloud's
    awskms opener loads when the URL has no `endpoint`), so the state never records a port."""
    return f"awskms://{alias}?region={region}"


def workspace_settings(spec, *, endpoint_url: str | None = None,
                       passphrase_env: str = PULUMI_PASSPHRASE_VAR,
                       environ: Mapping[str, str] = os.environ,
                       backend_override: str | None = None,
                       secrets_provider: str | None = None) -> WorkspaceSettings:
    """Backend URL, secrets provider and environment variables for one environment. Pure but for reading
    PULUMI_CONFIG_PASSPHRASE_FILE. `secrets_provider` is the engine tier's: the KMS provider at the emulator."""
    endpoint = endpoint_url or (spec.aws.endpoint_url if spec.aws.endpoint_url != "embedded" else None)
    if spec.aws.endpoint_url == "embedded" and not endpoint:
        raise BadInput(
            f"Environment '{spec.name}' runs on the embedded AWS emulator, but no emulator endpoint was "
            f"given. Run it through `groundctl up {spec.name}` (which starts the emulator), or start one "
            f"with `groundctl emulator start` and set aws.endpoint_url to the endpoint it prints."
        )
    if endpoint and spec.production:
        raise BadInput(
            f"Environment '{spec.name}' is production and cannot be pointed at the emulator endpoint "
            f"{endpoint}. Remove the endpoint and run the command again."
        )
    region = spec.aws.region
    env = {
        "PULUMI_BACKEND_URL": backend_override or backend_url(spec.backend.bucket, region, endpoint),
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        **program_python(environ),
        **ENFORCED_ENV,
    }
    provider = secrets_provider or ("passphrase" if endpoint else kms_provider(spec.backend.kms_alias, region))
    secrets: tuple[str, ...] = ()
    if endpoint:
        # The emulator accepts any credentials; fixed ones keep real ones from being sent to it.
        env.update(EMULATOR_CREDENTIALS)
        env["AWS_ENDPOINT_URL_KMS"] = endpoint
    if provider == "passphrase":
        passphrase, passphrase_vars = passphrase_from(environ, passphrase_env)
        if not passphrase:
            raise BadInput(
                f"Environment '{spec.name}' keeps its Pulumi secrets with a passphrase, but neither the "
                f"environment variable {passphrase_env} nor {PULUMI_PASSPHRASE_FILE_VAR} is set. Set one "
                f"(e.g. `export {passphrase_env}=...`; keep the same value for every later run) and run the "
                "command again."
            )
        env.update(passphrase_vars)
        secrets = (passphrase,)
    elif not endpoint and spec.aws.profile:
        env["AWS_PROFILE"] = spec.aws.profile
        env["AWS_SDK_LOAD_CONFIG"] = "1"
    return WorkspaceSettings(env["PULUMI_BACKEND_URL"], provider, env, endpoint, secrets)


def program_python(environ: Mapping[str, str], *, executable: str = sys.executable,
                   package_root: Path = STACKS_DIR.parent) -> dict[str, str]:
    """How Pulumi's Python host must run the layer programs. Pure.

    The host runs `PULUMI_PYTHON_CMD` when set, else whichever `python3`/`python` is first on PATH, and
    puts only the program's folder on `sys.path`. The programs import `stacks.common` and the SDKs
    groundctl was installed with, so they run under groundctl's own interpreter, with the folder that
    holds `stacks/` ahead of anything else on PYTHONPATH.
    """
    paths = [str(package_root)] + [p for p in environ.get("PYTHONPATH", "").split(os.pathsep)
                                   if p and p != str(package_root)]
    return {"PULUMI_PYTHON_CMD": executable, "PYTHONPATH": os.pathsep.join(paths)}

