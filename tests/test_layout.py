"""The folder listing is the design: imports run downward only, and the programs stand alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

# Higher floors may import lower ones, never the reverse.
FLOORS = ["groundctl", "recovery", "bootstrap", "stacks"]


def _modules(path: Path) -> set[str]:
    """Every dotted name an absolute import in `path` may refer to (`from a.b import c` gives a.b and a.b.c)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _imports(path: Path) -> set[str]:
    return {name.split(".")[0] for name in _modules(path)} & set(FLOORS)


@pytest.mark.parametrize("floor", FLOORS[1:])
def test_no_import_runs_upward(floor):
    above = set(FLOORS[: FLOORS.index(floor)])
    offenders = {
        str(path.relative_to(REPO)): sorted(_imports(path) & above)
        for path in sorted((REPO / floor).rglob("*.py"))
        if _imports(path) & above
    }
    assert offenders == {}


def test_the_checker_sees_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from recovery.guide import run\n")
    assert _imports(bad) == {"recovery"}


def test_no_test_or_script_reads_outside_the_repository():
    outside = ("REPO" + ".parent", ".." + "/shared")
    for path in [*REPO.joinpath("tests").rglob("*.py"), *REPO.joinpath("bench").rglob("*.py")]:
        text = path.read_text()
        assert not [marker for marker in outside if marker in text], path


# A product file past this many lines holds more than one concern: split it along its seams.
MAX_LINES = 500


def _oversized(root: Path, limit: int = MAX_LINES) -> dict[str, int]:
    found = {}
    for floor in FLOORS:
        for path in sorted((root / floor).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > limit:
                found[str(path.relative_to(root))] = lines
    return found


def test_no_product_file_is_over_500_lines():
    assert _oversized(REPO) == {}, "split these files along their seams (one concern per file)"


def test_the_checker_names_an_oversized_file(tmp_path):
    (tmp_path / "recovery").mkdir()
    (tmp_path / "recovery" / "big.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (tmp_path / "recovery" / "fine.py").write_text("x = 1\n" * MAX_LINES)
    assert _oversized(tmp_path) == {"recovery/big.py": MAX_LINES + 1}


# Inside these floors the packages are floors too: no circle between them, of any length.
PACKAGED = ["recovery", "bootstrap"]


def _package_edges(root: Path, floor: str) -> dict[str, set[str]]:
    packages = {p.name for p in (root / floor).iterdir() if (p / "__init__.py").is_file()}
    edges: dict[str, set[str]] = {name: set() for name in packages}
    for name in packages:
        for path in (root / floor / name).rglob("*.py"):
            for module in _modules(path):
                parts = module.split(".")
                if parts[0] == floor and len(parts) > 1 and parts[1] in packages and parts[1] != name:
                    edges[name].add(parts[1])
    return edges


def _circle(edges: dict[str, set[str]]) -> list[str]:
    """One circle among the packages (its packages in order, the first repeated at the end), or []."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return []


@pytest.mark.parametrize("floor", PACKAGED)
def test_no_circle_between_the_packages_of_a_floor(floor):
    assert _circle(_package_edges(REPO, floor)) == [], "move what both sides need below both"


def test_the_checker_finds_a_circle_of_three(tmp_path):
    for name, target in (("a", "b"), ("b", "c"), ("c", "a")):
        (tmp_path / "recovery" / name).mkdir(parents=True)
        (tmp_path / "recovery" / name / "__init__.py").write_text("")
        (tmp_path / "recovery" / name / "m.py").write_text(f"def f():\n    from recovery.{target} import m\n")
    assert _circle(_package_edges(tmp_path, "recovery")) == ["a", "b", "c", "a"]


# A floor's root holds its few cross-cutting modules; the rest live in the package of the step they serve.
MAX_LOOSE = 8


@pytest.mark.parametrize("floor", PACKAGED)
def test_a_floor_root_holds_few_loose_modules(floor):
    loose = sorted(p.name for p in (REPO / floor).glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= MAX_LOOSE, loose


@pytest.mark.parametrize("floor", PACKAGED)
def test_each_package_says_what_it_is_for(floor):
    silent = [p.name for p in (REPO / floor).iterdir()
              if (p / "__init__.py").is_file() and not ast.get_docstring(ast.parse((p / "__init__.py").read_text()))]
    assert silent == []


def test_every_command_module_can_be_imported_first():
    """A library user, a test or a tool may import any `groundctl.<module>` before the app: each must load in a
    fresh interpreter with nothing of groundctl imported yet (groundctl.ci once failed so: its modules import it
    and the app imports them). One interpreter, groundctl's modules dropped between imports."""
    import subprocess
    import sys

    names = sorted(p.stem for p in (REPO / "groundctl").glob("*.py") if p.stem != "__main__")
    script = ("import importlib, sys\nfailed = []\nfor name in sys.argv[1:]:\n"
              "    for loaded in [m for m in sys.modules if m == 'groundctl' or m.startswith('groundctl.')]:\n"
              "        del sys.modules[loaded]\n"
              "    try:\n        importlib.import_module(name)\n"
              "    except Exception as exc:\n        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
              "print('\\n'.join(failed))\n")
    done = subprocess.run([sys.executable, "-c", script, *(f"groundctl.{n}" for n in names)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(names) > 20 and done.stdout.strip() == "", done.stdout
