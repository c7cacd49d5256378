"""What one rehearsal proved, as plain data: the decryption (which provider, and why it failed), the preview
(no change, drift with the resources and fields, or the engine's error), and the outcome of a version and of
a layer. Pure: the shell hands in what the engine and KMS said."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import parse_qs, unquote, urlsplit

from bootstrap.engine.results import SECRET_SIG
from bootstrap.engine.secrets_provider import PASSPHRASE

MAX_CHANGES = 100       # changed resources kept in a record; the count says how many there were
MAX_WALK = 2_000_000    # values visited when counting secrets: a bound, far above any real state
OUTCOMES = ("proven", "drift", "failed", "skipped")


@dataclass(frozen=True)
class KeyState:
    """What KMS DescribeKey said about the key of a state's `awskms://` provider."""

    key_id: str
    arn: Optional[str] = None
    state: Optional[str] = None          # Enabled | Disabled | PendingDeletion | …; None when unread
    deletion_date: Optional[str] = None
    error: Optional[str] = None          # DescribeKey's own error code, when it failed

    def to_dict(self) -> dict:
        return {"id": self.key_id, "arn": self.arn, "state": self.state, "deletion_date": self.deletion_date,
                "describe_error": self.error}


@dataclass(frozen=True)
class Decrypt:
    result: str                      # ok | failed | not-attempted
    provider: Optional[str] = None   # `passphrase` or the provider URL, as the state records it
    kind: Optional[str] = None       # why it failed: wrong-passphrase, passphrase-missing, access-denied, …
    message: Optional[str] = None
    secrets: int = 0                 # secret values of the state decrypted
    key: Optional[KeyState] = None

    def to_dict(self) -> dict:
        return {"result": self.result, "provider": self.provider, "kind": self.kind, "message": self.message,
                "secrets": self.secrets, "key": self.key.to_dict() if self.key else None}


@dataclass(frozen=True)
class Preview:
    result: str                          # no-change | drift | failed | not-attempted
    summary: str = ""
    counts: dict = field(default_factory=dict)
    changes: tuple[dict, ...] = ()       # at most MAX_CHANGES: {urn, type, operation, diff_keys}
    changes_total: int = 0
    error: Optional[str] = None

    def to_dict(self) -> dict:
        return {"result": self.result, "summary": self.summary, "counts": dict(self.counts),
                "changes": list(self.changes), "changes_total": self.changes_total, "error": self.error}


@dataclass(frozen=True)
class Attempt:
    """One version restored into the scratch backend, decrypted and previewed (as far as it got)."""

    version: dict                    # key, version_id, source, serial, sha256, lineage, last_modified, label
    age_seconds: Optional[float]     # the version's age when rehearsed (the RPO only when nothing newer exists)
    decrypt: Decrypt = Decrypt("not-attempted")
    preview: Preview = Preview("not-attempted")
    seconds: dict = field(default_factory=dict)   # phase -> seconds
    failed_phase: Optional[str] = None
    reason: Optional[str] = None

    @property
    def outcome(self) -> str:
        if self.failed_phase:
            return "failed"
        return "drift" if self.preview.result == "drift" else "proven"

    def to_dict(self) -> dict:
        return {"version": dict(self.version), "age_seconds": self.age_seconds, "outcome": self.outcome,
                "failed_phase": self.failed_phase, "reason": self.reason, "decrypt": self.decrypt.to_dict(),
                "preview": self.preview.to_dict(), "seconds": dict(self.seconds)}


@dataclass(frozen=True)
class LayerResult:
    layer: str
    attempt: Optional[Attempt] = None            # the version a recovery would choose, rehearsed
    choice: dict = field(default_factory=dict)   # the choose phase's reason, message, next step
    references: tuple[dict, ...] = ()            # layers restored first: layer, version, restored, note
    others: tuple[Attempt, ...] = ()             # --newest: the other newest versions of the stack object
    not_rehearsed: tuple[dict, ...] = ()         # --newest versions never rehearsed, and why
    skipped: Optional[str] = None                # not rehearsed at all (not deployed, no Kubernetes API)
    failed_phase: Optional[str] = None           # failed before a version was restored (choose, references)
    reason: Optional[str] = None
    seconds: dict = field(default_factory=dict)  # the phases before the version's own (choose, references)
    # The measured RPO: what a restore of the chosen version now loses, 0 when it is the stack's newest state
    # (`recovery.choice.recovery_point.measured_rpo`); and the newer states: {versions, oldest: {version_id, time,
    # serial} or None}.
    rpo_seconds: Optional[float] = None
    newer: Optional[dict] = None

    @property
    def outcome(self) -> str:
        if self.skipped:
            return "skipped"
        if self.failed_phase or self.attempt is None:
            return "failed"
        return self.attempt.outcome

    @property
    def age_seconds(self) -> Optional[float]:
        return self.attempt.age_seconds if self.attempt else None

    def to_dict(self) -> dict:
        a = self.attempt
        failed_phase = self.failed_phase or (a.failed_phase if a else None)
        return {"layer": self.layer, "outcome": self.outcome, "skipped_reason": self.skipped,
                "failed_phase": failed_phase, "reason": self.reason or (a.reason if a else None),
                "age_seconds": self.age_seconds, "rpo_seconds": self.rpo_seconds,
                "newer": dict(self.newer) if self.newer is not None else None,
                "version": dict(a.version) if a else None,
                "decrypt": a.decrypt.to_dict() if a else None, "preview": a.preview.to_dict() if a else None,
                "seconds": {**self.seconds, **(a.seconds if a else {})}, "choice": dict(self.choice),
                "references": list(self.references), "others": [o.to_dict() for o in self.others],
                "not_rehearsed": list(self.not_rehearsed)}


def run_outcome(layers: list[LayerResult]) -> str:
    """failed when any layer failed, else drift when any drifted, else proven; skipped when none was rehearsed."""
    seen = {r.outcome for r in layers}
    for outcome in ("failed", "drift", "proven"):
        if outcome in seen:
            return outcome
    return "skipped"


# -- decryption ------------------------------------------------------------------------------------


def secrets_in(deployment: Any) -> tuple[int, set[str]]:
    """How many secret values a deployment holds (as stored, or exported with --show-secrets), and the plaintexts
    of an export (kept in memory only, to redact from what the rehearsal prints and stores)."""
    count, plain, todo, visited = 0, set(), [deployment], 0
    while todo and visited < MAX_WALK:
        value = todo.pop()
        visited += 1
        if isinstance(value, dict):
            if SECRET_SIG[0] in value:  # the signature key marks a secret, whatever its value
                count += 1
                text = value.get("plaintext")
                if isinstance(text, str) and text:
                    plain.add(text)
                    plain.add(text.strip('"'))
                continue
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return count, {p for p in plain if len(p) >= 6}


def kms_key_id(provider: Optional[str]) -> Optional[str]:
    """The key id, ARN or alias an `awskms://` provider names; None for any other provider."""
    if not provider or not provider.startswith("awskms://"):
        return None
    url = urlsplit(provider)
    key = unquote((url.netloc + url.path).strip("/"))
    return key or None


def kms_region(provider: Optional[str]) -> Optional[str]:
    if not provider or not provider.startswith("awskms://"):
        return None
    return (parse_qs(urlsplit(provider).query).get("region") or [None])[0]


_KMS_ERRORS = (("AccessDenied", "access-denied"), ("DisabledException", "key-disabled"),
               ("KMSInvalidStateException", "key-unusable"), ("NotFoundException", "key-not-found"),
               ("InvalidCiphertextException", "wrong-key"), ("IncorrectKeyException", "wrong-key"))
_KEY_STATES = {"Disabled": "key-disabled", "PendingDeletion": "key-pending-deletion",
               "PendingReplicaDeletion": "key-pending-deletion"}


def failure_kind(provider: Optional[str], error: str, key: Optional[KeyState]) -> str:
    """Why a decryption failed, from the engine's error text and what KMS says of the key. Pure."""
    low = error.lower()
    if provider in (None, PASSPHRASE):
        if "incorrect passphrase" in low:
            return "wrong-passphrase"
        if "passphrase" in low and ("must be set" in low or "neither" in low or "not set" in low):
            return "passphrase-missing"
        return "decrypt-failed"
    if key is not None and key.state in _KEY_STATES:
        return _KEY_STATES[key.state]
    if key is not None and key.state not in (None, "Enabled"):
        return "key-unusable"
    for code, kind in _KMS_ERRORS:
        if code.lower() in low:
            return kind
    return "decrypt-failed"


def _key_text(key: Optional[KeyState], fallback: Optional[str]) -> str:
    if key is None:
        return f"the KMS key {fallback}"
    named = key.arn or key.key_id
    return f"the KMS key {named}" + (f" ({key.key_id})" if key.arn and key.key_id not in key.arn else "")


def decrypt_failure(provider: Optional[str], error: str, key: Optional[KeyState] = None) -> Decrypt:
    """The failed decryption: the provider, the kind and one paragraph naming both and the engine's error."""
    kind = failure_kind(provider, error, key)
    what = {
        "wrong-passphrase": "the passphrase given (PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE) is "
                            "not the one this state's secrets were encrypted with",
        "passphrase-missing": "no passphrase was given: set PULUMI_CONFIG_PASSPHRASE or "
                              "PULUMI_CONFIG_PASSPHRASE_FILE to the state's passphrase",
        "access-denied": f"the credentials in use may not decrypt with {_key_text(key, kms_key_id(provider))} "
                         "(kms:Decrypt was denied)",
        "key-disabled": f"{_key_text(key, kms_key_id(provider))} is disabled",
        "key-pending-deletion": f"{_key_text(key, kms_key_id(provider))} is pending deletion"
                                + (f" (it is deleted on {key.deletion_date})" if key and key.deletion_date else ""),
        "key-not-found": f"{_key_text(key, kms_key_id(provider))} does not exist (or is not visible to these "
                         "credentials)",
        "key-unusable": f"{_key_text(key, kms_key_id(provider))} cannot be used"
                        + (f" (its state is {key.state})" if key and key.state else ""),
        "wrong-key": f"{_key_text(key, kms_key_id(provider))} is not the key the state's data key was "
                     "encrypted with",
    }.get(kind, "the engine could not decrypt them")
    name = "passphrase" if provider in (None, PASSPHRASE) else provider
    message = (f"The state's secrets cannot be decrypted with its own secrets provider ({name}): {what}. "
               f"Every version encrypted with it is unusable until this is fixed. The engine said: {error}")
    return Decrypt("failed", provider or PASSPHRASE, kind, message, 0, key)


# -- the preview -----------------------------------------------------------------------------------


def preview_from_row(row: dict) -> Preview:
    """A refresh preview judged as `drift` judges it (a `bootstrap.records.drift.drift_row` dict)."""
    changes = tuple(row.get("changes") or ())
    result = "no-change" if row.get("state") == "clean" and not changes else "drift"
    return Preview(result, row.get("summary") or "", dict(row.get("counts") or {}), changes[:MAX_CHANGES],
                   len(changes))


def preview_failure(message: str) -> Preview:
    return Preview("failed", "the preview failed", error=message)


def preview_not_run(message: str) -> Preview:
    """A preview this machine could not run (a provider plugin version the state records is not installed): it
    proved nothing either way, so the layer fails at its preview as when the preview failed, `message` saying
    what to install."""
    return Preview("not-attempted", "not run: a plugin the state records is missing", error=message)


def preview_reason(label: str, preview: Preview) -> str:
    if preview.result == "failed":
        return f"The preview of {label} failed: {preview.error}"
    return (f"The preview of {label} could not run here (a recovery of it here would stop at the same check "
            f"before its restore): {preview.error}")
