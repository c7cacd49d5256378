"""Finding a spec file (and saying so when it is a bundled example) and reading it into plain data, refusing
what a spec never is before it costs time or memory.

A spec is a short, hand-written YAML mapping. Anything far from that (a file of megabytes, thousands
of nesting levels, an integer of thousands of digits, the same key twice) is a mistake or an attack,
and each is refused with its limit named rather than discovered as a RecursionError or a silently
winning last key.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

import bootstrap
from bootstrap.kit.errors import BadInput, SpecError
from bootstrap.kit.user_files import UnusableFile, read_user_file

MAX_SPEC_BYTES = 256 * 1024
MAX_DEPTH = 32
MAX_INT_DIGITS = 30
MAX_NAME_CHARS = 255
MAX_PATH_CHARS = 4096
_TOO_DEEP = f"the YAML nests more than {MAX_DEPTH} levels deep; a spec needs a handful"
QUOTE_PREFIX = 60
# The example specs shipped with groundctl, package data of bootstrap.spec (so a wheel holds them; groundctl's own
# checkout links environments/ to them): found only when the working folder holds no environments/.
ENVIRONMENTS_DIR = Path(bootstrap.__file__).resolve().parent / "spec" / "examples"


def bounded(value: object, limit: int = QUOTE_PREFIX) -> str:
    """`value` as text short enough to quote in a message: a prefix and the full length."""
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def bounded_quotes(message: str, limit: int = QUOTE_PREFIX) -> str:
    """Every quoted value in `message` cut to a bounded prefix, so a huge bad value is never echoed whole."""
    return re.sub(r"'([^']{%d,})'" % (limit + 1), lambda m: f"'{bounded(m.group(1), limit)}'", message)


class _Strict:
    """What a spec's loader refuses beyond SafeLoader's (no Python tags): duplicate keys, deep nesting and huge
    integers. Composing and constructing run in Python, which can refuse at depth 33; libyaml only scans and
    parses (a state machine, not a recursion), about four times faster than Python's scanner."""

    _depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise _Refusal(mark, _TOO_DEEP)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            if key is None:
                continue
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _Refusal(key_node.start_mark,
                               f"the key '{bounded(key)}' appears twice (lines {seen[key]} and {line}); YAML would "
                               "silently keep the last one, so keep exactly one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node):
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise _Refusal(node.start_mark, f"an integer of {digits:,} digits; no spec field takes more than "
                                            f"{MAX_INT_DIGITS}")
        return super().construct_yaml_int(node)


class _PythonStrictLoader(_Strict, yaml.SafeLoader):
    pass


if getattr(yaml, "__with_libyaml__", False):
    from yaml._yaml import CParser  # noqa: E402 - only where PyYAML was built with libyaml

    class _StrictLoader(_Strict, Composer, CParser, SafeConstructor, Resolver):
        def __init__(self, stream):
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
else:  # pragma: no cover - PyYAML's wheels carry libyaml
    _StrictLoader = _PythonStrictLoader

for _loader in {_StrictLoader, _PythonStrictLoader}:
    _loader.add_constructor("tag:yaml.org,2002:int", _loader.construct_yaml_int)
    _loader.add_constructor("tag:yaml.org,2002:map", _loader.construct_yaml_map)


def load_strict(text: str, loader: type = _StrictLoader) -> object:
    """`text`'s YAML data through a strict loader; _Refusal or yaml.YAMLError. libyaml refuses deep nesting itself
    in some releases (at 1,000 levels, while scanning ahead of the composer): that is the same refusal."""
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - SafeLoader subclasses
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(getattr(exc, "problem", "")):
            raise _Refusal(getattr(exc, "problem_mark", None), _TOO_DEEP) from None
        raise


class _Refusal(Exception):
    def __init__(self, mark, message: str):
        super().__init__(message)
        self.where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        self.message = message


def check_name(name_or_path: str, what: str = "The environment") -> None:
    """A name or path too long for any file system is bad input, not an OSError deep inside."""
    longest = max((len(part) for part in name_or_path.split("/")), default=0)
    if longest > MAX_NAME_CHARS or len(name_or_path) > MAX_PATH_CHARS:
        raise BadInput(f"{what} '{bounded(name_or_path)}' is too long for a file system ({len(name_or_path):,} "
                       f"characters; a name may have at most {MAX_NAME_CHARS}, a path {MAX_PATH_CHARS:,}). "
                       "Give a shorter name or path.")


def read_spec_data(path: Path) -> object:
    """The YAML data of the spec file at `path`, which exists. Every refusal is a SpecError naming the file."""
    source = str(path)
    try:  # as every file a user names is read: a FIFO, a device or a hung mount is refused, never waited for
        raw = read_user_file(source, what="The spec", max_bytes=MAX_SPEC_BYTES, fix="")
        text = raw.decode("utf-8")
    except UnusableFile as exc:
        limit = " for a spec; a spec is a short YAML file" if "-byte limit" in exc.reason else ""
        raise SpecError(source, [("(file)", f"{exc.reason}{limit}; give the path of an environment spec YAML "
                                            "file")]) from None
    except UnicodeDecodeError:
        raise SpecError(source, [("(file)", "it is not UTF-8 text (a binary file?); give the path of an "
                                            "environment spec YAML file")]) from None
    try:
        return load_strict(text)
    except _Refusal as exc:
        raise SpecError(source, [(exc.where, exc.message)]) from None
    except RecursionError:
        raise SpecError(source, [("(file)", "the YAML nests too deeply; a spec needs a handful of levels")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        problem = bounded(getattr(exc, "problem", None) or exc, 200)
        raise SpecError(source, [(where, f"the file is not valid YAML ({problem})")]) from None


def environments_dir() -> Path:
    """`./environments` when the operator works in a checkout of their own, else the shipped examples."""
    here = Path.cwd() / "environments"
    return here if here.is_dir() else ENVIRONMENTS_DIR


_NOTED: set[str] = set()


def bundled_example(path: Path) -> bool:
    """True when `path` is one of groundctl's shipped example specs reached only because the working folder
    holds no environments/ of its own: acting on it unknowingly would act on an example account."""
    return not (Path.cwd() / "environments").is_dir() and path.resolve().parent == ENVIRONMENTS_DIR


def bundled_notice(path: Path, account_id: str) -> str | None:
    """What to tell the operator, once per run, when `path` is a bundled example; None otherwise."""
    if not bundled_example(path) or str(path) in _NOTED:
        return None
    _NOTED.add(str(path))
    return (f"{Path.cwd()} holds no environments/ folder, so this is groundctl's bundled example spec {path} "
            f"(account {account_id}), not one of yours. Run groundctl from the folder that holds your "
            "environments/, or give your spec's path.")


def spec_path(name_or_path: str, base: Path) -> Path:
    """`dev` means environments/dev.yaml; anything with a slash or .yaml suffix is a path."""
    if "/" in name_or_path or name_or_path.endswith((".yaml", ".yml")):
        return Path(name_or_path)
    return base / f"{name_or_path}.yaml"
