"""Run a layer's real Pulumi program under Pulumi's mock runtime and capture what it declares.

No engine, no cloud: `stacks/<layer>/__main__.py` runs in this process against a mock resource
monitor. The result is plain data (`ProgramRun`): every resource with its inputs and options, and
the stack outputs. It is what the offline plan and the program tests are built on.

Conventions in the captured values:
- `SECRET` replaces every secret value (inputs and outputs): a secret never leaves as plaintext.
- `UNKNOWN` stands for a value only known after apply (the run is a preview). The mock answers a
  resource with its own inputs and an id, so computed attributes (ARNs, endpoints) stay unknown.
- ids are `(id of <logical name>)`, so wiring between resources is visible and checkable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import importlib
import logging
import runpy
import threading
from dataclasses import dataclass
from typing import Any

from google.protobuf import empty_pb2
from pulumi.runtime import config as pulumi_config
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime import settings as pulumi_settings
from pulumi.output import Unknown
from pulumi.runtime.stack import run_in_stack

from bootstrap.kit.errors import BadInput, EngineError
from bootstrap.layers import STACKS_DIR, layer as layer_named
from bootstrap.spec.stack_config import ConfigValue

SECRET = "[secret]"
UNKNOWN = "(known after apply)"
MOCK_ACCOUNT_ID = "123456789012"
STACK_TYPE = "pulumi:pulumi:Stack"
STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"


@dataclass(frozen=True)
class DeclaredResource:
    urn: str
    type: str
    name: str
    inputs: dict
    custom: bool
    protect: bool
    parent: str | None
    provider: str | None


@dataclass(frozen=True)
class ProgramRun:
    layer: str
    resources: tuple[DeclaredResource, ...]
    outputs: dict
    secret_outputs: frozenset[str]


def mock_id(name: str) -> str:
    return f"(id of {name})"


def _is_secret(value: Any) -> bool:
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def _plain(value: Any) -> Any:
    """Deserialized wire values → plain data with the SECRET and UNKNOWN markers."""
    if _is_secret(value):
        return SECRET
    if isinstance(value, Unknown) or value == rpc.UNKNOWN:
        return UNKNOWN
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def _deserialize(struct) -> dict:
    pulumi_mocks._ensure_event_loop()
    return rpc.deserialize_properties(struct, keep_unknowns=True)


class _Mocks(pulumi_mocks.Mocks):
    """Answers resource registrations with their inputs and provider functions with fixed values."""

    def __init__(self, region: str, account_id: str, upstream: dict[str, dict]):
        self.region = region
        self.account_id = account_id
        self.upstream = upstream
        self.provider_regions: dict[str, str] = {}

    def new_resource(self, args: pulumi_mocks.MockResourceArgs):
        if args.typ == STACK_REFERENCE_TYPE:
            upstream_layer = args.name.split("/")[1] if args.name.count("/") == 2 else args.name
            outputs = dict(self.upstream.get(upstream_layer, {}))
            secret_names = [n for n in layer_named(upstream_layer).secret_outputs if n in outputs]
            return args.name, {"name": args.name, "outputs": outputs, "secretOutputNames": secret_names}
        resource_id = mock_id(args.name)
        if args.typ.startswith("pulumi:providers:"):
            self.provider_regions[f"::{resource_id}"] = args.inputs.get("region", self.region)
        return resource_id, dict(args.inputs)

    def call(self, args: pulumi_mocks.MockCallArgs):
        region = self._region_of(args.provider)
        token = args.token
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": self.account_id, "id": self.account_id, "userId": "AIDAMOCKUSER",
                "arn": f"arn:aws:iam::{self.account_id}:user/groundctl-offline",
            }
        if token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws", "reverseDnsPrefix": "com.amazonaws"}
        if token == "aws:index/getRegion:getRegion":
            return {"name": region, "region": region, "id": region, "endpoint": f"ec2.{region}.amazonaws.com"}
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{region}{letter}" for letter in "abcdef"]
            return {"names": names, "zoneIds": [f"{region[:3]}-az{i + 1}" for i in range(6)], "id": region}
        return {}

    def _region_of(self, provider_ref: str | None) -> str:
        for suffix, region in self.provider_regions.items():
            if provider_ref and provider_ref.endswith(suffix):
                return region
        return self.region


class _Monitor(pulumi_mocks.MockMonitor):
    """The mock monitor, also recording each registration's options and the root stack's outputs."""

    def __init__(self, mocks: _Mocks):
        super().__init__(mocks)
        self.declared: list[DeclaredResource] = []
        self.stack_outputs: dict | None = None
        self._lock = threading.Lock()

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != STACK_TYPE:
            self._record(response.urn, request, _deserialize(request.object), request.protect)
        return response

    def ReadResource(self, request):
        response = super().ReadResource(request)
        self._record(response.urn, request, _deserialize(request.properties), False, custom=True)
        return response

    def RegisterResourceOutputs(self, request):
        if f"::{STACK_TYPE}::" in request.urn:
            self.stack_outputs = _deserialize(request.outputs)
        return super().RegisterResourceOutputs(request)

    def _record(self, urn: str, request, inputs: dict, protect: bool, custom: bool | None = None) -> None:
        declared = DeclaredResource(
            urn=urn,
            type=request.type,
            name=request.name,
            inputs=_plain(inputs),
            custom=bool(request.custom) if custom is None else custom,
            protect=bool(protect),
            parent=request.parent or None,
            provider=request.provider or None,
        )
        with self._lock:
            self.declared.append(declared)


def _configure(monitor: _Monitor, layer: str, environment: str) -> None:
    features = set(monitor.GetDeploymentInfo(empty_pb2.Empty()).supportedFeatures)
    pulumi_settings.ROOT.set(None)
    # Every per-run setting is replaced, so runs of different layers in one process stay apart.
    pulumi_settings.configure(pulumi_mocks.MockSettings(
        monitor=monitor,
        monitor_features=features,
        engine=pulumi_mocks.MockEngine(logging.getLogger("groundctl.mockrun")),
        project=layer,
        stack=environment,
        root_directory=str(STACKS_DIR / layer),
        dry_run=True,
        organization="organization",
        parallel=None,
        legacy_apply_enabled=False,
        outputs=set(),
        lock=threading.Lock(),
        package_refs={},
        base_providers_by_ref={},
        callbacks=None,
    ))


def run_program(
    layer: str, environment: str, config: dict[str, ConfigValue], upstream: dict[str, dict]
) -> ProgramRun:
    """Run stacks/<layer>/__main__.py as a preview of stack `environment` under the mock runtime.

    `upstream` maps an upstream layer name to its outputs (what its StackReference returns).
    """
    lay = layer_named(layer)
    program = lay.directory / "__main__.py"
    region = config["aws:region"].value if "aws:region" in config else "us-east-1"
    account = config["groundctl:accountId"].value if "groundctl:accountId" in config else MOCK_ACCOUNT_ID
    monitor = _Monitor(_Mocks(region, account, upstream))
    _configure(monitor, layer, environment)
    pulumi_config.set_all_config(
        {key: cv.value for key, cv in config.items()},
        [key for key, cv in config.items() if cv.secret],
    )
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    executor, thread_loops = _executor()
    loop.set_default_executor(executor)
    try:
        loop.run_until_complete(run_in_stack(lambda: runpy.run_path(str(program), run_name="__main__")))
    except Exception as exc:  # translated: an operator sees which layer and why, not a traceback
        raise _translate(layer, exc) from None
    finally:
        _drain(loop)
        loop.close()
        executor.shutdown(wait=True)
        for thread_loop in thread_loops:
            thread_loop.close()
        asyncio.set_event_loop(None)
        pulumi_settings.ROOT.set(None)
        pulumi_config.set_all_config({}, [])
    raw = monitor.stack_outputs or {}
    secret_names = frozenset(k for k, v in raw.items() if _is_secret(v))
    return ProgramRun(
        layer=layer,
        resources=tuple(monitor.declared),
        outputs={k: _plain(v) for k, v in raw.items()},
        secret_outputs=secret_names,
    )


def _executor() -> tuple[concurrent.futures.ThreadPoolExecutor, list[asyncio.AbstractEventLoop]]:
    # The SDK calls the monitor from worker threads, and each worker gets an event loop of its own.
    # Owning the workers lets us close those loops after the run instead of leaking them.
    loops: list[asyncio.AbstractEventLoop] = []

    def init() -> None:
        thread_loop = asyncio.new_event_loop()
        asyncio.set_event_loop(thread_loop)
        loops.append(thread_loop)

    return concurrent.futures.ThreadPoolExecutor(max_workers=4, initializer=init), loops


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    # After a failed program some RPC tasks are still pending; cancel them so nothing leaks into
    # the next run or prints "Task was destroyed" noise.
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def _translate(layer: str, exc: Exception) -> Exception:
    from pulumi.config import ConfigMissingError, ConfigTypeError

    if isinstance(exc, (ConfigMissingError, ConfigTypeError, ValueError)):
        reason = " ".join(str(exc).split()).rstrip(".")
        return BadInput(
            f"The {layer} program refused its config: {reason}. Check the environment spec and the layer's "
            f"config keys in stacks/{layer}/Pulumi.yaml, then run again."
        )
    return EngineError(
        f"The {layer} program failed under the mock runtime ({type(exc).__name__}: {exc}). This is a bug in "
        f"stacks/{layer}/__main__.py or its config; run its tests with `python -m pytest tests/test_stack_{layer}.py`."
    )


# --- reading a run: pure helpers shared by the offline plan and the tests ---------------------


@functools.lru_cache(maxsize=None)
def is_taggable(type_token: str) -> bool:
    """Whether an AWS resource type accepts `tags` (from the pulumi_aws class for the token)."""
    parts = type_token.split(":")
    if len(parts) != 3 or parts[0] != "aws":
        return False
    module = parts[1].split("/")[0]
    try:
        mod = importlib.import_module(f"pulumi_aws.{module}") if module != "index" else importlib.import_module("pulumi_aws")
        cls = getattr(mod, parts[2])
    except (ImportError, AttributeError):
        return False
    return "tags" in inspect.signature(cls._internal_init).parameters


def provider_of(run: ProgramRun, resource: DeclaredResource) -> DeclaredResource | None:
    if not resource.provider:
        return None
    urn = resource.provider.rsplit("::", 1)[0]  # a provider reference is `<urn>::<id>`
    return next((r for r in run.resources if r.urn == urn), None)


def effective_tags(run: ProgramRun, resource: DeclaredResource) -> dict[str, str]:
    """The tags AWS will hold: the provider's default tags overlaid with the resource's own."""
    tags: dict[str, str] = {}
    prov = provider_of(run, resource)
    if prov is not None:
        default = prov.inputs.get("defaultTags")
        if isinstance(default, str):
            import json

            default = json.loads(default)
        if isinstance(default, dict):
            tags.update(default.get("tags") or {})
    own = resource.inputs.get("tags")
    if isinstance(own, dict):
        tags.update(own)
    return tags
