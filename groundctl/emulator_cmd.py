"""`groundctl emulator start [--port N]`: keep one AWS emulator running for several commands.

It runs in the foreground until Ctrl-C (or SIGTERM), which ends it with exit 130. Its contents live in memory only: stopping it
loses every bucket, key and state in it, which is what a throwaway local environment wants.
"""

from __future__ import annotations

import typer

from bootstrap.kit import console
from bootstrap.kit import interrupts
from groundctl.cli import app
from groundctl.common import Group, json_opt
from bootstrap.target import ENDPOINT_ENV

emulator_app = typer.Typer(cls=Group, help="The local AWS emulator (moto server) for the `local` environment.",
                           no_args_is_help=True)
app.add_typer(emulator_app, name="emulator")


@emulator_app.command("start")
def start(
    port: int = typer.Option(0, "--port", min=0, max=65535, help="Loopback port; 0 picks a free one."),
    json_out: bool = json_opt("the endpoint"),
    verbose: bool = typer.Option(False, "--verbose", help="Log every request the emulator serves."),
) -> None:
    """Run the AWS emulator on loopback in the foreground and print the variable to export."""
    from bootstrap.aws.emulator import Emulator

    emulator = Emulator(port=port, verbose=verbose)
    try:
        url = emulator.start()
        if json_out:
            console.emit_json({"endpoint_url": url, "env": {ENDPOINT_ENV: url}})
        else:
            console.data(f"export {ENDPOINT_ENV}={url}")
            console.info(f"AWS emulator running at {url}. In another shell, run the line above, then e.g. "
                         "`groundctl up local --yes`. Ctrl-C stops it; everything in it is lost then.")
        # Ctrl-C and SIGTERM arrive here as KeyboardInterrupt (the front door's handler): the emulator
        # stops below and the command ends as interrupted, exit 130.
        interrupts.wait_for_signal()
    finally:
        emulator.stop()
        console.info("AWS emulator stopped.")
