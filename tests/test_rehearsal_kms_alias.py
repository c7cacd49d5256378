"""Issue 37 §1: a decryption that fails after the state's KMS alias was moved names the key that failed.

The state records its provider's alias only (`awskms://alias/…`), never a key, and a decryption uses the key the
ciphertext names, whatever the alias points to now. DescribeKey of the alias answers for the alias's current key:
the rehearsal named that one ("…key/NEW (alias/…) is disabled") when KMS's error named another. It now names
the key from KMS's own error, with the alias's current key beside it, or, when the error names none, says plainly
that it is the alias's current key. The emulator's KMS in front of the real CLI: the engine tier
(tests/test_engine_tier_rehearsal.py)."""

from __future__ import annotations

from recovery.evidence.rehearsal_judge import KeyState, decrypt_failure, keys_named
from recovery.rehearsal.run import Services, _failed_key

PROVIDER = "awskms://alias/groundctl-dev?region=eu-west-1"
OLD = "arn:aws:kms:eu-west-1:123456789012:key/0f5c2e1a-1111-4b7e-9d0a-000000000001"
NEW = "arn:aws:kms:eu-west-1:123456789012:key/0f5c2e1a-2222-4b7e-9d0a-000000000002"
KEYS = {"alias/groundctl-dev": (NEW, "Enabled"), NEW: (NEW, "Enabled"), OLD: (OLD, "Disabled")}
DISABLED = ("operation error KMS: Decrypt, https response error StatusCode: 400, RequestID: r-1, "
            f"DisabledException: {OLD} is disabled.")
UNNAMED = ("operation error KMS: Decrypt, https response error StatusCode: 400, RequestID: r-2, AccessDeniedException: "
           "The ciphertext refers to a customer master key that does not exist, does not exist in this region, or "
           "you are not allowed to access.")


def _svc(asked: list) -> Services:
    def describe(key_id, region):
        asked.append(key_id)
        arn, state = KEYS[key_id]
        return KeyState(key_id, arn, state)
    return Services(store=None, scratch=None, engine_for=None, describe_key=describe)


def test_the_key_kms_error_names_is_the_one_that_failed_not_the_aliass_new_one():
    asked: list = []
    key, alias_key = _failed_key(PROVIDER, DISABLED, _svc(asked))
    assert asked == ["alias/groundctl-dev", OLD]
    assert (key.arn, key.state, key.source) == (OLD, "Disabled", "kms-error")
    assert (alias_key.arn, alias_key.source) == (NEW, "alias-now")
    d = decrypt_failure(PROVIDER, DISABLED, key, alias_key)
    assert d.kind == "key-disabled" and f"the KMS key {OLD} is disabled" in d.message
    assert f"which now points to {NEW}: the alias was moved" in d.message
    assert f"{NEW} (alias/groundctl-dev) is disabled" not in d.message  # what it said before
    assert d.to_dict()["alias_key"]["arn"] == NEW and d.to_dict()["key"]["source"] == "kms-error"


def test_an_error_naming_no_key_is_said_plainly_to_be_about_the_aliass_current_key():
    key, alias_key = _failed_key(PROVIDER, UNNAMED, _svc([]))
    assert (key.arn, key.source, alias_key) == (NEW, "alias-now", None)
    d = decrypt_failure(PROVIDER, UNNAMED, key)
    assert d.kind == "access-denied"
    assert f"the KMS key alias/groundctl-dev points to now ({NEW})" in d.message
    assert "KMS's error names no key" in d.message and "the key that failed is the one it pointed to then" \
        in d.message


def test_an_error_naming_the_aliass_current_key_needs_no_caveat_and_a_key_named_by_the_provider_neither():
    current = f"DisabledException: {NEW} is disabled."
    key, alias_key = _failed_key(PROVIDER, current, _svc([]))
    assert (key.arn, key.source, alias_key) == (NEW, "kms-error", None)
    assert f"the KMS key {NEW} (alias/groundctl-dev) is disabled. Every version" in decrypt_failure(
        PROVIDER, current, key).message
    key, alias_key = _failed_key(f"awskms://{OLD}?region=eu-west-1", DISABLED, _svc([]))
    assert (key.arn, key.source, alias_key) == (OLD, "provider", None)
    assert keys_named(f"{OLD} and {OLD}; {NEW}") == [OLD, NEW] and keys_named("no key here") == []
