"""`python tests/engine_programs/groundctl_main.py ARGS`: groundctl's front door, with the layer
programs read from ENGINE_TIER_STACKS (the engine's stacks_dir seam). The engine tier runs it as a
child process when a run must be watched by other commands, or killed."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.engine_programs.tier import install_stacks_dir  # noqa: E402

install_stacks_dir(Path(os.environ["ENGINE_TIER_STACKS"]))

from groundctl import main  # noqa: E402

main()
