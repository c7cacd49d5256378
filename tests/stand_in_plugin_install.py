"""The stand-in `pulumi plugin install resource NAME VERSION [--exact] [--checksum HEX] [--reinstall]` of
tests/plugin_releases.py: the download answered from the folder GROUNDCTL_TEST_PLUGIN_DOWNLOADS names, checked and
unpacked as the real CLI does it (a `.partial` marker beside the folder while it is filled). Standalone: it runs
in a child process with none of groundctl on its path."""

import hashlib
import io
import os
import shutil
import sys
import tarfile
from pathlib import Path

DOWNLOADS_VAR = "GROUNDCTL_TEST_PLUGIN_DOWNLOADS"


def _plugin_install(argv: list[str], env: dict) -> int:
    """The stand-in's `pulumi plugin install resource NAME VERSION [--exact] [--checksum HEX]`."""
    args = argv[2:]
    if len(args) < 3 or args[0] != "resource":
        print(f"stand-in pulumi: unsupported plugin install {' '.join(argv)}", file=sys.stderr)
        return 2
    name, version = args[1], args[2].removeprefix("v")
    checksum = args[args.index("--checksum") + 1] if "--checksum" in args else ""
    home = Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi")
    target = home / "plugins" / f"resource-{name}-v{version}"
    if target.is_dir() and "--reinstall" not in args:
        return 0
    source = Path(env[DOWNLOADS_VAR]) / f"pulumi-resource-{name}-v{version}-linux-amd64.tar.gz"
    label = f"[resource plugin {name}-{version}]"
    try:
        body = source.read_bytes()
    except OSError as exc:
        print(f"error: {label} downloading: {exc}", file=sys.stderr)
        return 1
    actual = hashlib.sha256(body).hexdigest()
    if checksum and checksum != actual:
        print(f"error: {label} downloading: invalid checksum, expected {checksum}, actual {actual}", file=sys.stderr)
        return 1
    partial = Path(f"{target}.partial")
    target.mkdir(parents=True, exist_ok=True)
    partial.write_text("")
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            tar.extractall(target, filter="data")
    except (OSError, tarfile.TarError) as exc:
        shutil.rmtree(target, ignore_errors=True)
        print(f"error: {label} installing: {exc}", file=sys.stderr)
        return 1
    finally:
        os.remove(partial)
    return 0


if __name__ == "__main__":
    sys.exit(_plugin_install(sys.argv[1:], dict(os.environ)))
