"""The typer app and its command groups. Each group lives in its own module and only reads arguments,
calls the domain and reports; `groundctl.main` turns what they raise into exit codes."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Optional

import typer

app = typer.Typer(
    name="groundctl",
    help="Bootstrap, rebuild drills and state recovery for infrastructure GitOps on Pulumi.",
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version() -> str:
    try:
        return version("groundctl")
    except PackageNotFoundError:
        return "unknown (not installed)"


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    show_version: Optional[bool] = typer.Option(None, "--version", help="Print the version and exit.", is_eager=True),
) -> None:
    if show_version:
        typer.echo(f"groundctl {_version()}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        # Bare `groundctl` is a request for help, not a mistake.
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


def _register() -> None:
    # Command modules register themselves on `app` when imported.
    from groundctl import spec_cmd  # noqa: F401
    from groundctl import lock  # noqa: F401
    from groundctl import state

    app.add_typer(state.state_app, name="state")
    from groundctl import plan  # noqa: F401
    from groundctl import state_import  # noqa: F401
    from groundctl import recover, state_verify  # noqa: F401
    from groundctl import drill  # noqa: F401
    from groundctl import emulator_cmd, status, up  # noqa: F401
    from groundctl import ci  # noqa: F401
    from groundctl import fleet  # noqa: F401


_register()
