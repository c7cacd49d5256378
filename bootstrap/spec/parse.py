"""Reading a spec: a name or path to the validated model, and pydantic's errors said as problems, each
with its field path and the fix."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ValidationError

from bootstrap.kit.errors import BadInput, SpecError
from bootstrap.flux.locked import fill as fill_from_lock
from bootstrap.flux.manifest import repository_of
from bootstrap.flux.manifest import resolve as resolve_manifest
from bootstrap.spec.models import EnvironmentSpec
from bootstrap.spec.spec_file import bounded_quotes, bundled_notice, check_name, environments_dir, read_spec_data, spec_path

_FIXES = {
    "missing": "add this required key",
    "int_parsing": "use a whole number",
    "bool_parsing": "use true or false",
    "string_type": "use a quoted string",
    "list_type": "use a YAML list",
    "literal_error": None,
    "greater_than_equal": None,
    "less_than_equal": None,
    "too_short": None,
    "string_pattern_mismatch": None,
}


def _path(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _allowed_keys(loc: tuple) -> list[str]:
    model: type[BaseModel] = EnvironmentSpec
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            return []
        ann = field.annotation
        inner = getattr(ann, "__args__", None)
        candidates = [ann, *(inner or [])]
        for c in candidates:
            for sub in [c, *getattr(c, "__args__", [])]:
                if isinstance(sub, type) and issubclass(sub, BaseModel):
                    model = sub
                    break
            else:
                continue
            break
        else:
            return []
    return list(model.model_fields)


def _problem(err: dict) -> tuple[str, str]:
    loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        key = str(loc[-1])
        close = difflib.get_close_matches(key, _allowed_keys(loc), n=1, cutoff=0.5)
        hint = f"did you mean '{close[0]}'?" if close else "remove it"
        return _path(loc), f"unknown key '{key}' ({hint})"
    msg = err["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    fix = _FIXES.get(kind)
    where = _path(loc)
    # Cross-field rules live on the root model; they name their field as "a.b: message".
    if not loc and re.match(r"^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)+: ", msg):
        where, msg = msg.split(": ", 1)
    return where, bounded_quotes(f"{msg}{'; ' + fix if fix else ''}")


def parse_spec(data: object, source: str, flux_lock: str = "") -> EnvironmentSpec:
    """Validate already-loaded YAML data; `source` names the file in errors, `flux_lock` what the repository's
    pins lock lacks for a spec that leaves its Flux manifest's digest to it (bootstrap.flux.locked)."""
    if not isinstance(data, dict):
        raise SpecError(source, [("(top level)", "the file must hold a YAML mapping of keys")])
    try:
        return EnvironmentSpec.model_validate(data, context={"flux_lock": flux_lock})
    except ValidationError as exc:
        raise SpecError(source, [_problem(e) for e in exc.errors()]) from None


def load_spec(name_or_path: str, base: Optional[Path] = None) -> EnvironmentSpec:
    check_name(name_or_path)
    base = base or environments_dir()
    path = spec_path(name_or_path, base)
    if not path.is_file():
        known = sorted(p.stem for p in base.glob("*.yaml")) if base.is_dir() else []
        raise BadInput(
            f"No environment spec at {path}. Give an environment name from {base} "
            f"({', '.join(known) or 'none found'}) or a path to a spec file."
        )
    data, lacking = fill_from_lock(read_spec_data(path), repository_of(path))
    spec = resolve_manifest(parse_spec(data, str(path), lacking), path)
    if path.suffix in (".yaml", ".yml") and path.parent == base and spec.name != path.stem:
        raise SpecError(
            str(path), [("name", f"'{spec.name}' differs from the file name '{path.stem}'; make them equal")]
        )
    notice = bundled_notice(path, spec.aws.account_id)
    if notice:
        from bootstrap.kit import console

        console.warn(notice)  # on stderr: --json stays one document
    return spec
