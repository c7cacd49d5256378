"""Resolving an environment into what a command needs: spec, endpoint, AWS clients, state store, engine.

The endpoint is decided by `resolve_endpoint` (pure), in this order:
1. `--endpoint-url URL` — any non-production environment;
2. `GROUNDCTL_ENDPOINT_URL` — only for specs that already target an emulator (`aws.endpoint_url` set),
   so a variable exported for local work can never redirect `dev` or `prod` somewhere else;
3. the spec's `aws.endpoint_url`: a URL is used as is; `embedded` starts an in-process emulator for the
   life of the command (its contents are gone when the command ends; `groundctl emulator start` keeps
   one running across commands);
4. none: real AWS (for a production spec, only while no AWS_ENDPOINT_URL* variable, which boto3 and the AWS
   provider would follow, is set).
The engine is built lazily through a factory (the product uses `PulumiEngine`, tests pass their own),
so commands that only read the state bucket (`status`) never need the Pulumi CLI.
"""

from __future__ import annotations

import os
import re
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional

from bootstrap.kit.errors import BadInput

# The engine pulls in pulumi, the spec pydantic, the clients and store botocore: only commands that use them pay.
if TYPE_CHECKING:
    from bootstrap.aws.clients import AwsClients
    from bootstrap.aws.objectstore import ObjectStore
    from bootstrap.engine.protocol import Engine
    from bootstrap.spec import EnvironmentSpec

ENDPOINT_ENV = "GROUNDCTL_ENDPOINT_URL"
# Environment variables whose values are secrets the engine may be handed; their values are redacted
# from everything groundctl prints or stores. (The Pulumi passphrase for `local`, the Flux deploy key.)
SECRET_ENV_VARS = ("PULUMI_CONFIG_PASSPHRASE", "GROUNDCTL_FLUX_DEPLOY_KEY")
PASSPHRASE_FILE_ENV = "PULUMI_CONFIG_PASSPHRASE_FILE"  # its contents are the passphrase
_URL = re.compile(r"^https?://[^\s/]+(:\d+)?/?$")


@dataclass(frozen=True)
class Endpoint:
    url: Optional[str]  # None: real AWS; "embedded": start an emulator
    source: str


def resolve_endpoint(spec: EnvironmentSpec, flag: Optional[str], environ: Mapping[str, str]) -> Endpoint:
    if flag:
        if spec.production:
            raise BadInput(
                f"--endpoint-url points '{spec.name}' somewhere other than AWS, but it is a production "
                "environment; emulator endpoints are for non-production environments only. Drop the flag."
            )
        return Endpoint(_checked_url(flag, "--endpoint-url"), "--endpoint-url")
    if spec.aws.endpoint_url is None:
        redirect = sorted(k for k in environ if k == "AWS_ENDPOINT_URL" or k.startswith("AWS_ENDPOINT_URL_"))
        if spec.production and redirect:
            # boto3 and the AWS provider honour these of themselves: a variable left from local work would send a
            # production environment's calls (its state, its KMS key, its resources) somewhere other than AWS.
            raise BadInput(f"{redirect[0]} is set, which would point the production environment '{spec.name}' "
                           "somewhere other than AWS; a production environment is reached only at AWS's own "
                           f"endpoints. Unset it (unset {' '.join(redirect)}) and run the command again.")
        return Endpoint(None, "AWS")
    env_url = environ.get(ENDPOINT_ENV, "").strip()
    if env_url:
        return Endpoint(_checked_url(env_url, ENDPOINT_ENV), ENDPOINT_ENV)
    if spec.aws.endpoint_url == "embedded":
        return Endpoint("embedded", "embedded emulator")
    return Endpoint(spec.aws.endpoint_url, "spec")


def _checked_url(url: str, where: str) -> str:
    if not _URL.fullmatch(url):
        raise BadInput(f"{where} is '{url}', which is not an endpoint URL; use http(s)://host:port, e.g. "
                       "the URL `groundctl emulator start` prints.")
    return url.rstrip("/")


@dataclass(frozen=True)
class EngineContext:
    spec: EnvironmentSpec
    endpoint_url: Optional[str]
    store: ObjectStore
    lineage_for: Callable[[str], Optional[str]]


EngineFactory = Callable[[EngineContext], "Engine"]
EngineCheck = Callable[[], None]


def pulumi_engine(ctx: EngineContext) -> Engine:
    from bootstrap.engine.automation import PulumiEngine
    from bootstrap.engine.preflight import stored_states

    # Each layer's state read from the bucket, freshly, when the engine first meets its stack, instead of a
    # `pulumi stack export` per layer (after a write of its own the engine exports).
    return PulumiEngine(ctx.spec, endpoint_url=ctx.endpoint_url, lineage_for=ctx.lineage_for,
                        state_of=lambda layer: stored_states(ctx.store, ctx.spec.name)(layer))


def require_pulumi() -> None:
    """What the engine needs of this machine, each missing one as its one-paragraph error (exit 4): a writable
    folder for temporary files, then the `pulumi` binary."""
    from bootstrap.engine.preflight import require_pulumi as engine_requires_pulumi
    from bootstrap.kit.scratch import require_scratch

    require_scratch()
    engine_requires_pulumi()


@dataclass
class Target:
    spec: EnvironmentSpec  # with aws.endpoint_url set to the URL actually used (or None for AWS)
    endpoint: Endpoint
    clients: AwsClients
    store: ObjectStore
    engine_factory: EngineFactory
    engine_check: EngineCheck
    lineages: dict[str, str] = field(default_factory=dict)
    extra_secrets: set[str] = field(default_factory=set)
    backend_report: Optional[object] = None  # what ensure_backend found or made in this run (a BackendReport)
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    _engine: Optional[Engine] = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def endpoint_url(self) -> Optional[str]:
        return self.spec.aws.endpoint_url

    @property
    def emulated(self) -> bool:
        """Whether AWS is an emulator here (so there is no real EKS, and no Kubernetes API)."""
        return self.endpoint_url is not None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            from bootstrap.engine.scrubbing import ScrubbingEngine

            from bootstrap.kit import console
            from bootstrap.kit.masking import short_secret_warning

            weak = short_secret_warning(SECRET_ENV_VARS[0], self.environ.get(SECRET_ENV_VARS[0], ""))
            if weak:
                console.warn(weak)
            ctx = EngineContext(self.spec, self.endpoint_url, self.store, self.lineage_for)
            self._engine = ScrubbingEngine(self.engine_factory(ctx), self.secret_values)
        return self._engine

    def lineage_for(self, layer: str) -> Optional[str]:
        # The orchestrator fills `lineages` before each `up`; the ledger is the fallback.
        if layer in self.lineages:
            return self.lineages[layer]
        try:
            from bootstrap.records.ledger import current_lineage
        except ImportError:
            return None
        return current_lineage(self.store, layer, self.spec.name)

    def require_bucket(self) -> None:
        """BadInput when the state bucket does not exist (nothing of this environment is deployed)."""
        import botocore.exceptions

        from bootstrap.aws.clients import error_code, retry_transient
        from bootstrap.kit.errors import StateBucketMissing

        s3, bucket = self.clients.client("s3"), self.spec.backend.bucket
        try:
            retry_transient(lambda: s3.head_bucket(Bucket=bucket), what=f"find the state bucket {bucket}")
        except botocore.exceptions.ClientError as exc:
            if error_code(exc) in ("404", "NoSuchBucket", "NotFound"):
                raise StateBucketMissing(self.name, bucket) from None
            raise

    def secret_values(self) -> list[str]:
        values = [v for v in (self.environ.get(name, "") for name in SECRET_ENV_VARS) if v]
        if self.environ.get(PASSPHRASE_FILE_ENV) and not self.environ.get("PULUMI_CONFIG_PASSPHRASE"):
            from bootstrap.engine.passphrase import passphrase_from

            try:
                values.append(passphrase_from(self.environ)[0] or "")
            except BadInput:
                pass  # unreadable: the engine refuses the run, and no value of it can leak
        values += sorted(self.extra_secrets)
        # A deploy key or kubeconfig is several lines; a message quoting one line must not leak it.
        lines = [ln.strip() for v in values if "\n" in v for ln in v.splitlines() if len(ln.strip()) >= 16]
        return values + lines


def probe_tcp(host: str, port: int, timeout: float = 3.0) -> Optional[str]:
    """None when a TCP connection to host:port opens (e.g. a cluster's API); otherwise why not."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"


@contextmanager
def open_target(environment: str, *, endpoint_url: Optional[str] = None,
                engine_factory: Optional[EngineFactory] = None, engine_check: Optional[EngineCheck] = None,
                environ: Optional[Mapping[str, str]] = None, spec: Optional[EnvironmentSpec] = None,
                on_emulator: Callable[[str], None] = lambda url: None) -> Iterator[Target]:
    """The environment, ready to use; an embedded emulator lives exactly as long as this block."""
    environ = os.environ if environ is None else environ
    if spec is None:
        from bootstrap.spec import load_spec

        spec = load_spec(environment)
    endpoint = resolve_endpoint(spec, endpoint_url, environ)
    with ExitStack() as stack:
        url = endpoint.url
        if url == "embedded":
            from bootstrap.aws.emulator import running_emulator

            url = stack.enter_context(running_emulator())
            on_emulator(url)
        from bootstrap.aws.clients import AwsClients
        from bootstrap.aws.objectstore import ObjectStore

        resolved = spec.model_copy(update={"aws": spec.aws.model_copy(update={"endpoint_url": url})})
        clients = AwsClients.for_spec(resolved, url)
        store = ObjectStore(clients.client("s3"), resolved.backend.bucket)
        yield Target(resolved, endpoint, clients, store, engine_factory or pulumi_engine,
                     engine_check or require_pulumi, environ=environ)
