"""The engine tier's harness: groundctl's own commands, the real Pulumi CLI, and the programs in this
folder standing in for the layers through the engine's `stacks_dir` seam.

Each test module gets one environment (`tier` fixture, module-scoped): a copy of these programs in a
temporary folder (so Pulumi's stack config files never land in the repository), a state bucket and a
records bucket in the session's emulator, a spec file naming them, and the process environment the
engine needs (passphrase secrets, a private PULUMI_HOME, no plugin acquisition). The state backend is
the product's own: `backend_url` of the spec's bucket at the emulator's endpoint.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Optional

import boto3
import pytest
import yaml

from tests.conftest import REPO

PROGRAMS = Path(__file__).resolve().parent
PASSPHRASE = "engine-tier-passphrase-Kd93"
SECRET_TOKEN = "canary-engine-tier-Q7z1-admin-token"
LAYERS = "network,cluster"  # the backend layer adopts real AWS resources; flux needs Kubernetes
STACK_KEY = ".pulumi/stacks/{layer}/{env}.json"


def engine_env(stacks: Path, records_bucket: str, home: Path) -> dict[str, str]:
    return {
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_HOME": str(home),  # keeps the tier away from ~/.pulumi
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        # The programs need only the CLI, its Python host and the dynamic provider on PATH: never fetch.
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PYTHONPATH": os.pathsep.join([str(PROGRAMS), str(REPO)]),
        "ENGINE_TIER_RECORDS_BUCKET": records_bucket,
        "ENGINE_TIER_STACKS": str(stacks),
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }


def install_stacks_dir(stacks: Path) -> None:
    """Make every PulumiEngine built in this process read its programs from `stacks` (the seam)."""
    from bootstrap.engine import automation

    base = getattr(automation.PulumiEngine, "_tier_base", automation.PulumiEngine)

    class TierEngine(base):  # type: ignore[misc, valid-type]
        _tier_base = base

        def __init__(self, *args, **kwargs):
            kwargs["stacks_dir"] = Path(os.environ.get("ENGINE_TIER_STACKS", stacks))
            # The KMS secrets provider at the emulator, where the product would use a passphrase.
            if os.environ.get("ENGINE_TIER_SECRETS_PROVIDER"):
                kwargs["secrets_provider"] = os.environ["ENGINE_TIER_SECRETS_PROVIDER"]
            super().__init__(*args, **kwargs)

        def _require_no_pending(self, layer, operation, stack):
            # ENGINE_TIER_UNGUARDED stands for what groundctl's pending-operations check cannot stop: an
            # older groundctl, or `pulumi up` by hand. Tests use it to make the states the check refuses.
            if not os.environ.get("ENGINE_TIER_UNGUARDED"):
                super()._require_no_pending(layer, operation, stack)

        def _layer_config(self, layer):
            # A secret config value the cluster stand-in reads, set the way groundctl sets the deploy key.
            from bootstrap.spec.stack_config import ConfigValue

            config = super()._layer_config(layer)
            if layer == "cluster" and os.environ.get("ENGINE_TIER_ADMIN_TOKEN"):
                config["enginetier:adminToken"] = ConfigValue(os.environ["ENGINE_TIER_ADMIN_TOKEN"], secret=True)
            return config

    automation.PulumiEngine = TierEngine

    # The run's own pending-operations phase (before the first layer) stands aside likewise.
    from bootstrap.apply import preflight

    guarded = getattr(preflight.refuse_pending_layers, "_tier_base", preflight.refuse_pending_layers)

    def refuse_pending_layers(*args, **kwargs):
        return None if os.environ.get("ENGINE_TIER_UNGUARDED") else guarded(*args, **kwargs)

    refuse_pending_layers._tier_base = guarded
    preflight.refuse_pending_layers = refuse_pending_layers


@dataclass
class Tier:
    env_name: str
    spec_path: Path
    state_bucket: str
    records_bucket: str
    endpoint: str
    stacks: Path
    env: dict
    s3: object
    notes: dict = field(default_factory=dict)  # what one test leaves for the next (the tests run in order)

    # -- groundctl, as an operator runs it -----------------------------------------------------------

    def cli(self, *args: str, env: Optional[dict] = None, endpoint: bool = True) -> tuple[int, str, str]:
        """`groundctl ARGS SPEC-path --endpoint-url …` in this process; (exit code, stdout, stderr)."""
        from groundctl import main

        argv = ["groundctl", *[a.replace("SPEC", str(self.spec_path)) for a in args],
                *(["--endpoint-url", self.endpoint] if endpoint else [])]
        out, err = io.StringIO(), io.StringIO()
        saved = {k: os.environ.get(k) for k in (env or {})}
        os.environ.update(env or {})
        old_argv, sys.argv = sys.argv, argv
        code: object = 0
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main()
        except SystemExit as exc:
            code = exc.code
        finally:
            sys.argv = old_argv
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return int(code or 0), out.getvalue(), err.getvalue()

    def cli_json(self, *args: str, env: Optional[dict] = None, ok: tuple[int, ...] = (0,)) -> dict:
        code, out, err = self.cli(*args, "--json", env=env)
        assert code in ok, f"groundctl {' '.join(args)} exited {code}: {err}{out}"
        return json.loads(out)

    def spawn(self, *args: str, faults: Optional[dict] = None, env: Optional[dict] = None) -> subprocess.Popen:
        """The same command in a child process (for a run other commands watch, or one that is killed)."""
        env = {**os.environ, **self.env, **(env or {}), "ENGINE_TIER_FAULTS": json.dumps(faults or {})}
        argv = [sys.executable, str(PROGRAMS / "groundctl_main.py"),
                *[a.replace("SPEC", str(self.spec_path)) for a in args], "--endpoint-url", self.endpoint]
        return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)

    # -- what is in the buckets --------------------------------------------------------------------

    def stack_key(self, layer: str) -> str:
        return STACK_KEY.format(layer=layer, env=self.env_name)

    def keys(self, prefix: str) -> list[str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.state_bucket, Prefix=prefix)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def checkpoint(self, layer: str) -> dict:
        body = self.s3.get_object(Bucket=self.state_bucket, Key=self.stack_key(layer))["Body"].read()
        return json.loads(body)

    def put_state(self, layer: str, body: bytes) -> str:
        return self.s3.put_object(Bucket=self.state_bucket, Key=self.stack_key(layer), Body=body)["VersionId"]

    def record(self, key: str) -> Optional[dict]:
        try:
            return json.loads(self.s3.get_object(Bucket=self.records_bucket, Key=key)["Body"].read())
        except self.s3.exceptions.NoSuchKey:
            return None

    def record_key(self, layer: str, name: str) -> str:
        return f"{self.env_name}/{layer}/{name}"

    def ledger_serials(self, layer: str) -> list[int]:
        from bootstrap.records.ledger import read_ledger

        return [r.serial for r in read_ledger(self.store, layer, self.env_name).records]

    @property
    def store(self):
        from bootstrap.aws.objectstore import ObjectStore

        return ObjectStore(self.s3, self.state_bucket)

    def program_files(self) -> list[str]:
        """Every file under the programs' folder, relative (a run must add none)."""
        return sorted(str(p.relative_to(self.stacks)) for p in self.stacks.rglob("*"))

    def engine(self):
        """The product's engine on this environment, for what the CLI has no command for."""
        from bootstrap.engine.automation import PulumiEngine
        from bootstrap.spec import load_spec

        spec = load_spec(str(self.spec_path))
        spec = spec.model_copy(update={"aws": spec.aws.model_copy(update={"endpoint_url": self.endpoint})})
        return PulumiEngine(spec, endpoint_url=self.endpoint, stacks_dir=self.stacks)


def wait_for(what: str, check: Callable[[], object], timeout: float = 60.0, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def make_tier(tmp: Path, endpoint: str, spec_edit: Callable[[dict], None] = lambda d: None) -> Tier:
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    state_bucket, records_bucket = f"et-{uuid.uuid4().hex[:16]}", f"etr-{uuid.uuid4().hex[:16]}"
    s3.create_bucket(Bucket=records_bucket)
    s3.put_bucket_versioning(Bucket=records_bucket, VersioningConfiguration={"Status": "Enabled"})
    stacks = tmp / "stacks"
    for layer in ("network", "cluster"):
        shutil.copytree(PROGRAMS / layer, stacks / layer)
    data = yaml.safe_load((REPO / "environments" / "local.yaml").read_text())
    data["backend"]["bucket"] = state_bucket
    data["backend"]["kms_alias"] = f"alias/{state_bucket}"
    spec_edit(data)
    spec_path = tmp / "local.yaml"
    spec_path.write_text(yaml.safe_dump(data))
    env = engine_env(stacks, records_bucket, tmp / "pulumi-home")
    return Tier(data["name"], spec_path, state_bucket, records_bucket, endpoint, stacks, env, s3)


@pytest.fixture(scope="module")
def tier(tmp_path_factory, emulator_endpoint):
    """One environment for the whole test module, its programs and buckets, the engine's environment."""
    tier = make_tier(tmp_path_factory.mktemp("engine-tier"), emulator_endpoint)
    with tier_environment(tier):
        yield tier


@contextlib.contextmanager
def tier_environment(tier) -> Iterator[pytest.MonkeyPatch]:
    """The tier's environment variables and stacks folder for the engine, all undone at the end."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in tier.env.items():
            mp.setenv(k, v)
        mp.delenv("GROUNDCTL_ENDPOINT_URL", raising=False)
        mp.delenv("ENGINE_TIER_FAULTS", raising=False)
        mp.delenv("ENGINE_TIER_UNGUARDED", raising=False)
        from bootstrap.apply import preflight
        from bootstrap.engine import automation

        mp.setattr(automation, "PulumiEngine", automation.PulumiEngine)  # undone at the end
        mp.setattr(preflight, "refuse_pending_layers", preflight.refuse_pending_layers)
        install_stacks_dir(tier.stacks)
        yield mp
