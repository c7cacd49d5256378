"""Every engine, seen through a scrubber: no error leaves the engine boundary carrying a secret.

The engine only knows the secrets it was handed as config, but the process it runs inherits the whole
environment (the Flux deploy key, the passphrase) and may repeat any of it in an error. The target
knows every secret of the environment, so it wraps whatever engine it builds, and no command path
(plan, drift, up, destroy, recover, the drills) can forget to scrub.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from bootstrap.kit.errors import GroundctlError
from bootstrap.kit.masking import mask_text

MASK = "[secret]"


def scrub_exception(exc: BaseException, secrets: Iterable[str]) -> None:
    """Mask every secret out of `exc`'s message and string arguments, in place."""
    values = [s for s in secrets if s]
    if not values:
        return
    if isinstance(exc, GroundctlError):
        exc.message = mask_text(exc.message, values, MASK)
    exc.args = tuple(mask_text(a, values, MASK) if isinstance(a, str) else a for a in exc.args)
    for chained in (exc.__cause__, exc.__context__):
        if chained is not None and chained is not exc:
            chained.args = tuple(mask_text(a, values, MASK) if isinstance(a, str) else a for a in chained.args)


class ScrubbingEngine:
    """Delegates to `inner`; an exception from any of its methods is scrubbed before it propagates."""

    def __init__(self, inner: Any, secrets: Callable[[], Iterable[str]]):
        self._inner = inner
        self._secrets = secrets

    @property
    def inner(self) -> Any:
        return self._inner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            try:
                return attr(*args, **kwargs)
            except BaseException as exc:
                scrub_exception(exc, self._secrets())
                raise

        return call
