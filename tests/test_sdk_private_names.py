"""The Pulumi Python SDK's private names that groundctl's product code uses: every one is declared here with the
shape groundctl relies on and the SDK release that has it, the declared SDK floor is no lower than the newest of
those, and each shape is checked against the SDK installed here. A private name the product starts to use, or one
that an SDK release moves, renames or reshapes, fails a test instead of an update half-way.

The releases were read in pulumi/pulumi's history (sdk/python/lib/pulumi/automation at each tag): v3.205.0's
`_cleanup` takes four arguments and its `Stack` has no `_setup_event_log`; v3.206.0 added both (the gRPC event
stream, _stack.py:272-318 and :1639-1644 at that tag).
"""

from __future__ import annotations

import ast
import inspect
from importlib.metadata import version as installed_version
from pathlib import Path

from packaging.version import Version

from bootstrap.engine.versions import PULUMI_CLI_MIN, PULUMI_SDK_MIN
from tests.conftest import REPO

PRODUCT = ("groundctl", "bootstrap", "recovery", "stacks")

# name as the product uses it → (the oldest SDK release with the shape it relies on, that shape).
PRIVATE_SDK_NAMES = {
    "pulumi.automation._stack._cleanup": ("3.206.0", "five arguments, the fifth the gRPC event server"),
    "pulumi.automation._stack.StackInitMode": ("3.206.0", "SELECT, the mode of a selected stack"),
    "pulumi.automation._cmd._MINIMUM_VERSION": ("3.206.0", "the oldest CLI the SDK accepts"),
    "pulumi.automation._cmd._SKIP_VERSION_CHECK_VAR": ("3.206.0", "the variable that skips the CLI version check"),
    "pulumi.automation._cmd._parse_and_validate_pulumi_version": ("3.206.0", "min_version, current_version, opt_out"),
    "pulumi.automation._cmd.CommandResult": ("3.206.0", "CommandResult(stdout, stderr, code)"),
    "Stack._setup_event_log": ("3.206.0", "(command, on_event, pulumi_version) → 5-tuple ending in the gRPC server"),
    "Stack._run_pulumi_cmd_sync": ("3.206.0", "(args, on_output=None, on_error=None) → CommandResult"),
    "Stack._mode": ("3.206.0", "the StackInitMode attribute Stack.__init__ sets"),
}


def _sdk_private_attributes() -> set[str]:
    """Every private method or attribute name the installed SDK's automation package defines on a class."""
    import pulumi.automation

    names: set[str] = set()
    for path in Path(pulumi.automation.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                names.update(n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" \
                    and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.endswith("__")}


def _private_uses(tree: ast.AST, sdk_attributes: set[str]) -> set[str]:
    """The SDK's private names one module uses: imports from a private module or of a private name, and private
    attributes of the SDK's objects (read on anything but the module's own `self`, or on the `self` of a subclass
    of an SDK class)."""
    found: set[str] = set()
    from_sdk: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pulumi":
            for alias in node.names:
                from_sdk.add(alias.asname or alias.name)
                if any(part.startswith("_") for part in node.module.split(".")) or alias.name.startswith("_"):
                    found.add(f"{node.module}.{alias.name}")
    sdk_subclass_selves: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id in from_sdk for b in node.bases):
            sdk_subclass_selves.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in sdk_attributes:
            on_self = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not on_self or id(node) in sdk_subclass_selves:
                found.add(f"Stack.{node.attr}")
    return found


def test_every_private_sdk_name_the_product_uses_is_declared_with_its_release():
    # The declared ones too: an SDK that dropped one still has the product using it (the shape test says so).
    declared = {name.split(".", 1)[1] for name in PRIVATE_SDK_NAMES if name.startswith("Stack.")}
    sdk_attributes = _sdk_private_attributes() | declared
    used: dict[str, list[str]] = {}
    for top in PRODUCT:
        for path in sorted((REPO / top).rglob("*.py")):
            for name in _private_uses(ast.parse(path.read_text(encoding="utf-8")), sdk_attributes):
                used.setdefault(name, []).append(str(path.relative_to(REPO)))
    undeclared = {name: where for name, where in used.items() if name not in PRIVATE_SDK_NAMES}
    assert not undeclared, f"declare each private SDK name, its shape and release in PRIVATE_SDK_NAMES: {undeclared}"
    unused = set(PRIVATE_SDK_NAMES) - set(used)
    assert not unused, f"no longer used by the product; remove from PRIVATE_SDK_NAMES: {sorted(unused)}"


def test_the_declared_sdk_floor_has_every_private_name_the_product_uses():
    newest = max(Version(since) for since, _ in PRIVATE_SDK_NAMES.values())
    assert Version(PULUMI_SDK_MIN) >= newest, f"PULUMI_SDK_MIN {PULUMI_SDK_MIN} is below {newest}"


def test_the_installed_sdk_has_each_private_name_in_the_shape_the_product_uses():
    from pulumi.automation import Stack
    from pulumi.automation._cmd import (_MINIMUM_VERSION, _SKIP_VERSION_CHECK_VAR, CommandResult,
                                        _parse_and_validate_pulumi_version)
    from pulumi.automation._stack import StackInitMode, _cleanup

    assert Version(installed_version("pulumi")) >= Version(PULUMI_SDK_MIN)
    assert list(inspect.signature(_cleanup).parameters)[:5] == \
        ["temp_dir", "thread", "stop_event", "on_exit_fn", "grpc_server"]
    assert list(inspect.signature(Stack._setup_event_log).parameters) == \
        ["self", "command", "on_event", "pulumi_version"]
    assert list(inspect.signature(Stack._run_pulumi_cmd_sync).parameters)[:2] == ["self", "args"]
    assert "self._mode" in inspect.getsource(Stack.__init__) and StackInitMode.SELECT
    assert CommandResult("out", "err", 0).stdout == "out" and isinstance(_SKIP_VERSION_CHECK_VAR, str)
    assert _parse_and_validate_pulumi_version(min_version=_MINIMUM_VERSION, current_version="3.259.0",
                                              opt_out=False) is not None
    # The event plumbing as bootstrap/engine/sdk_objects.py runs it: five values out, the same five back in. Every
    # CLI groundctl accepts (PULUMI_CLI_MIN and later) streams the events over gRPC.
    log_file, thread, stop, temp_dir, server = Stack._setup_event_log(None, "up", lambda event: None, PULUMI_CLI_MIN)
    assert log_file.startswith("tcp://127.0.0.1:") and server is not None and thread is None
    _cleanup(temp_dir, thread, stop, None, server)
