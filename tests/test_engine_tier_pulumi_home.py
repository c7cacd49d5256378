"""Engine tier, issue 27 §3: with HOME pointed elsewhere and no PULUMI_HOME (`sudo -E`, some CI runners), the real
CLI keeps its plugins under the home the user database gives its uid, and the preflight looks in that same
folder, not in $HOME (tests/test_preflight.py holds groundctl's reading of Go's os/user; this asks Pulumi).

The account's ~/.pulumi is covered by a tmpfs in a private mount namespace, so the real one is neither read nor
written. Skipped, with the reason, without root, `unshare -m` or an account ~/.pulumi to cover.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, requires_pulumi

pytestmark = [pytest.mark.engine, requires_pulumi]

ACCOUNT_PULUMI = os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".pulumi")


def _no_namespace() -> str:
    if os.geteuid() != 0:
        return "needs root, to cover the account's ~/.pulumi with a tmpfs in a private mount namespace"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    if not os.path.isdir(ACCOUNT_PULUMI):
        return f"needs the account's {ACCOUNT_PULUMI} to exist, to cover it (it is never created here)"
    done = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True, timeout=60)
    return "" if done.returncode == 0 else f"unshare -m is refused here: {done.stderr.strip()}"


NO_NAMESPACE = _no_namespace()

# Inside the namespace: one plugin in the account's Pulumi home, another where $HOME points; then what the real
# CLI lists and what the preflight finds, each written to $OUT.
SCRIPT = r"""
set -eu
mount -t tmpfs -o size=16m,mode=0700 tmpfs "$ACCOUNT_PULUMI"
for place in "$ACCOUNT_PULUMI/plugins/resource-accounthome-v1.2.3" "$HOME/.pulumi/plugins/resource-envhome-v1.2.3"; do
    mkdir -p "$place"
    name="${place##*/resource-}"
    printf '#!/bin/sh\nexit 1\n' > "$place/pulumi-resource-${name%-v1.2.3}"
    chmod +x "$place/pulumi-resource-${name%-v1.2.3}"
done
pulumi plugin ls --json > "$OUT/pulumi.json"
"$PYTHON" -c '
import json, os
from bootstrap.engine.plugins import Plugin, is_installed, plugin_places
places = plugin_places(dict(os.environ), {"accounthome", "envhome"})
print(json.dumps({"plugin_dir": places.plugin_dir,
                  "found": sorted(n for n in ("accounthome", "envhome") if is_installed(Plugin(n, "1.2.3"), places))}))
' > "$OUT/groundctl.json"
"""


@pytest.mark.skipif(bool(NO_NAMESPACE), reason=NO_NAMESPACE)
def test_with_home_overridden_pulumi_and_the_preflight_look_in_the_accounts_home(tmp_path):
    elsewhere, out = tmp_path / "elsewhere", tmp_path / "out"
    elsewhere.mkdir()
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PULUMI_")}
    env.update({"HOME": str(elsewhere), "USER": pwd.getpwuid(os.getuid()).pw_name, "OUT": str(out),
                "ACCOUNT_PULUMI": ACCOUNT_PULUMI, "PYTHON": sys.executable, "PYTHONPATH": str(REPO),
                "PULUMI_SKIP_UPDATE_CHECK": "true"})
    done = subprocess.run(["unshare", "-m", "bash", "-c", SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    listed = {p["name"] for p in json.loads((out / "pulumi.json").read_text() or "[]")}
    assert listed == {"accounthome"}, listed  # Pulumi's home is the account's, whatever $HOME says
    seen = json.loads((out / "groundctl.json").read_text())
    assert seen == {"plugin_dir": os.path.join(ACCOUNT_PULUMI, "plugins"), "found": ["accounthome"]}, seen
