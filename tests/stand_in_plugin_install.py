"""The stand-in `pulumi plugin install resource NAME VERSION --file TARBALL [--reinstall]` of
tests/plugin_releases.py: the tarball unpacked as the real CLI does it (pkg/cmd/pulumi/plugin/plugin_install.go:
287-294, 345-357: an existing folder kept unless --reinstall; a `.partial` marker beside the folder while it is
filled). No download: the real CLI downloads nothing with --file either. Standalone: it runs in a child process
with none of groundctl on its path."""

import io
import os
import shutil
import sys
import tarfile
from pathlib import Path



def _plugin_install(argv: list[str], env: dict) -> int:
    """The stand-in's `pulumi plugin install resource NAME VERSION --file TARBALL [--reinstall]`."""
    args = argv[2:]
    if len(args) < 5 or args[0] != "resource" or "--file" not in args:
        print(f"stand-in pulumi: unsupported plugin install {' '.join(argv)}", file=sys.stderr)
        return 2
    name, version = args[1], args[2].removeprefix("v")
    source = Path(args[args.index("--file") + 1])
    home = Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi")
    target = home / "plugins" / f"resource-{name}-v{version}"
    if target.is_dir() and "--reinstall" not in args:
        return 0
    label = f"[resource plugin {name}-{version}]"
    try:
        body = source.read_bytes()
    except OSError as exc:
        print(f"error: stat on file {source}: {exc}", file=sys.stderr)
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
