"""The README's spec reference table is the spec: one row per field of the models, each with its default."""

from __future__ import annotations

import re
import typing

from pydantic import BaseModel

from bootstrap.spec import EnvironmentSpec
from tests import docs

_ROW = re.compile(r"^\| `([a-z0-9_.\[\]]+)` \| ([^|]+) \|", re.M)


def _leaves(model: type[BaseModel], prefix: str = "") -> dict[str, str]:
    """Every field path that holds a value (not a model), with its default as the table writes it."""
    out: dict[str, str] = {}
    for name, field in model.model_fields.items():
        kinds = [field.annotation, *typing.get_args(field.annotation)]
        listed = any(typing.get_origin(k) is list for k in kinds)
        inner = [b for k in kinds for b in (k, *typing.get_args(k)) if isinstance(b, type) and issubclass(b, BaseModel)]
        if inner:
            out |= _leaves(inner[0], f"{prefix}{name}{'[]' if listed else ''}.")
            continue
        default = field.default
        out[prefix + name] = ("required" if field.is_required() else "—" if default is None
                              else str(default).lower() if isinstance(default, bool) else str(default))
    return out


def _table() -> dict[str, str]:
    section = docs.section("spec.md", "The environment spec, field by field")
    return {path: default.strip() for path, default in _ROW.findall(section)}


def test_every_field_of_the_spec_is_in_the_readme_with_its_default():
    fields, table = _leaves(EnvironmentSpec), _table()
    assert set(table) == set(fields), (sorted(set(fields) - set(table)), sorted(set(table) - set(fields)))
    assert table == fields


def test_the_reference_states_one_base_for_a_relative_manifest_path():
    lines = docs.text("spec.md").splitlines()
    row = next(line for line in lines if line.startswith("| `flux.manifest_path`"))
    assert "relative to the repository (the folder that holds `environments/`" in row
