"""The Engine's surface: only what groundctl calls.

`cancel` is gone: on a DIY backend `pulumi cancel` deletes every lock file of the stack, live holders'
included (pkg/backend/diy/backend.go, CancelCurrentUpdate). `import_state` had no caller; `stack import`
also drops pending operations and needs --force past integrity failures, so recovery restores S3
versions instead.
"""

from __future__ import annotations

import pytest

from bootstrap.engine.automation import PulumiEngine
from bootstrap.engine.protocol import Engine
from tests.fakes.engine import InMemoryEngine

GONE = ("cancel", "import_state")


@pytest.mark.parametrize("name", GONE)
def test_the_engine_offers_no_stack_cancel_and_no_state_import(name):
    assert not hasattr(Engine, name)
    assert not hasattr(PulumiEngine, name)
    assert not hasattr(InMemoryEngine, name)


def test_the_fake_engine_implements_every_method_of_the_protocol():
    wanted = {n for n in vars(Engine) if not n.startswith("_")}
    offered = {n for n in vars(InMemoryEngine) if not n.startswith("_") and callable(getattr(InMemoryEngine, n))}
    assert wanted <= offered
