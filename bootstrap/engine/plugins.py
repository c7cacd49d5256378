"""Which resource plugins a command runs, and whether Pulumi would find them: pure decisions over what a thin
probe reads.

- A layer's program needs the plugins of the SDK packages it imports (following its local modules), at the
  versions the installed SDKs ask for: each ships a `pulumi-plugin.json`, which Pulumi's Python host reports
  (sdk/python/cmd/pulumi-language-python/main.go GetRequiredPackages). A program with no SDK needs none.
- A stack's state binds each provider to the version it was created with: refresh and destroy run those
  (pkg/engine/plugins.go:372 gatherPackagesFromSnapshot; refresh.go:105-124, destroy.go:135-155), so after an
  SDK upgrade they need the old version until an `up` moves the providers to the new one.
- Pulumi finds a plugin on PATH as `pulumi-resource-<name>` unless PULUMI_IGNORE_AMBIENT_PLUGINS is "1"/"true",
  else in `<home>/plugins/resource-<name>-v<version>/` with no `.partial` beside it, version equal
  (sdk/go/common/workspace/plugins.go getPluginInfoAndPath, SelectCompatiblePlugin, GetPluginsFromDir). Its home
  is PULUMI_HOME, else `.pulumi` in the home the user database gives the process's uid, not $HOME
  (sdk/go/common/util/pulumihome/pulumihome.go:31-48, built with `osusergo`, .goreleaser.yml:23-26: Go's own
  reader of /etc/passwd, which falls back to $HOME, with $USER set, only for a uid it does not list).
A missing plugin otherwise costs five download retries and a raw error repeated in a table cell.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence

from bootstrap.engine import versions
from bootstrap.kit.errors import EngineError
from bootstrap.pins.artifacts import Want, plugin_name
from bootstrap.pins.install import install_command as pins_install_command
from bootstrap.pins.install import lock_here
from bootstrap.pins.lockfile import LOCK_FILE, Entry, find
from bootstrap.kit.untrusted import clip, one_line

_CACHE_DIR = re.compile(r"^resource-(?P<name>[a-zA-Z0-9-][a-zA-Z0-9-_.]*[a-zA-Z0-9])-v(?P<version>.+)$")
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
MAX_MODULES = 200  # local modules followed from one program: a bound, not a limit any layer comes near
MAX_PASSWD_BYTES = 4 * 1024 * 1024
MAX_PATH = 4096  # Linux's PATH_MAX
PROGRAM, STATE = "program", "state"
# What each command runs: its layers' programs (preview, up), the providers its states record (refresh,
# destroy), or both (drift previews with a refresh; recover refreshes, imports and previews). Not checked: an
# up that deletes a resource the program no longer declares runs the provider the state binds it to, which
# after an SDK upgrade is the old one; an up's other steps run the SDK's (the default provider moves to it).
OPERATION_NEEDS = {"plan": {PROGRAM}, "preview": {PROGRAM}, "up": {PROGRAM}, "refresh": {STATE},
                   "destroy": {STATE}, "drift": {PROGRAM, STATE}, "recover": {PROGRAM, STATE}}
_BUILTIN = {"pulumi"}  # `pulumi:providers:pulumi` is built into the engine: no plugin


@dataclass(frozen=True, order=True)
class Plugin:
    name: str
    version: str  # without the leading "v"
    sdk: str = ""  # the Python package that asks for it; "" for one a stack's state records


# -- what a program needs ---------------------------------------------------------------------------


def imported_modules(source: str) -> set[tuple[str, bool]]:
    """(module, certain) for every absolute import in a Python source: `import a.b` and `from a.b import c`
    name a.b for certain; a.b.c only maybe (c may be a name in a.b rather than a module). Pure."""
    found: set[tuple[str, bool]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update((alias.name, True) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add((node.module, True))
            found.update((f"{node.module}.{alias.name}", False) for alias in node.names if alias.name != "*")
    return found


def program_imports(entry: str, local_sources: Callable[[str], Optional[str]]) -> set[str]:
    """The top-level packages a program imports, following the local modules it imports (stacks.common…).

    `local_sources(module)` gives a module's source when it is one of the program's own files, else None.
    Pure over what it is given."""
    seen: set[str] = set()
    tops: set[str] = set()
    pending = sorted(imported_modules(entry))
    while pending and len(seen) < MAX_MODULES:
        module, certain = pending.pop()
        if module in seen:
            continue
        seen.add(module)
        source = local_sources(module)
        if source is not None:
            pending.extend(sorted(m for m in imported_modules(source) if m[0] not in seen))
        elif certain and local_sources(module.split(".")[0]) is None:
            tops.add(module.split(".")[0])
    return tops


def needed_plugins(imports: Iterable[str], sdk_plugins: Mapping[str, Plugin]) -> list[Plugin]:
    """The resource plugins a program needs: those of the SDK packages it imports. Pure."""
    return sorted({sdk_plugins[name] for name in imports if name in sdk_plugins})


def sdk_plugin(package: str) -> Optional[Plugin]:
    """The resource plugin an installed SDK package asks for (its pulumi-plugin.json), or None."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "pulumi-plugin.json"
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("resource") and isinstance(data.get("name"), str) \
                and isinstance(data.get("version"), str):
            return Plugin(data["name"], data["version"].removeprefix("v"), package)
    return None


def _local_sources(roots: Sequence[Path]) -> Callable[[str], Optional[str]]:
    def source(module: str) -> Optional[str]:
        rel = Path(*module.split("."))
        for root in roots:
            for path in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
                if path.is_file():
                    try:
                        return path.read_text()
                    except (OSError, UnicodeDecodeError):
                        return None
        return None
    return source


def layer_plugins(stacks_dir: Path, layer: str, pythonpath: str = "") -> list[Plugin]:
    """The plugins `stacks_dir/<layer>/__main__.py` needs, following its local imports."""
    program = stacks_dir / layer / "__main__.py"
    try:
        entry = program.read_text()
    except OSError:
        return []  # no program: the engine reports that itself, with the layer's folder
    roots = [program.parent] + [Path(p) for p in pythonpath.split(os.pathsep) if p]
    try:
        imports = program_imports(entry, _local_sources(roots))
    except SyntaxError:
        return []  # the engine reports the program's own error, with its line
    sdks = {name: plugin for name in sorted(imports) if name.startswith("pulumi_")
            for plugin in [sdk_plugin(name)] if plugin is not None}
    return needed_plugins(imports, sdks)


# -- what a state records ---------------------------------------------------------------------------


def state_plugins(deployment: Mapping) -> list[Plugin]:
    """The plugins a stack's state binds its providers to: each `pulumi:providers:<package>` resource's
    `version` input, as Pulumi reads them (pkg/resource/deploy/providers GetProviderVersion). A provider with no
    recorded version takes whichever is installed, so it asks for none here. Pure over untrusted data."""
    found: set[Plugin] = set()
    resources = deployment.get("resources") if isinstance(deployment, Mapping) else None
    for res in resources if isinstance(resources, list) else []:
        kind = res.get("type") if isinstance(res, Mapping) else None
        inputs = res.get("inputs") if isinstance(res, Mapping) else None
        if not (isinstance(kind, str) and kind.startswith("pulumi:providers:") and isinstance(inputs, Mapping)):
            continue
        name, version = kind.removeprefix("pulumi:providers:"), inputs.get("version")
        if name not in _BUILTIN and isinstance(version, str) and _VERSION.fullmatch(version.removeprefix("v")):
            found.add(Plugin(name, version.removeprefix("v")))
    return sorted(found)[:50]


# -- where Pulumi finds them ------------------------------------------------------------------------


def account_home(passwd: str, uid: int) -> Optional[str]:
    """The home directory /etc/passwd gives `uid`, read as Go's pure os/user reads it, or None. Pure."""
    for line in passwd.splitlines():
        fields = line.strip().split(":")
        if len(fields) >= 7 and not line.startswith("#") and fields[2] == str(uid):
            return fields[5] or None
    return None


def pulumi_home(env: Mapping[str, str], account: Optional[str]) -> Optional[str]:
    """Where Pulumi keeps its plugins' folder: PULUMI_HOME, else `.pulumi` in the account's home, else in $HOME
    when $USER is set too (Go's fallback for a uid /etc/passwd lacks); None when Pulumi finds none. Pure."""
    if env.get("PULUMI_HOME"):
        return env["PULUMI_HOME"]
    if account:
        return str(Path(account) / ".pulumi")
    if env.get("HOME") and env.get("USER"):
        return str(Path(env["HOME"]) / ".pulumi")
    return None


@dataclass(frozen=True)
class PluginPlaces:
    """Where Pulumi would find plugins: what the probe saw, as plain data."""

    on_path: frozenset[str]        # names with a pulumi-resource-<name> on PATH (empty when ambient is ignored)
    cache: tuple[str, ...]         # directory names in the plugin folder holding their executable, not partial
    plugin_dir: str
    ignore_ambient: bool = False
    pulumi_home: Optional[str] = None  # PULUMI_HOME when the engine sets it


def _same_version(a: str, b: str) -> bool:
    # Semver equality ignores build metadata.
    return a.split("+", 1)[0] == b.split("+", 1)[0]


def is_installed(plugin: Plugin, places: PluginPlaces) -> bool:
    """Pulumi's order: an ambient binary of any version, then the cache at that exact version. Pure."""
    if plugin.name in places.on_path:
        return True
    for entry in places.cache:
        m = _CACHE_DIR.match(entry)
        if m and m["name"] == plugin.name and _same_version(m["version"], plugin.version):
            return True
    return False


def _truthy(value: Optional[str]) -> bool:
    # Pulumi's env.Bool: "1" or "true" in any case (sdk/go/common/util/env/env.go BoolValue.Value).
    return value is not None and (value == "1" or value.lower() == "true")


def _account_home() -> Optional[str]:
    try:
        with open("/etc/passwd", encoding="utf-8", errors="replace") as f:
            return account_home(f.read(MAX_PASSWD_BYTES), os.getuid())
    except (OSError, AttributeError):  # no /etc/passwd, or no getuid (not a Unix)
        return None


def plugin_places(env: Mapping[str, str], names: Iterable[str],
                  account: Callable[[], Optional[str]] = _account_home) -> PluginPlaces:
    """Read where Pulumi would look for `names` under `env` (the environment the engine runs the CLI with)."""
    home = pulumi_home(env, None if env.get("PULUMI_HOME") else account())
    plugin_dir = Path(home) / "plugins" if home else None
    ignore = _truthy(env.get("PULUMI_IGNORE_AMBIENT_PLUGINS"))
    on_path: set[str] = set()
    cache: list[str] = []
    try:
        entries = list(plugin_dir.iterdir()) if plugin_dir and plugin_dir.is_dir() else []
    except OSError:
        entries = []
    for entry in entries[:10_000]:
        m = _CACHE_DIR.match(entry.name)
        if m and entry.is_dir() and not Path(f"{entry}.partial").exists() \
                and (entry / f"pulumi-resource-{m['name']}").is_file():
            cache.append(entry.name)
    if not ignore:
        path = env.get("PATH", os.defpath)
        on_path = {name for name in names if shutil.which(f"pulumi-resource-{name}", path=path)}
    return PluginPlaces(frozenset(on_path), tuple(sorted(cache)),
                        str(plugin_dir) if plugin_dir else "(none: set PULUMI_HOME)", ignore,
                        env.get("PULUMI_HOME") or None)


# -- the message ------------------------------------------------------------------------------------


def shell_word(value: str) -> str:
    """`value` as one bash word that stands for exactly its bytes (`os.fsencode`: a path from the environment
    keeps a byte that is not UTF-8 as a surrogate) and prints as plain text. shlex's quoting when every character
    is printable; otherwise bash's $'…', with each control character, format character (a bidi override) and
    byte that is not UTF-8 written as \\xHH, so the pasted command names the very folder. Pure."""
    if value.isprintable():
        return shlex.quote(value)
    out = []
    for char in value:
        if "\udc80" <= char <= "\udcff":  # a byte that is not UTF-8, as os.fsdecode keeps it
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif char in "'\\":
            out.append("\\" + char)
        elif char.isprintable():
            out.append(char)
        else:
            out.extend(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
    return "$'" + "".join(out) + "'"


def install_command(plugin: Plugin, platform: str, home: Optional[str] = None,
                    lock: Sequence[Entry] = ()) -> str:
    """The command that installs `plugin` with its download checked against the digest the repository's pins lock
    records (bootstrap.pins.install: the tarball's sha256, then `pulumi plugin install --file`); when the lock
    does not record it, the commands that record it first. Pure."""
    want = Want(plugin_name(plugin.name), plugin.version, platform)
    entry = find(lock, want)
    # The whole path, quoted for the shell: a command cut short or split at a space would install elsewhere.
    home_word = shell_word(clip(home, MAX_PATH)) if home else None
    if entry is not None:
        return f"`{pins_install_command(entry, home_word)}`"
    prefix = f"PULUMI_HOME={home_word} " if home_word else ""
    sdk = next((r for r in versions.PROVIDER_PLUGINS if r.name == plugin.name), None)
    # A version no installed SDK asks for (one a stack's state records) is recorded by name.
    extra = "" if plugin.sdk or (sdk and sdk.version == plugin.version) else f" --plugin {plugin.name}@{plugin.version}"
    return (f"`groundctl pins update{extra}` in the repository (the pins lock {LOCK_FILE} does not record "
            f"{want.file}; review and commit it), then `{prefix}groundctl pins install --plugins` there")


def _why(plugin: Plugin, needs: Sequence[tuple[str, str]], pinned: Optional[versions.Release]) -> str:
    # In the order the command takes the layers.
    program = list(dict.fromkeys(layer for layer, why in needs if why == PROGRAM))
    state = list(dict.fromkeys(layer for layer, why in needs if why == STATE))
    parts = []
    if program:
        sdk = f"the installed {plugin.sdk} SDK asks for it" if plugin.sdk else "the program asks for it"
        if pinned and pinned.version != plugin.version:
            sdk += f", not the v{pinned.version} groundctl pins (reinstall groundctl to get its pinned SDKs)"
        parts.append(f"{sdk}: preview and up of the {' and '.join(program)} layer{'s' if len(program) > 1 else ''} "
                     "run it")
    if state:
        parts.append(f"the state of the {' and '.join(state)} layer{'s' if len(state) > 1 else ''} records it for "
                     "its provider: refresh and destroy run that version, and so does a drift check, which "
                     "refreshes, until an up moves the provider to the SDK's")
    return "; ".join(parts)


def missing_plugins_message(missing: Mapping[Plugin, Sequence[tuple[str, str]]], places: PluginPlaces,
                            platform: str, table: Sequence[versions.Release] = (),
                            lock: Optional[Sequence[Entry]] = None) -> str:
    """One paragraph: each plugin and version, which layers need it and why, and its checked install. Pure."""
    parts = []
    lock = lock_here() if lock is None else lock
    for plugin, needs in sorted(missing.items()):
        pinned = next((r for r in table if r.name == plugin.name), None)
        parts.append(f"the {plugin.name} resource plugin v{plugin.version} ({_why(plugin, needs, pinned)}): install "
                     f"it with {install_command(plugin, platform, places.pulumi_home, lock)}")
    where = "PATH is not searched (PULUMI_IGNORE_AMBIENT_PLUGINS is set)" if places.ignore_ambient else "not on PATH"
    names = ", ".join(sorted({f"pulumi-resource-{p.name}" for p in missing}))
    return ("A Pulumi provider plugin this run needs is not installed, so nothing was changed: "
            + "; ".join(parts)
            + f". groundctl looked where Pulumi does: {names} {where}, and no resource-<name>-v<version> folder "
            f"in {one_line(places.plugin_dir)}. It never downloads plugins; install them as shown (or put the "
            "plugin binary on PATH), then run the command again.")


def require_plugins(needs: Mapping[Plugin, Sequence[tuple[str, str]]], env: Mapping[str, str], platform: str) -> None:
    """EngineError (exit 4) naming every needed plugin Pulumi would not find under `env`."""
    if not needs:
        return
    found = plugin_places(env, {p.name for p in needs})
    missing = {p: why for p, why in needs.items() if not is_installed(p, found)}
    if missing:
        raise EngineError(missing_plugins_message(missing, found, platform, versions.PROVIDER_PLUGINS))


def command_needs(operation: Optional[str], program: Mapping[str, Sequence[Plugin]],
                  state: Mapping[str, Sequence[Plugin]]) -> dict[Plugin, list[tuple[str, str]]]:
    """Plugin → [(layer, PROGRAM or STATE)] for what `operation` runs (an unknown one: both). Pure."""
    runs = OPERATION_NEEDS.get(operation or "", {PROGRAM, STATE})
    needs: dict[Plugin, list[tuple[str, str]]] = {}
    for why, by_layer in ((PROGRAM, program), (STATE, state)):
        if why not in runs:
            continue
        for layer, plugins in by_layer.items():
            for plugin in plugins:
                # One entry per name and version, whichever source named it first.
                key = next((p for p in needs if (p.name, p.version) == (plugin.name, plugin.version)), plugin)
                needs.setdefault(key, []).append((layer, why))
    return needs
