"""`python tests/journey_groundctl.py ARGS`: groundctl, with the layer programs read from GROUNDCTL_JOURNEY_STACKS
(the engine tier's stand-ins, through the engine's stacks_dir seam) and nothing else of the tests' imported, so
the process runs with exactly the environment it was given (the journey tests' image entry point).

GROUNDCTL_JOURNEY_BY_HAND=1 is an operator's one-time birth of the environment (README "A new environment"): the
stand-in backend declares no AWS resource, so the adoption of the bucket and key the bootstrap made (an import
through the aws plugin, which cannot be had here) is left out; nothing else differs."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bootstrap.engine import automation  # noqa: E402


class JourneyEngine(automation.PulumiEngine):
    def __init__(self, *args, **kwargs):
        kwargs["stacks_dir"] = Path(os.environ["GROUNDCTL_JOURNEY_STACKS"])
        super().__init__(*args, **kwargs)


automation.PulumiEngine = JourneyEngine
if os.environ.get("GROUNDCTL_JOURNEY_BY_HAND") == "1":
    from bootstrap.apply import setup

    _decide = setup.decide
    setup.decide = lambda *args, **kwargs: setup.Setup(_decide(*args, **kwargs).create_stack, None)

from groundctl import main  # noqa: E402

main()
