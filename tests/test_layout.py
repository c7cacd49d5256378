"""The folder listing is the design: imports run downward only, and the programs stand alone."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

# Higher floors may import lower ones, never the reverse.
FLOORS = ["groundctl", "recovery", "bootstrap", "stacks"]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
    return found & set(FLOORS)


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
