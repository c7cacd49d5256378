"""What several command modules share: the group class, the common arguments, the emulator notice, opening the state
bucket for commands that only read it, checking an output directory before any work, and tables."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.table import Table
from typer.core import TyperGroup

from bootstrap.kit import console
from bootstrap.kit.errors import BadInput
from bootstrap.target import ENDPOINT_ENV, Target, open_target, resolve_endpoint


class Group(TyperGroup):
    """A command group whose --help flag is False, not None, when absent.

    typer converts an option's value through pydantic unless it is already a bool, and its own help flag
    has no default: every `groundctl <group> <cmd> --help` would import pydantic just to print help.
    Every group of this app uses this class."""

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option


ENV_ARG = typer.Argument(..., help="Environment name (environments/<name>.yaml) or a spec path.")
ENDPOINT_OPT = typer.Option(None, "--endpoint-url",
                            help=f"AWS endpoint (an emulator) for a non-production environment; or set {ENDPOINT_ENV}.")


def json_opt(what: str) -> typer.models.OptionInfo:
    return typer.Option(False, "--json", help=f"Print {what} as JSON on stdout.")


def split_layers(values: Optional[list[str]]) -> Optional[list[str]]:
    """`--layers a,b --layers c` as one list; None when the flag was not given (every layer).

    A flag given with nothing in it (`--layers ''`, or an unset variable in a script) is refused:
    reading it as "every layer" would turn a typo into applying the whole environment.
    """
    if values is None:
        return None
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    if not names:
        raise BadInput("--layers was given but names no layer (an empty value, or only commas). Name the layers "
                       "to act on, e.g. --layers network,cluster, or leave the flag out to act on every layer.")
    return names


def announce_emulator(url: str) -> None:
    console.info(f"Started the embedded AWS emulator at {url} for this command (its contents go when it ends; "
                 "`groundctl emulator start` keeps one running).")


def refuse_embedded(environment: str, endpoint_url: Optional[str]):
    """The environment's spec; BadInput when its state would be read from an emulator started for this command,
    which holds nothing: whatever an earlier command wrote went with the emulator it ran on."""
    from bootstrap.spec import load_spec

    spec = load_spec(environment)
    if resolve_endpoint(spec, endpoint_url, os.environ).url == "embedded":
        raise BadInput(
            f"Environment '{spec.name}' uses the embedded emulator, and its state lives only while an emulator "
            "runs: one started for this command would be empty, whatever an earlier command wrote (that state went "
            "with the emulator it ran on). Run `groundctl emulator start`, then pass its URL with --endpoint-url or "
            f"set {ENDPOINT_ENV}."
        )
    return spec


@contextmanager
def state_reader(environment: str, endpoint_url: Optional[str]) -> Iterator[Target]:
    """The environment for a command that only reads its state bucket, which must exist.

    An `embedded` emulator is refused rather than started: a fresh one is empty, so reading it could
    only ever say that nothing exists.
    """
    spec = refuse_embedded(environment, endpoint_url)
    with open_target(environment, endpoint_url=endpoint_url, spec=spec) as target:
        target.require_bucket()
        yield target


def writable_dir(out: Optional[Path], flag: str = "--out") -> None:
    """BadInput now, before any work, unless `out` is a folder a report can be written into."""
    if out is not None:
        from bootstrap.destinations import check_dir  # yaml loads only for the commands that write reports

        check_dir(out, flag)


def table(title: str, *columns: str) -> Table:
    t = Table(title=title)
    for column in columns:
        t.add_column(column)
    return t
