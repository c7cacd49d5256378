"""The front door: the only place that turns errors into exit codes.

This module stays tiny and imports nothing heavy, so that Ctrl-C (or SIGTERM) is handled from the
first line groundctl runs: an interrupt before the command started changes nothing and says so; one
during a command unwinds through every `finally` (the lock is released, the run record closed) and
ends with one line and exit 130. The commands themselves live in `groundctl.cli`.
"""

from __future__ import annotations

import os
import signal
import sys

EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
_running = False


def _early_signal(signum, frame) -> None:
    if _running:
        from bootstrap.kit.interrupts import on_signal

        on_signal(signum, frame)
        return
    sys.stderr.write("Interrupted before the command started; nothing was changed.\n")
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


def _is_program() -> bool:
    # Run as `groundctl …` or `python -m groundctl …` (argv[0] is "-m" while runpy imports the package);
    # a library or test importing groundctl keeps its own signal handling.
    return bool(sys.argv) and (sys.argv[0] == "-m" or os.path.basename(sys.argv[0]) == "groundctl")


_AS_PROGRAM = _is_program()
if _AS_PROGRAM:
    signal.signal(signal.SIGINT, _early_signal)
    signal.signal(signal.SIGTERM, _early_signal)


def __getattr__(name: str):
    if name == "app":  # `from groundctl import app`, without importing every command for `main`
        from groundctl.cli import app

        return app
    raise AttributeError(name)


def main() -> None:
    global _running
    from bootstrap.kit import interrupts

    interrupts.install()
    _running = True
    # Standalone mode lets typer report usage errors itself (exit 2); everything else is ours.
    try:
        from bootstrap.kit import console
        from bootstrap.kit.errors import GroundctlError
    except KeyboardInterrupt:
        _interrupted("before the command started; nothing was changed")
    try:
        from groundctl.cli import command

        # Not standalone: click would turn Ctrl-C into a silent abort; usage errors are shown below.
        code = command()(prog_name="groundctl", standalone_mode=False)
        if code == EXIT_INTERRUPTED:  # typer turns a KeyboardInterrupt into Exit(130)
            raise KeyboardInterrupt
        sys.exit(code if isinstance(code, int) else 0)
    except GroundctlError as exc:
        console.error(exc.message)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _interrupted("nothing was left half-done: any environment lock this run held was released and every "
                     "step taken is safe to repeat. Re-run the command to carry on")
    except Exception as exc:
        # click's exceptions (vendored by newer typer, plain click before): matched by shape, not class.
        if type(exc).__name__ == "Abort":
            if isinstance(exc.__cause__, KeyboardInterrupt):
                _interrupted("nothing was left half-done: any environment lock this run held was released and "
                             "every step taken is safe to repeat. Re-run the command to carry on")
            console.error("Aborted.")
            sys.exit(1)
        if callable(getattr(exc, "show", None)) and isinstance(getattr(exc, "exit_code", None), int):
            exc.show()  # a usage error: the command line, not the environment, is wrong
            sys.exit(exc.exit_code)
        if os.environ.get("GROUNDCTL_DEBUG"):
            raise
        from bootstrap.kit.scratch import from_exception

        scratch = from_exception(exc)
        if scratch is not None:  # Python found no folder for temporary files: the machine's, not a bug
            console.error(scratch.message)
            sys.exit(scratch.exit_code)
        if interrupts.received:
            # Cut off mid-way (an import or a clean-up the signal interrupted), the run failed because of the
            # interrupt: it is reported as one, with what may be left to check.
            _interrupted(f"the clean-up after it did not finish ({type(exc).__name__}); check `groundctl lock status` "
                         "for the environment before running the command again")
        if type(exc).__module__.startswith("botocore"):
            # An AWS refusal no layer below turned into a groundctl error (AccessDenied, a 403): the cloud
            # said no, which is exit 4 with its code, not a bug.
            from bootstrap.aws.clients import error_code

            code = error_code(exc) or type(exc).__name__
            said = str(getattr(exc, "response", {}).get("Error", {}).get("Message") or "")[:200]
            console.error(f"AWS refused a request ({code}{': ' + said if said else ''}). Check that the "
                          "credentials in use may do this on the environment's account and state bucket (their IAM "
                          "policy, the bucket and key policies), then re-run.")
            sys.exit(4)
        console.error(
            f"groundctl hit an internal error ({type(exc).__name__}). This is a bug, not a problem with "
            "your input. Re-run with GROUNDCTL_DEBUG=1 to see the details and report them."
        )
        sys.exit(EXIT_INTERNAL)


def _interrupted(what: str) -> None:
    # Every `finally` has run by now (lock released, run record closed). The process ends here, not in
    # interpreter shutdown, where a KeyboardInterrupt seen during an import can still turn exit 130
    # into death by SIGINT, and a second Ctrl-C into a traceback.
    sys.stderr.write(f"Interrupted; {what}.\n")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if _AS_PROGRAM:
        import atexit

        try:
            atexit._run_exitfuncs()  # os._exit skips them: a saved plan's private folder must not be left behind
        except BaseException:  # noqa: BLE001 - a second Ctrl-C here must not turn into a traceback
            pass
        os._exit(EXIT_INTERRUPTED)
    sys.exit(EXIT_INTERRUPTED)  # called in-process (tests): leave the caller's interpreter alive
