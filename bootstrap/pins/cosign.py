"""Flux's checksums file, verified with cosign as the README shows: keyless, the certificate issued to a
fluxcd GitHub workflow by GitHub's OIDC issuer. cosign is the publisher's tool; groundctl runs it, never
reimplements it, and stops when it is not installed (exit 4) unless told to record the file unverified."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from bootstrap.pins.artifacts import Want
from bootstrap.pins.update import UpdateProblem

IDENTITY = "^https://github.com/fluxcd/.*"
ISSUER = "https://token.actions.githubusercontent.com"
TIMEOUT_SECONDS = 120.0


class CosignMissing(UpdateProblem):
    pass


def verifier(path: Optional[str] = None):
    """A `verify_flux` for update_pins running the cosign found on PATH; CosignMissing when there is none."""
    cosign = shutil.which("cosign", path=path)
    if cosign is None:
        raise CosignMissing(
            "Flux signs its checksums file with cosign, and cosign is not on PATH, so the Flux pins cannot be "
            "verified. Install cosign (https://docs.sigstore.dev/cosign/system_config/installation/) and run "
            "again, or pass --no-verify-signatures to record Flux's digest read over TLS only (the lock says so).")

    def verify(want: Want, checksums: bytes, sig: bytes, pem: bytes) -> str:
        with tempfile.TemporaryDirectory(prefix="groundctl-cosign-") as folder:
            files = {n: Path(folder) / n for n in ("checksums.txt", "checksums.txt.sig", "checksums.txt.pem")}
            for (name, path), data in zip(files.items(), (checksums, sig, pem)):
                path.write_bytes(data)
            argv = [cosign, "verify-blob", "--certificate", str(files["checksums.txt.pem"]), "--signature",
                    str(files["checksums.txt.sig"]), f"--certificate-identity-regexp={IDENTITY}",
                    f"--certificate-oidc-issuer={ISSUER}", str(files["checksums.txt"])]
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_SECONDS)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise UpdateProblem(f"cosign could not verify {want.checksums_file}: {exc}") from None
        if done.returncode != 0:
            raise UpdateProblem(f"cosign refused the signature of {want.checksums_file} (exit {done.returncode}: "
                                f"{done.stderr.strip()[-300:]}): it is not the file Flux signed. Nothing was "
                                "written.")
        return f"cosign verify-blob: identity {IDENTITY}, issuer {ISSUER}"
    return verify
