"""The typer app and its command groups. Each group lives in its own module and only reads arguments,
calls the domain and reports; `groundctl.main` turns what they raise into exit codes."""

from __future__ import annotations

import functools
import importlib
import sys

import typer

from groundctl.common import Group

app = typer.Typer(
    cls=Group,
    name="groundctl",
    help="Bootstrap, rebuild drills and state recovery for infrastructure GitOps on Pulumi.",
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("groundctl")
    except PackageNotFoundError:
        return "unknown (not installed)"


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    # A plain bool flag: typer converts any other option value through pydantic, which every subcommand
    # would then import before it could even print its --help.
    show_version: bool = typer.Option(False, "--version", help="Print the version and exit.", is_eager=True),
) -> None:
    if show_version:
        typer.echo(f"groundctl {installed_version()}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        # Bare `groundctl` is a request for help, not a mistake.
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


# The modules that register each top-level command, in the order the root help lists them.
COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "init": ("init_cmd",), "spec": ("spec_cmd",), "lock": ("lock",), "plan": ("plan",),
    "state": ("state", "state_import", "state_verify", "state_rehearse"),
    "recover": ("recover",), "drill": ("drill",), "emulator": ("emulator_cmd",), "status": ("status",),
    "drift": ("status",), "up": ("up",), "destroy": ("up",),
    "ci": ("ci", "ci_init", "ci_targets", "ci_reports", "ci_binding"), "fleet": ("fleet",),
    "pins": ("pins",),
}


def _modules_for(argv: list[str]) -> tuple[str, ...]:
    """The command modules a command line needs: the named command's own, or every one (root help, a typo)."""
    # The root's options (--help, -h, --version) take no value, so the first other word is the command.
    word = next((a for a in argv if not a.startswith("-")), None)
    if word in COMMAND_MODULES:
        return COMMAND_MODULES[word]
    return tuple(dict.fromkeys(m for mods in COMMAND_MODULES.values() for m in mods))


# Command groups whose modules share one module: that one leaves the app alone (importing it first would import
# the app, which imports the group's other modules, which import the half-made first one).
_GROUPS = {"state": "state_app", "ci": "ci_app"}


def _register() -> None:
    # Command modules register themselves on `app` when imported. Run as the program, only the named
    # command's modules are imported, so `groundctl <cmd> --help` does not pay for every other command;
    # imported as a library (tests, `from groundctl import app`) every command is there.
    from groundctl import _AS_PROGRAM

    for name in _modules_for(sys.argv[1:] if _AS_PROGRAM else []):
        module = importlib.import_module(f"groundctl.{name}")
        if name in _GROUPS:  # its group's other modules import it, so it does not import the app: added here
            app.add_typer(getattr(module, _GROUPS[name]), name=name)


_register()


@functools.cache
def command():
    """The click command typer makes of `app`, made once per process: typer makes it anew on every call (every
    command's signature read again), which a process that runs the front door many times (the tests) pays for
    each time. Calling it is calling `app`; `app`'s pretty exceptions are off, so typer's own hook adds nothing."""
    return typer.main.get_command(app)
