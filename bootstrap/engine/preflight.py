"""Before anything is written: can the Pulumi engine run what the command will ask of it?

Two checks, each a pure decision over what a thin probe reads:
- the CLI on PATH, at `PULUMI_CLI_MIN` or later (an older CLI fails later with a raw "unknown flag");
- the resource plugins each layer's program needs, at the versions the installed SDKs ask for (each SDK
  package ships a `pulumi-plugin.json`; Pulumi's Python host reports those, sdk/python/cmd/
  pulumi-language-python/main.go GetRequiredPackages), found where Pulumi looks: on PATH as
  `pulumi-resource-<name>` unless PULUMI_IGNORE_AMBIENT_PLUGINS is "1"/"true", else in
  `$PULUMI_HOME/plugins/resource-<name>-v<version>/` with no `.partial` beside it, version equal
  (sdk/go/common/workspace/plugins.go getPluginInfoAndPath, SelectCompatiblePlugin, GetPluginsFromDir).
  A missing one otherwise costs five download retries and a raw error repeated in a table cell.
Which plugins a layer needs is read from its program's imports (and the local modules they import), so a
program that uses no SDK (a dynamic provider) needs none.
"""

from __future__ import annotations

import ast
import json
import os
import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence

from bootstrap.engine.errors import missing_cli_error
from bootstrap.engine.versions import PULUMI_CLI_MIN, PULUMI_CLI_PINNED
from bootstrap.errors import EngineError

VERSION_TIMEOUT = 30.0  # seconds `pulumi version` may take (a Go binary answers in well under one)
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
_CACHE_DIR = re.compile(r"^resource-(?P<name>[a-zA-Z0-9-][a-zA-Z0-9-_.]*[a-zA-Z0-9])-v(?P<version>.+)$")
MAX_MODULES = 200  # local modules followed from one program: a bound, not a limit any layer comes near


# -- the CLI version ---------------------------------------------------------------------------------


def parse_version(text: str) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) of 'v3.259.0' or '3.260.0-dev.0'; None when it is not a version. Pure."""
    m = _VERSION.match(text.strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def inert(text: str, limit: int = 120) -> str:
    """`text` from outside (a CLI's output, an environment value) safe to print: one line, bounded. Pure."""
    flat = "".join(ch if ch.isprintable() else "?" for ch in text.strip())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def cli_version_problem(reported: str, minimum: str = PULUMI_CLI_MIN,
                        pinned: str = PULUMI_CLI_PINNED) -> Optional[str]:
    """The one-paragraph problem with what `pulumi version` printed, or None when it will do. Pure."""
    found = parse_version(reported)
    install = (f"Install Pulumi CLI v{pinned} (the version groundctl is tested with) or any release from "
               f"v{minimum} on, check that `pulumi version` prints it in this shell, and run the command again; "
               "groundctl never downloads the CLI.")
    if found is None:
        return (f"The Pulumi CLI on PATH did not report a version groundctl can read (`pulumi version` printed "
                f"'{inert(reported)}'), so it cannot tell whether it is v{minimum} or later, which it needs. "
                f"Nothing was changed. {install}")
    if found < parse_version(minimum):
        return (f"The Pulumi CLI on PATH is v{'.'.join(map(str, found))}, but groundctl needs v{minimum} or later "
                f"(it sets secrets with `pulumi config set --raw`, which older releases reject as an unknown "
                f"flag). Nothing was changed. {install}")
    return None


_probed: dict[tuple, str] = {}


def _reported_version(path: str) -> str:
    """What `pulumi version` prints, asked once per binary per process (the check runs "once at start"
    however many engines a command builds)."""
    st = os.stat(path)
    key = (path, st.st_mtime_ns, st.st_size)
    if key not in _probed:
        env = {**os.environ, "PULUMI_SKIP_UPDATE_CHECK": "true"}
        try:
            done = subprocess.run([path, "version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT,
                                  env=env, check=False)
        except subprocess.TimeoutExpired:
            raise EngineError(f"The Pulumi CLI at {inert(path)} did not answer `pulumi version` within "
                              f"{VERSION_TIMEOUT:.0f} s, so groundctl cannot use it. Nothing was changed. Check "
                              "that `pulumi version` works in this shell, and run the command again.") from None
        except OSError as exc:
            raise missing_cli_error(inert(f"{path}: {exc.strerror or exc}")) from None
        if done.returncode != 0:
            raise EngineError(f"The Pulumi CLI at {inert(path)} failed to report its version (`pulumi version` "
                              f"exited {done.returncode}: {inert(done.stderr or done.stdout)}). Nothing was "
                              "changed. Check that `pulumi version` works in this shell, and run the command "
                              "again.")
        _probed[key] = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    return _probed[key]


def pulumi_available() -> bool:
    """Whether a `pulumi` binary is on PATH (the SDK runs `pulumi` and never installs one here)."""
    return shutil.which("pulumi") is not None


def require_pulumi() -> None:
    """Fail early, in one paragraph, when the CLI is missing (its version is checked when an engine is built)."""
    if not pulumi_available():
        raise missing_cli_error()


def require_cli() -> str:
    """The version of the `pulumi` on PATH; EngineError (exit 4) when it is missing or older than the floor."""
    path = shutil.which("pulumi")
    if path is None:
        raise missing_cli_error()
    reported = _reported_version(path)
    problem = cli_version_problem(reported)
    if problem:
        raise EngineError(problem)
    return reported


# -- the plugins a layer's program needs -------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Plugin:
    name: str
    version: str  # without the leading "v"
    sdk: str = ""  # the Python package that asks for it

    def tarball(self, system: str, machine: str) -> str:
        arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine.lower(),
                                                                                             machine.lower())
        return f"pulumi-resource-{self.name}-v{self.version}-{system.lower()}-{arch}.tar.gz"


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


def missing_plugins_message(missing: Mapping[Plugin, Sequence[str]], places: PluginPlaces,
                            system: str = platform.system(), machine: str = platform.machine()) -> str:
    """One paragraph: which plugin, which version, which layers, and the offline install command. Pure."""
    home = f"PULUMI_HOME={inert(places.pulumi_home)} " if places.pulumi_home else ""
    where = "PATH is not searched (PULUMI_IGNORE_AMBIENT_PLUGINS is set)" if places.ignore_ambient else "not on PATH"
    parts = []
    for plugin, layers in sorted(missing.items()):
        sdk = f" (the installed {plugin.sdk} SDK asks for it)" if plugin.sdk else ""
        parts.append(
            f"the {plugin.name} resource plugin v{plugin.version}{sdk}, needed by the {' and '.join(layers)} "
            f"layer{'s' if len(layers) > 1 else ''}: install it with `{home}pulumi plugin install resource "
            f"{plugin.name} v{plugin.version} --file {plugin.tarball(system, machine)}` (that release's tarball "
            f"for this platform)")
    names = ", ".join(f"pulumi-resource-{p.name}" for p in sorted(missing))
    return (f"A Pulumi provider plugin this run needs is not installed, so nothing was changed: "
            + "; ".join(parts)
            + f". groundctl looked where Pulumi does: {names} {where}, and no resource-<name>-v<version> folder "
            f"in {inert(places.plugin_dir)}. It never downloads plugins; install them as shown (or put the "
            "plugin binary on PATH), then run the command again.")


# -- the probe (the only I/O here) -------------------------------------------------------------------


def _truthy(value: Optional[str]) -> bool:
    # Pulumi's env.Bool: "1" or "true" in any case (sdk/go/common/util/env/env.go BoolValue.Value).
    return value is not None and (value == "1" or value.lower() == "true")


def plugin_places(env: Mapping[str, str], names: Iterable[str]) -> PluginPlaces:
    """Read where Pulumi would look for `names` under `env` (the environment the engine runs the CLI with)."""
    home = env.get("PULUMI_HOME") or str(Path.home() / ".pulumi")
    plugin_dir = Path(home) / "plugins"
    ignore = _truthy(env.get("PULUMI_IGNORE_AMBIENT_PLUGINS"))
    on_path: set[str] = set()
    cache: list[str] = []
    try:
        entries = list(plugin_dir.iterdir()) if plugin_dir.is_dir() else []
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
    return PluginPlaces(frozenset(on_path), tuple(sorted(cache)), str(plugin_dir), ignore,
                        env.get("PULUMI_HOME") or None)


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


def require_plugins(stacks_dir: Path, layers: Sequence[str], env: Mapping[str, str]) -> None:
    """EngineError (exit 4) naming every plugin the layers' programs need that Pulumi would not find."""
    needs: dict[Plugin, list[str]] = {}
    for layer in layers:
        for plugin in layer_plugins(stacks_dir, layer, env.get("PYTHONPATH", "")):
            needs.setdefault(plugin, []).append(layer)
    if not needs:
        return
    places = plugin_places(env, {p.name for p in needs})
    missing = {p: layers_ for p, layers_ in needs.items() if not is_installed(p, places)}
    if missing:
        raise EngineError(missing_plugins_message(missing, places))


def require_engine(engine: object, layers: Sequence[str], environ: Mapping[str, str] = os.environ) -> None:
    """The plugin check for an engine that runs Pulumi programs (one with a `stacks_dir`); under the
    environment it runs the CLI with (its settings' variables over the process's)."""
    stacks_dir = getattr(engine, "stacks_dir", None)
    if stacks_dir is None:
        return  # an engine that runs no Pulumi program needs no plugin
    settings_env = getattr(getattr(engine, "settings", None), "env", None) or {}
    require_plugins(Path(stacks_dir), layers, {**environ, **settings_env})
