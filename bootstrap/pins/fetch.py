"""Reading a release file over HTTP(S), bounded: at most `max_bytes`, every attempt and the whole read within a
deadline, a page of HTML (a proxy's login or error page) refused, retried with tenacity (bounded, jittered) only
where a retry can help: a connection that failed or a 5xx/429 answer. The I/O edge of `groundctl pins`."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Mapping, Optional

from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_random_exponential

DEFAULT_DEADLINE_SECONDS = 120.0  # one file, every attempt included
ATTEMPTS = 4
CHUNK = 64 * 1024


class FetchProblem(Exception):
    """Why a URL could not be read; `retry` when another attempt may succeed."""

    def __init__(self, url: str, reason: str, retry: bool = False, status: int = 0,
                 headers: Optional[Mapping[str, str]] = None):
        super().__init__(f"{url}: {reason}")
        self.url, self.reason, self.retry, self.status = url, reason, retry, status
        self.headers = dict(headers or {})


@dataclass(frozen=True)
class Answer:
    body: bytes
    headers: Mapping[str, str]
    url: str  # the URL read (after redirects)



def _looks_like_html(body: bytes, content_type: str) -> bool:
    head = body[:512].lstrip().lower()
    return "text/html" in content_type.lower() or head.startswith((b"<!doctype html", b"<html"))


def _read_once(url: str, max_bytes: int, until: float, headers: Mapping[str, str], method: str,
               allow_html: bool) -> Answer:
    remaining = until - time.monotonic()
    if remaining <= 0:
        raise FetchProblem(url, "no answer within the deadline")
    request = urllib.request.Request(url, headers=dict(headers), method=method)
    try:
        with urllib.request.urlopen(request, timeout=min(remaining, 30.0)) as response:  # noqa: S310 - http(s)
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise FetchProblem(url, f"it is {int(declared):,} bytes, over the {max_bytes:,}-byte limit")
            parts, size = [], 0
            while method != "HEAD":
                if time.monotonic() > until:
                    raise FetchProblem(url, "the download did not finish within the deadline (a stalled mirror?)")
                chunk = response.read1(CHUNK)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise FetchProblem(url, f"it is over the {max_bytes:,}-byte limit")
                parts.append(chunk)
            body = b"".join(parts)
            answered = {k.lower(): v for k, v in response.headers.items()}
            if not allow_html and _looks_like_html(body, answered.get("content-type", "")):
                raise FetchProblem(url, "it answered an HTML page, not the file (a proxy's login or error page?)")
            return Answer(body, answered, response.geturl())
    except urllib.error.HTTPError as exc:
        retry = exc.code >= 500 or exc.code == 429
        answered = {k.lower(): v for k, v in (exc.headers or {}).items()}
        raise FetchProblem(url, f"HTTP {exc.code} {exc.reason}", retry=retry, status=exc.code,
                           headers=answered) from None
    except FetchProblem:
        raise
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):  # connected (or not) but no answer: a stalled mirror, not a refusal
            raise FetchProblem(url, "no answer within the deadline (a stalled mirror or proxy?)", retry=True) from None
        raise FetchProblem(url, f"cannot connect ({reason})", retry=True) from None


def fetch(url: str, *, max_bytes: int, deadline: float = DEFAULT_DEADLINE_SECONDS,
          headers: Optional[Mapping[str, str]] = None, method: str = "GET", allow_html: bool = False,
          attempts: int = ATTEMPTS) -> Answer:
    """`url`'s body (at most `max_bytes`), within `deadline` seconds however many attempts; FetchProblem."""
    until = time.monotonic() + deadline
    for attempt in Retrying(stop=stop_after_attempt(attempts) | stop_after_delay(deadline),
                            wait=wait_random_exponential(multiplier=0.5, max=8),
                            retry=retry_if_exception(lambda e: isinstance(e, FetchProblem) and e.retry
                                                     and time.monotonic() < until),
                            reraise=True):
        with attempt:
            return _read_once(url, max_bytes, until, headers or {}, method, allow_html)
    raise AssertionError("unreachable: tenacity reraises")
