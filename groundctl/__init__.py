"""The front door: builds the typer app, and is the only place that turns errors into exit codes.

Each command group lives in its own module and only reads arguments, calls the domain and reports.
"""

from __future__ import annotations

import os
import sys

import typer

from bootstrap import console
from bootstrap.errors import GroundctlError

app = typer.Typer(
    name="groundctl",
    help="Bootstrap, rebuild drills and state recovery for infrastructure GitOps on Pulumi.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _register() -> None:
    # Command modules register themselves on `app` when imported.
    from groundctl import spec_cmd  # noqa: F401
    from groundctl import lock  # noqa: F401
    from groundctl import state  # noqa: F401
    from groundctl import plan  # noqa: F401
    from groundctl import state_import  # noqa: F401
    from groundctl import recover, state_verify  # noqa: F401
    from groundctl import drill  # noqa: F401
    from groundctl import emulator_cmd, status, up  # noqa: F401


_register()

EXIT_INTERNAL = 70


def main() -> None:
    # Standalone mode lets typer report usage errors itself (exit 2); everything else is ours.
    try:
        app(prog_name="groundctl")
    except GroundctlError as exc:
        console.error(exc.message)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        console.error("Interrupted. Re-run the command to resume; every step is safe to repeat.")
        sys.exit(130)
    except Exception as exc:
        if os.environ.get("GROUNDCTL_DEBUG"):
            raise
        console.error(
            f"groundctl hit an internal error ({type(exc).__name__}). This is a bug, not a problem with "
            "your input. Re-run with GROUNDCTL_DEBUG=1 to see the details and report them."
        )
        sys.exit(EXIT_INTERNAL)
