"""AWS sessions and the retry policy for calls that can be throttled or are eventually consistent.

botocore's own retries are turned off so that exactly one policy (this one) decides what is retried:
bounded attempts, exponential backoff with full jitter. A call that is not idempotent must not be
wrapped in `retry_transient` blindly; its caller decides how to resume (see `ObjectStore.put_if_absent`).
"""

from __future__ import annotations

from typing import Callable, TypeVar

import botocore.exceptions
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from bootstrap.errors import CloudError

T = TypeVar("T")

TRANSIENT_CODES = frozenset({
    "Throttling", "ThrottlingException", "ThrottledException", "RequestLimitExceeded", "SlowDown",
    "TooManyRequestsException", "RequestThrottled", "ServiceUnavailable", "InternalError",
    "InternalFailure", "RequestTimeout", "RequestTimeoutException", "503", "500", "502", "504",
    "PriorRequestNotComplete", "OperationAborted",
})

MAX_ATTEMPTS = 8


def error_code(exc: BaseException) -> str:
    if isinstance(exc, botocore.exceptions.ClientError):
        err = exc.response.get("Error", {})
        return str(err.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
    return ""


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, (botocore.exceptions.ConnectionError, botocore.exceptions.ReadTimeoutError,
                        botocore.exceptions.ConnectTimeoutError)):
        return True
    if isinstance(exc, botocore.exceptions.ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        return error_code(exc) in TRANSIENT_CODES or status in (500, 502, 503, 504)
    return False


def retry_transient(fn: Callable[[], T], *, what: str, extra: Callable[[BaseException], bool] | None = None,
                    attempts: int = MAX_ATTEMPTS) -> T:
    """Run an idempotent call, retrying throttling and transient failures (and `extra` ones)."""
    pred = (lambda e: is_transient(e) or extra(e)) if extra else is_transient
    try:
        for attempt in Retrying(
            retry=retry_if_exception(pred),
            stop=stop_after_attempt(attempts),
            wait=wait_random_exponential(multiplier=0.05, max=2.0),
            reraise=True,
        ):
            with attempt:
                return fn()
    except botocore.exceptions.ClientError as exc:
        if pred(exc):
            raise CloudError(
                f"AWS kept refusing to {what} ({error_code(exc)}) after {attempts} attempts. This is "
                "throttling or an outage, not a problem with your input; wait a minute and re-run."
            ) from None
        raise
    except botocore.exceptions.BotoCoreError as exc:
        raise CloudError(
            f"Could not reach AWS to {what} ({type(exc).__name__}). Check the network and the "
            "endpoint, then re-run."
        ) from None
    raise AssertionError("unreachable")


def _client_config():
    import botocore.config  # ~0.1 s: paid by commands that talk to AWS, not by `--help`

    return botocore.config.Config(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
        s3={"addressing_style": "path"},
    )


class AwsClients:
    """Clients for one environment's account and region, pointed at its endpoint when it has one."""

    def __init__(self, region: str, endpoint_url: str | None = None, profile: str | None = None,
                 credentials: dict | None = None):
        self.region = region
        self.endpoint_url = endpoint_url
        import boto3  # here, not at import: `groundctl --help` must not pay for it

        self._session = boto3.session.Session(profile_name=profile, region_name=region, **(credentials or {}))
        self._cache: dict[tuple[str, str], object] = {}

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
            self._cache[key] = self._session.client(
                service, region_name=key[1], endpoint_url=self.endpoint_url, config=_client_config()
            )
        return self._cache[key]
