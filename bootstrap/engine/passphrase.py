"""Where a passphrase-encrypted stack's passphrase comes from: PULUMI_CONFIG_PASSPHRASE (or the variable an
engine is told to read), else the file PULUMI_CONFIG_PASSPHRASE_FILE names, which Pulumi supports too."""

from __future__ import annotations

import os
from typing import Callable, Mapping

from bootstrap.kit.errors import BadInput
from bootstrap.kit.user_files import read_user_file

PULUMI_PASSPHRASE_VAR = "PULUMI_CONFIG_PASSPHRASE"
PULUMI_PASSPHRASE_FILE_VAR = "PULUMI_CONFIG_PASSPHRASE_FILE"
PASSPHRASE_FILE_MAX = 64 * 1024


def _read_passphrase_file(path: str) -> str:
    # A FIFO, a device or a hung mount is exit 2 naming the file, never a wait (bootstrap.kit.user_files).
    data = read_user_file(path, what=f"The passphrase file ({PULUMI_PASSPHRASE_FILE_VAR})",
                          max_bytes=PASSPHRASE_FILE_MAX,
                          fix=f"Point {PULUMI_PASSPHRASE_FILE_VAR} at a regular file holding the passphrase, and run "
                              "the command again")
    return data.decode("utf-8")


def passphrase_from(environ: Mapping[str, str], passphrase_env: str = PULUMI_PASSPHRASE_VAR, *,
                    read: Callable[[str], str] = _read_passphrase_file) -> tuple[str | None, dict[str, str]]:
    """The passphrase (for scrubbing) and the variables that hand it to Pulumi, from `passphrase_env` or else
    PULUMI_CONFIG_PASSPHRASE_FILE, read as Pulumi reads it: whitespace trimmed
    (pkg/secrets/passphrase/manager.go readPassphrase). (None, {}) when neither is set."""
    passphrase = environ.get(passphrase_env)
    if passphrase:
        return passphrase, {PULUMI_PASSPHRASE_VAR: passphrase}
    path = environ.get(PULUMI_PASSPHRASE_FILE_VAR, "")
    if not path:
        return None, {}
    if PULUMI_PASSPHRASE_VAR in environ:
        # Pulumi takes a set variable, even an empty one, over the file.
        raise BadInput(f"{PULUMI_PASSPHRASE_VAR} is set but empty, and Pulumi would use that empty passphrase "
                       f"instead of the one in {PULUMI_PASSPHRASE_FILE_VAR}. Unset it (`unset "
                       f"{PULUMI_PASSPHRASE_VAR}`) and run the command again.")
    # Pulumi runs in another folder than groundctl's: hand it an absolute path.
    path = os.path.abspath(path)
    try:
        passphrase = read(path).strip()
    except (OSError, ValueError) as exc:
        raise BadInput(f"{PULUMI_PASSPHRASE_FILE_VAR} names {path!r}, which cannot be read as a passphrase "
                       f"({type(exc).__name__}: {exc}). Point it at a readable file holding the passphrase, "
                       "and run the command again.") from None
    if not passphrase:
        raise BadInput(f"{PULUMI_PASSPHRASE_FILE_VAR} names {path!r}, which is empty. Put the passphrase in "
                       "it (keep the same value for every later run) and run the command again.")
    return passphrase, {PULUMI_PASSPHRASE_FILE_VAR: path}
