"""One reader for every file a user names: `bootstrap.kit.user_files.read_user_file` (a regular file, within its
size limit, read within 10 s; a FIFO, a device or a hung mount is an error naming the file, never a wait).

This test reads the product's code (groundctl/, bootstrap/, recovery/, stacks/) and finds every call that opens or
reads a file by path: open(), os.open(), Path.open(), read_text(), read_bytes(), os.fdopen(). Each must be in
ALLOWED, saying why that file is not one a user names. A new way of opening a file fails here until it goes through
the reader or is added with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PRODUCT = ("groundctl", "bootstrap", "recovery", "stacks")
OPENERS = {"open", "read_text", "read_bytes", "fdopen"}

# (file, enclosing function, the call as written) → why it is not a user-named file read another way.
ALLOWED = {
    ("bootstrap/pins/dockerfile.py", "template", "...read_text"):
        "the Dockerfile template groundctl's own package ships (importlib.resources): no file a user names",
    ("bootstrap/pins/install.py", "install_cli", "tarfile.open"):
        "the CLI's tarball, held in a temporary file after its sha256 was checked against the lock",
    ("bootstrap/kit/user_files.py", "_read", "os.open"): "the reader itself: stat, then a non-blocking open",
    ("bootstrap/kit/user_files.py", "_read", "os.fdopen"): "the reader itself, on the descriptor it opened",
    ("bootstrap/engine/children.py", "_stat", "open"):
        "the kernel's /proc/<pid>/stat of a process under a Pulumi child, to end it: no file a user names",
    ("bootstrap/engine/automation.py", "_read_event_log", "open"):
        "the event log Pulumi writes into a private folder groundctl made for this update (mkdtemp)",
    ("bootstrap/engine/automation.py", "PulumiEngine.saved_plan", "open"):
        "the saved plan Pulumi wrote into a private folder groundctl made for this layer (mkdtemp)",
    ("bootstrap/engine/automation.py", "PulumiEngine.use_reviewed_plan", "os.open"):
        "writes a new private file (O_CREAT|O_EXCL, 0600) in a folder groundctl made; the text came through the reader",
    ("bootstrap/engine/automation.py", "PulumiEngine.use_reviewed_plan", "os.fdopen"): "the descriptor above",
    ("bootstrap/engine/automation.py", "PulumiEngine._with_private_file.write_and_run", "os.open"):
        "writes a new private file (O_CREAT|O_EXCL, 0600) in a folder groundctl made",
    ("bootstrap/engine/automation.py", "PulumiEngine._with_private_file.write_and_run", "os.fdopen"):
        "the descriptor above",
    ("bootstrap/engine/plugins.py", "sdk_plugin", "path.read_text"):
        "pulumi-plugin.json inside an installed SDK package (site-packages), not a path a user gives",
    ("bootstrap/engine/plugins.py", "_local_sources.source", "path.read_text"):
        "a module of a layer program in the stacks folder groundctl ships, as Python's import would read it",
    ("bootstrap/engine/plugins.py", "layer_plugins", "program.read_text"):
        "a layer program's __main__.py in the stacks folder groundctl ships",
    ("bootstrap/engine/plugins.py", "_account_home", "open"):
        "/etc/passwd, the system's user database, as Pulumi's own reader of it does (bounded by MAX_PASSWD_BYTES)",
    ("bootstrap/engine/rundir.py", "RunDir.layer_dir", "source.read_text"):
        "a layer program's Pulumi.yaml in the stacks folder groundctl ships",
    ("bootstrap/engine/rundir.py", "write_secrets_provider", "os.open"):
        "writes a new file (O_CREAT|O_EXCL, 0600) in the private run folder groundctl made",
    ("bootstrap/engine/rundir.py", "write_secrets_provider", "os.fdopen"): "the descriptor above",
    ("bootstrap/engine/rundir.py", "write_plain_config", "settings_file.read_text"):
        "the stack settings file groundctl wrote in its own private run folder",
    ("bootstrap/engine/rundir.py", "write_plain_config", "os.open"):
        "writes the private run folder's settings file (0600) before it is renamed into place",
    ("bootstrap/engine/rundir.py", "write_plain_config", "os.fdopen"): "the descriptor above",
    ("bootstrap/ci/workflows.py", "_template", "...read_text"): "a workflow template inside groundctl's own package",
    ("groundctl/init_cmd.py", "_first_spec", "...read_text"):
        "one of the example specs bundled with groundctl (ENVIRONMENTS_DIR), chosen from their own listing",
    ("bootstrap/records/proc_probe.py", "_small", "open"): "/proc/<pid>/ files the kernel serves, to probe a lock holder",
    ("bootstrap/destinations.py", "_probe", "os.fdopen"):
        "writes the probe file (mkstemp) that shows a destination folder can be written, then removes it",
    ("bootstrap/destinations.py", "write_text", "os.fdopen"):
        "writes a new temporary file (mkstemp) beside the destination, renamed into place",
    ("recovery/rehearsal/scratch.py", "ScratchBackend._write", "os.open"):
        "writes a file in the rehearsal's private scratch folder (0600)",
    ("recovery/rehearsal/scratch.py", "ScratchBackend._write", "os.fdopen"): "the descriptor above",
    ("stacks/common/manifest.py", "read_manifest", "os.open"):
        "a Pulumi program, which imports nothing from the orchestrator: it stats and refuses anything but a regular "
        "file, opens non-blocking and reads at most MAX_MANIFEST_BYTES; the orchestrator has read the same file "
        "through the reader before the program runs",
    ("stacks/common/manifest.py", "read_manifest", "os.fdopen"): "the descriptor above",
}


def _callee(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        base = func.value
        if isinstance(base, ast.Name):
            return f"{base.id}.{func.attr}"
        return f"...{func.attr}"
    return "?"


def _opening_calls(tree: ast.AST) -> list[tuple[str, str, int]]:
    """(enclosing function's dotted name, the call as written, line) of every file-opening call in a module."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, scope: tuple[str, ...]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, (*scope, child.name))
                continue
            if isinstance(child, ast.Call):
                name = child.func.attr if isinstance(child.func, ast.Attribute) else getattr(child.func, "id", "")
                if name in OPENERS:
                    found.append((".".join(scope) or "<module>", _callee(child.func), child.lineno))
            visit(child, scope)

    visit(tree, ())
    return found


def test_product_code_opens_a_file_by_path_only_through_the_reader_or_for_a_stated_reason():
    seen, unexplained = set(), []
    for top in PRODUCT:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            for scope, call, line in _opening_calls(ast.parse(path.read_text(encoding="utf-8"))):
                key = (rel, scope, call)
                seen.add(key)
                if key not in ALLOWED:
                    unexplained.append(f"{rel}:{line} {scope}: {call}()")
    assert not unexplained, ("these open a file another way than bootstrap.kit.user_files.read_user_file; read a file "
                             "a user names through it, or add the call to ALLOWED with why the file is not one a user "
                             "names:\n" + "\n".join(unexplained))
    stale = sorted(set(ALLOWED) - seen)
    assert not stale, f"ALLOWED names calls that are no longer there: {stale}"


def test_the_scan_finds_each_way_of_opening_a_file():
    source = ("def f(p, q):\n    open(p)\n    p.read_text()\n    q.read_bytes()\n    os.open(p, 0)\n"
              "    Path(p).open()\n    os.fdopen(3)\n    p.stat()\n")
    assert [call for _, call, _ in _opening_calls(ast.parse(source))] == \
        ["open", "p.read_text", "q.read_bytes", "os.open", "...open", "os.fdopen"]
