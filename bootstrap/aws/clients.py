"""AWS sessions and the retry policy for calls that can be throttled or are eventually consistent.

botocore's own retries are turned off so that exactly one policy (this one) decides what is retried:
bounded attempts, exponential backoff with full jitter. A call that is not idempotent must not be
wrapped in `retry_transient` blindly; its caller decides how to resume (see `ObjectStore.put_if_absent`).

Waiting is bounded three ways, so a command against an endpoint that accepts connections and never
answers (or drips a byte at a time) fails with one paragraph within a minute: socket timeouts sized
for the calls groundctl makes; a deadline per call across all its attempts (enforced on every thread,
even while a response trickles in, which no socket timeout catches: see `bootstrap.aws.deadline`); and
a budget for the whole process, after which an endpoint that has not answered is not waited on again.

Throttling (503 SlowDown and its kin) is waited out for the whole call deadline, not a fixed number of
attempts: a storm of a few tens of seconds must not fail a restore half-way or strand the lock.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import os
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional
from urllib.parse import urlsplit

import botocore.exceptions
import botocore.parsers
from tenacity import Retrying, retry_if_exception, wait_random_exponential

from bootstrap.aws import deadline as _deadline
from bootstrap.kit.errors import BadInput, CloudError
from bootstrap.kit.invocation import rerun

T = TypeVar("T")

# Throttling is an answer ("not now"), not an outage: it is retried for the whole call deadline.
THROTTLING_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded", "SlowDown",
    "TooManyRequestsException", "RequestThrottled", "503", "429",
})
TRANSIENT_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded", "SlowDown",
    "TooManyRequestsException", "RequestThrottled", "ServiceUnavailable", "InternalError",
    "InternalFailure", "RequestTimeout", "RequestTimeoutException", "503", "500", "502", "504",
    "PriorRequestNotComplete", "OperationAborted",
})

MAX_ATTEMPTS = 8  # for failures other than throttling (a dropped connection, a 500)
THROTTLED_ATTEMPTS = 200  # a backstop only: throttling is retried until the call deadline
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 15.0
# One call, all its attempts: long enough to stream a large state, short enough to fail within a minute.
# An operator on a slow link raises it with GROUNDCTL_CLOUD_DEADLINE (seconds).
DEADLINE_ENV = "GROUNDCTL_CLOUD_DEADLINE"
CALL_DEADLINE = 40.0
# What the whole process may spend on calls that end unanswered, beyond one call's deadline.
BUDGET_SLACK = 5.0


_Deadline = _deadline.Cut


def call_deadline() -> float:
    raw = os.environ.get(DEADLINE_ENV)
    if raw is None:
        return CALL_DEADLINE
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 1 <= value <= 3600:
        raise BadInput(f"{DEADLINE_ENV}={raw[:40]!r} is not a number of seconds between 1 and 3600. Unset it to wait "
                       f"the default {CALL_DEADLINE:.0f} s per AWS call, or give e.g. {DEADLINE_ENV}=120.")
    return value


class _Budget:
    """Time spent in attempts that ended unanswered (timeouts, refused connections, deadlines)."""

    def __init__(self):
        self.spent = 0.0
        self._mutex = threading.Lock()

    def charge(self, seconds: float) -> None:
        with self._mutex:
            self.spent += seconds

    def answered(self) -> None:
        with self._mutex:
            self.spent = 0.0

    def left(self, deadline: float) -> float:
        return max(0.0, deadline + BUDGET_SLACK - self.spent)


BUDGET = _Budget()
_scoped = threading.local()


def _budget() -> _Budget:
    return getattr(_scoped, "budget", None) or BUDGET


@contextmanager
def separate_budget() -> Iterator[None]:
    """Calls on this thread spend a budget of their own: a pool reading many environments (fleet status) keeps
    one stuck endpoint's unanswered calls from costing the other environments their attempts."""
    outer = getattr(_scoped, "budget", None)
    _scoped.budget = _Budget()
    try:
        yield
    finally:
        _scoped.budget = outer


def error_code(exc: BaseException) -> str:
    if isinstance(exc, botocore.exceptions.ClientError):
        err = exc.response.get("Error", {})
        return str(err.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return ""


def is_throttling(exc: BaseException) -> bool:
    if not isinstance(exc, botocore.exceptions.ClientError):
        return False
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return error_code(exc) in THROTTLING_CODES or status in (429, 503)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (botocore.exceptions.ConnectionError, botocore.exceptions.ReadTimeoutError,
                        botocore.exceptions.ConnectTimeoutError)):
        return True
    if isinstance(exc, botocore.exceptions.ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(exc) in TRANSIENT_CODES or status in (500, 502, 503, 504)
    return False


# Errors whose cause is the caller's credentials, not the network: each gets its own cause and fix.
CREDENTIAL_FAILURES = (
    botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError,
    botocore.exceptions.ProfileNotFound, botocore.exceptions.SSOError, botocore.exceptions.TokenRetrievalError,
    botocore.exceptions.CredentialRetrievalError,
)
CREDENTIAL_CODES = frozenset({
    "ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired", "InvalidClientTokenId",
    "UnrecognizedClientException", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken",
})
_LOGIN = ("Log in again (`aws sso login --profile <name>`), or export fresh AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY "
          "and AWS_SESSION_TOKEN, then re-run.")


def credentials_error(what: str, exc: BaseException) -> CloudError:
    """What is wrong with the credentials, named, and how to fix it; never the credentials themselves."""
    if isinstance(exc, botocore.exceptions.ProfileNotFound):
        profile = str(getattr(exc, "kwargs", {}).get("profile", ""))[:64]
        why = (f"the AWS profile '{profile}' is not in your AWS config. Check AWS_PROFILE or the spec's aws.profile "
               "against `aws configure list-profiles`, or unset AWS_PROFILE to use the default credentials; then re-run.")
    elif isinstance(exc, (botocore.exceptions.NoCredentialsError, botocore.exceptions.PartialCredentialsError)):
        why = ("no AWS credentials were found. Set AWS_PROFILE (or the spec's aws.profile) to a profile you are logged "
               "in to, or export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, then re-run.")
    elif error_code(exc) in ("ExpiredToken", "ExpiredTokenException", "RequestExpired", "TokenRefreshRequired") \
            or isinstance(exc, (botocore.exceptions.SSOError, botocore.exceptions.TokenRetrievalError)):
        why = "your AWS session has expired. " + _LOGIN
    elif isinstance(exc, botocore.exceptions.CredentialRetrievalError):
        why = "the credential process or role in your AWS profile did not return credentials. " + _LOGIN
    else:
        why = (f"AWS did not accept the credentials ({error_code(exc)}): they are wrong, revoked or for another "
               "partition. " + _LOGIN)
    return CloudError(f"Could not {what}: {why}")


def _unanswered(exc: BaseException) -> bool:
    return isinstance(exc, (botocore.exceptions.ConnectionError, botocore.exceptions.ReadTimeoutError,
                            botocore.exceptions.ConnectTimeoutError, _Deadline))


def endpoint_name(url: Optional[str]) -> str:
    """How a message names where a call went: AWS itself, or the emulator an endpoint override points at
    (groundctl allows an override only for non-production environments, which is what an emulator serves)."""
    if not url:
        return "the AWS endpoint"
    host = urlsplit(url).netloc or url
    return "AWS" if host.endswith(("amazonaws.com", "amazonaws.com.cn")) else f"the emulator at {host}"


def _unreachable(what: str, why: str, url: Optional[str] = None) -> CloudError:
    where = endpoint_name(url)
    if where.startswith("the emulator"):
        fix = "Is the emulator still running (`groundctl emulator start`)? Check --endpoint-url or GROUNDCTL_ENDPOINT_URL"
    elif where == "AWS":
        fix = "Check this machine's network path to AWS (a proxy, a VPN, AWS_ENDPOINT_URL)"
    else:
        fix = "Check the network path and the endpoint (--endpoint-url, AWS_ENDPOINT_URL, a proxy)"
    # Only a call that never connected is known to have changed nothing; a write whose answer was lost may have landed.
    outcome = " Nothing was changed by this call." if "could not be reached" in why else ""
    return CloudError(f"Could not {what}: {where} {why}.{outcome} {fix}, then re-run.")


def _explained(exc: BaseException, what: str, limit: float, url: Optional[str], pred, tries: int,
               elapsed: float) -> BaseException:
    """The groundctl error for a call's last failure; anything groundctl cannot explain is returned as it is."""
    if isinstance(exc, botocore.parsers.ResponseParserError):
        return _unreachable(what, "answered with something that is not an AWS response (an empty or garbled body); "
                                  "it is not AWS or the emulator, or something in between rewrote the answer", url)
    if isinstance(exc, botocore.exceptions.ClientError):
        if error_code(exc) in CREDENTIAL_CODES:
            return credentials_error(what, exc)
        if pred(exc):
            return CloudError(f"AWS kept refusing to {what} ({error_code(exc)}) for {elapsed:.0f} s ({tries} "
                              f"attempt{'s' if tries != 1 else ''}). This is throttling or an outage, not a problem "
                              f"with your input; wait a minute and {rerun()}.")
        return exc
    if isinstance(exc, (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError)):
        return _unreachable(what, f"did not answer within {limit:.0f} s", url)
    if isinstance(exc, CREDENTIAL_FAILURES):
        return credentials_error(what, exc)
    if isinstance(exc, botocore.exceptions.EndpointConnectionError):
        return _unreachable(what, "could not be reached (the connection was refused, or the name does not resolve)", url)
    if isinstance(exc, botocore.exceptions.BotoCoreError):
        return _unreachable(what, "failed before it answered", url)
    return exc


def retry_transient(fn: Callable[[], T], *, what: str, extra: Callable[[BaseException], bool] | None = None,
                    attempts: int = MAX_ATTEMPTS) -> T:
    """Run an idempotent call, retrying throttling and transient failures (and `extra` ones).

    All attempts together end within the call deadline (less when the process budget is nearly spent).
    """
    pred = (lambda e: is_transient(e) or extra(e)) if extra else is_transient
    deadline = call_deadline()
    budget = _budget()
    if budget.left(deadline) <= 0:
        raise _unreachable(what, "left earlier calls of this run unanswered until its time budget "
                                 f"({deadline + BUDGET_SLACK:.0f} s) was spent, so it was not tried again")
    limit = min(deadline, budget.left(deadline))
    begun = time.monotonic()
    ends = begun + limit
    seen: dict = {"tries": 0}  # the endpoint a failed attempt names, and how many were made, for the message

    backoff = wait_random_exponential(multiplier=0.05, max=2.0)

    def stop(state) -> bool:
        if time.monotonic() >= ends:
            return True
        failure = state.outcome.exception() if state.outcome is not None else None
        cap = THROTTLED_ATTEMPTS if failure is not None and is_throttling(failure) else attempts
        return state.attempt_number >= cap

    def attempt_once() -> T:
        started = time.monotonic()
        if started >= ends and "last" in seen:
            raise seen["last"]  # the wait before this retry ran past the deadline: the last failure stands
        seen["tries"] += 1
        with _deadline.bounded(ends) as call:
            try:
                result = fn()
            except BaseException as exc:
                seen["url"] = getattr(exc, "kwargs", {}).get("endpoint_url") or call.where or seen.get("url")
                if call.cut and call.conns and not isinstance(exc, _Deadline):
                    # The watchdog shut the connection: whatever broke, the deadline did it. A call that sent
                    # nothing (no credentials found, slowly, on a starved machine) failed for its own reason.
                    exc = _Deadline()
                if not isinstance(exc, _Deadline):
                    seen["last"] = exc
                if _unanswered(exc):
                    budget.charge(time.monotonic() - started)
                if isinstance(exc, _Deadline):
                    raise exc from None
                raise
        budget.answered()  # an endpoint that answers again has its budget back
        return result

    try:
        for attempt in Retrying(
            retry=retry_if_exception(pred),
            stop=stop,
            wait=lambda state: min(backoff(state), max(0.0, ends - time.monotonic())),  # never past the deadline
            reraise=True,
        ):
            with attempt:
                return attempt_once()
    except _Deadline:
        prior = seen.get("last")
        if prior is None:
            raise _unreachable(what, f"did not finish answering within {limit:.0f} s (it accepted the connection "
                                     "but its response never completed)", seen.get("url")) from None
        # The deadline cut a retry short: the failure that caused the retries says what is wrong.
        raise _explained(prior, what, limit, seen.get("url"), pred, seen["tries"], time.monotonic() - begun) from None
    except Exception as exc:
        raise _explained(exc, what, limit, seen.get("url"), pred, seen["tries"], time.monotonic() - begun) from None


def _client_config():
    import botocore.config  # ~0.1 s: paid by commands that talk to AWS, not by `--help`

    return botocore.config.Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=min(READ_TIMEOUT, call_deadline()),
        s3={"addressing_style": "path"},
    )


class _SearchPaths(list):
    """A loader's search paths, which every boto3 session sharing the loader appends boto3's own data folder to."""

    def append(self, path) -> None:
        if path not in self:
            super().append(path)


_LOADERS: dict[str | None, object] = {}
_LOADERS_MUTEX = threading.Lock()


def _shared_loader(data_path: str | None):
    """One botocore data loader per data path for the process. A new session's own loader parses the service
    models and endpoint rules again (megabytes of JSON, ~0.1 s of CPU per session); the files do not change
    while the process runs, and each session used to cache them for itself only, so every environment fleet
    status reads, and every command run in one process, paid for them again."""
    import botocore.loaders

    with _LOADERS_MUTEX:
        loader = _LOADERS.get(data_path)
        if loader is None:
            loader = botocore.loaders.create_loader(data_path)
            loader._search_paths = _SearchPaths(loader.search_paths)
            _LOADERS[data_path] = loader
        return loader


class AwsClients:
    """Clients for one environment's account and region, pointed at its endpoint when it has one."""

    def __init__(self, region: str, endpoint_url: str | None = None, profile: str | None = None,
                 credentials: dict | None = None):
        self.region = region
        self.endpoint_url = endpoint_url
        import boto3  # here, not at import: `groundctl --help` must not pay for it
        import botocore.session

        try:
            core = botocore.session.get_session()
            if profile is not None:
                core.set_config_variable("profile", profile)
            core.register_component("data_loader", _shared_loader(core.get_config_variable("data_path")))
            self._session = boto3.session.Session(botocore_session=core, profile_name=profile, region_name=region,
                                                  **(credentials or {}))
        except botocore.exceptions.ProfileNotFound as exc:
            raise credentials_error("open an AWS session", exc) from None
        self._cache: dict[tuple[str, str], object] = {}
        self.caller_account: str | None = None  # what sts:GetCallerIdentity answered these credentials

    @classmethod
    def for_spec(cls, spec, endpoint_url: str | None = None) -> "AwsClients":
        endpoint = endpoint_url or (spec.aws.endpoint_url if spec.aws.endpoint_url != "embedded" else None)
        creds = None
        if endpoint:
            # The emulator accepts any credentials; fixed ones keep a real profile out of the way.
            creds = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
        return cls(spec.aws.region, endpoint, None if endpoint else spec.aws.profile, creds)

    def client(self, service: str, region: str | None = None):
        key = (service, region or self.region)
        if key not in self._cache:
            try:
                self._cache[key] = self._session.client(
                    service, region_name=key[1], endpoint_url=self.endpoint_url, config=_client_config()
                )
            except CREDENTIAL_FAILURES as exc:  # botocore resolves credentials when it makes a client
                raise credentials_error(f"open an AWS {service} client", exc) from None
            _deadline.deadline_aware(self._cache[key])
        return self._cache[key]
